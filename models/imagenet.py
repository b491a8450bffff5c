"""ImageNet-1k conventions shared by the pretrained models: class names and the standard preprocessing
(resize the short side to 256, centre crop 224, scale to [0, 1], normalise per channel)."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


@lru_cache(maxsize=1)
def class_names() -> tuple[str, ...]:
    """The 1,000 class names in class-index order (`imagenet_classes.txt` beside this module names its source)."""
    lines = (Path(__file__).with_name("imagenet_classes.txt")).read_text(encoding="utf-8").splitlines()
    names = tuple(line for line in lines if line and not line.startswith("#"))
    assert len(names) == 1000, f"imagenet_classes.txt holds {len(names)} names, not 1000"
    return names


def load_photo(name: str) -> np.ndarray:
    """An RGB uint8 HWC photo shipped by scikit-image (`skimage.data.<name>`); grey images get three channels,
    stereo pairs give their left view."""
    import skimage.data
    image = getattr(skimage.data, name)()
    image = image[0] if isinstance(image, tuple) else image
    return image[..., :3] if image.ndim == 3 else np.repeat(image[..., None], 3, axis=2)


def preprocess(image: np.ndarray, size: int = 224) -> np.ndarray:
    """HWC uint8 RGB -> [1, 3, size, size] float32: bilinear resize of the short side to size * 8 / 7 (256 for
    224), centre crop, [0, 1], mean/std normalisation."""
    from PIL import Image
    h, w = image.shape[:2]
    scale = round(size * 8 / 7) / min(h, w)
    resized = np.asarray(Image.fromarray(image).resize((round(w * scale), round(h * scale)), Image.BILINEAR))
    top, left = (resized.shape[0] - size) // 2, (resized.shape[1] - size) // 2
    crop = resized[top:top + size, left:left + size].astype(np.float32) / 255.0
    return ((crop - MEAN) / STD).transpose(2, 0, 1)[None].astype(np.float32)
