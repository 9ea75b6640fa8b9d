"""Batch-time transforms of every reader: normalisation and one-hot expansion, defined once.

`BatchTransform` turns a batch's field arrays into `(images, targets)`: NumPy for the NumPy
readers (`__call__`), the same arithmetic in-graph for tf.data (`tf_apply`). Packs store
class indices; one-hot happens here, per batch.
"""

from __future__ import annotations

import numpy as np

from .objects import PADDED

NORMALIZE_MODES = (None, "unit", "dataset")


def unit_scale(dtype) -> float:
    """What "unit" multiplies images of `dtype` by: 1 / its maximum for integers (1/255 for
    uint8, 1/65535 for uint16), 1 for floats (kept as they are)."""
    dtype = np.dtype(dtype)
    return 1.0 / np.iinfo(dtype).max if dtype.kind in "ui" else 1.0


def image_dtype(manifest: dict) -> np.dtype:
    """The stored images' sample type (uint8 for packs that do not say)."""
    field = next((f for f in manifest.get("fields", ()) if f["name"] == "images"), None)
    return np.dtype(field["dtype"] if field else "|u1")


class Normalizer:
    """Images as they are (None), scaled to [0, 1] by their sample type's maximum ("unit"), or
    standardised per band ("dataset")."""

    def __init__(self, mode: str | None, stats: dict, dtype=np.uint8) -> None:
        if mode not in NORMALIZE_MODES:
            raise ValueError(f"normalize must be one of {NORMALIZE_MODES}, got {mode!r}")
        self.mode = mode
        self.scale = unit_scale(dtype)
        self.mean = np.asarray(stats["mean"], np.float32)
        self.inv_std = 1.0 / np.maximum(np.asarray(stats["std"], np.float32), 1e-6)

    def __call__(self, images: np.ndarray) -> np.ndarray:
        if self.mode is None:
            return images
        out = images.astype(np.float32)
        if self.mode == "unit":
            if self.scale != 1.0:
                out *= np.float32(self.scale)
        else:
            out -= self.mean
            out *= self.inv_std
        return out


def one_hot_table(num_classes: int, ignore_index: int | None, task: str) -> np.ndarray:
    """A lookup table: row k is the one-hot vector of class k; other ids (ignore) are all zero.

    Indexing it with a whole batch of ids (`table[ids]`) expands the batch in one vectorised step.
    """
    rows = 65536 if task == "segmentation" and num_classes > 255 else 256
    rows = max(rows, num_classes)
    if ignore_index is not None and task == "segmentation":
        rows = max(rows, ignore_index + 1)
    table = np.zeros((rows, num_classes), np.float32)
    table[np.arange(num_classes), np.arange(num_classes)] = 1.0
    return table


def target_field(task: str) -> str:
    """The field readers yield as targets: masks for segmentation, labels for classification,
    padded boxes and labels ("objects") for detection and instances."""
    if task in ("detection", "instances"):
        return "objects"
    return "masks" if task == "segmentation" else "labels"


def targets_of(arrays: dict, target: str):
    """The targets of a batch's arrays: one field's, or the padded objects' dict."""
    return {k: arrays[k] for k in PADDED} if target == "objects" else arrays[target]


class BatchTransform:
    """Field arrays -> (images, targets), normalised and one-hot as asked."""

    def __init__(self, manifest: dict, normalize: str | None = None, one_hot: bool = False):
        self.target = target_field(manifest["task"])
        self.normalizer = Normalizer(normalize, manifest["stats"], image_dtype(manifest))
        self.num_classes = len(manifest["classes"])
        self.one_hot = (
            one_hot_table(self.num_classes, manifest.get("ignore_index"), manifest["task"])
            if one_hot
            else None
        )

    @property
    def identity(self) -> bool:
        """True when `(images, targets)` are the stored arrays as they are (nothing to compute)."""
        return self.normalizer.mode is None and self.one_hot is None

    def __call__(self, arrays: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        images = self.normalizer(arrays["images"])
        targets = targets_of(arrays, self.target)
        if self.one_hot is not None:
            targets = self.one_hot[targets]
        return images, targets

    def tf_apply(self, arrays: dict) -> tuple:
        """The same transform on tf tensors, in-graph (ids outside 0..C-1 become zero rows)."""
        import tensorflow as tf

        images, targets = arrays["images"], targets_of(arrays, self.target)
        mode = self.normalizer.mode
        if mode is not None:
            images = tf.cast(images, tf.float32)
            if mode == "unit":
                images = images * self.normalizer.scale
            else:
                images = (images - self.normalizer.mean) * self.normalizer.inv_std
        if self.one_hot is not None:
            targets = tf.one_hot(tf.cast(targets, tf.int32), self.num_classes, dtype=tf.float32)
        return images, targets
