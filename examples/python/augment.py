"""torchvision-style augmentation written in numpy, for tfdata workers.

Load it on the workers (`tfdata worker --python-module examples/python/augment.py`, or
`WorkerConfig(python_modules=[...])`); pipelines call it by name: `.map(tfdata.py("augment"))`.
It receives a decoded image and its label as a dict (after `parse_example` + `decode_jpeg`) and
returns (image, label): a random crop, a horizontal flip half the time, brightness and contrast
jitter, normalization, and HWC to CHW, the way
`transforms.Compose([RandomCrop, RandomHorizontalFlip, ColorJitter, ToTensor, Normalize])` does.
"""

import numpy as np

import tfdata

CROP = 24
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32) * 255
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32) * 255

# Each helper process is its own interpreter with its own generator, seeded from the OS.
_rng = np.random.default_rng()


@tfdata.function("augment")
def augment(element):
    image, label = element["image"], element["label"]
    h, w, _ = image.shape
    if h < CROP or w < CROP:
        raise ValueError(f"image {h}x{w} is smaller than the {CROP}x{CROP} crop")
    top, left = _rng.integers(0, h - CROP + 1), _rng.integers(0, w - CROP + 1)
    out = image[top:top + CROP, left:left + CROP].astype(np.float32)
    if _rng.random() < 0.5:
        out = out[:, ::-1]
    brightness, contrast = _rng.uniform(0.8, 1.2), _rng.uniform(0.8, 1.2)
    mean = out.mean()
    out = np.clip((out * brightness - mean) * contrast + mean, 0, 255)
    out = (out - MEAN) / STD
    return np.ascontiguousarray(out.transpose(2, 0, 1)), label
