"""Real photos from scikit-image, preprocessed as ImageNet models expect (models.imagenet)."""
from __future__ import annotations

from models.imagenet import MEAN, STD, load_photo, preprocess as imagenet_input  # noqa: F401

PHOTOS = ("chelsea", "coffee", "astronaut", "rocket", "hubble_deep_field", "immunohistochemistry", "retina",
          "colorwheel")
