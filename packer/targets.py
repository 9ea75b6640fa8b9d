"""Batch-time transforms shared by the NumPy readers: normalisation and one-hot expansion."""

from __future__ import annotations

import numpy as np

NORMALIZE_MODES = (None, "unit", "dataset")


class Normalizer:
    """uint8 images as they are (None), scaled to [0, 1] ("unit"), or standardised ("dataset")."""

    def __init__(self, mode: str | None, stats: dict) -> None:
        if mode not in NORMALIZE_MODES:
            raise ValueError(f"normalize must be one of {NORMALIZE_MODES}, got {mode!r}")
        self.mode = mode
        self.mean = np.asarray(stats["mean"], np.float32)
        self.inv_std = 1.0 / np.maximum(np.asarray(stats["std"], np.float32), 1e-6)

    def __call__(self, images: np.ndarray) -> np.ndarray:
        if self.mode is None:
            return images
        out = images.astype(np.float32)
        if self.mode == "unit":
            out *= np.float32(1 / 255)
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
