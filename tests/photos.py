"""Real photos from scikit-image, preprocessed as ImageNet models expect (resize 256, centre crop 224, mean/std)."""
from __future__ import annotations

import numpy as np

PHOTOS = ("chelsea", "coffee", "astronaut", "rocket", "hubble_deep_field", "immunohistochemistry", "retina",
          "colorwheel")
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


def load_photo(name: str) -> np.ndarray:
    import skimage.data
    image = getattr(skimage.data, name)()
    return image[..., :3] if image.ndim == 3 else np.repeat(image[..., None], 3, axis=2)


def imagenet_input(image: np.ndarray, size: int = 224) -> np.ndarray:
    """HWC uint8 RGB -> [1, 3, size, size] float32, normalised."""
    from PIL import Image
    h, w = image.shape[:2]
    scale = 256 / min(h, w)
    resized = np.asarray(Image.fromarray(image).resize((round(w * scale), round(h * scale)), Image.BILINEAR))
    top, left = (resized.shape[0] - size) // 2, (resized.shape[1] - size) // 2
    crop = resized[top:top + size, left:left + size].astype(np.float32) / 255.0
    return ((crop - MEAN) / STD).transpose(2, 0, 1)[None].astype(np.float32)
