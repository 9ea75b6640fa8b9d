"""What the kinds' statistics hooks share: exact integer histograms; per-band moments and
counts per class id read back from shard receipts; a field's shape as `packer info` words it."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import cv2
import numpy as np

if TYPE_CHECKING:
    from ..schema import Field


def histogram(array: np.ndarray, channel: int, bins: int) -> np.ndarray:
    """Exact integer counts of the values 0..bins-1 of one channel (cv2.calcHist, as int64)."""
    hist = cv2.calcHist([array], [channel], None, [bins], [0, bins])
    return hist.ravel().astype(np.int64)


def last_nonzero(counts: np.ndarray) -> int:
    """Index of the last non-zero count, -1 when all are zero (np.trim_zeros is 10x slower)."""
    nonzero = np.flatnonzero(counts)
    return int(nonzero[-1]) if nonzero.size else -1


def class_counts(receipts: list[dict]) -> Counter:
    """Class id -> count, summed over the receipts' `class_counts`."""
    classes: Counter = Counter()
    for r in receipts:
        classes.update({int(k): v for k, v in r["class_counts"].items()})
    return classes


def shape_text(field: Field) -> str:
    """`name [H, W, C] dtype`, a ragged field's rows as `[N, ...]`, bit-packed ones `(bits)`."""
    shape = ["N", *field.shape] if field.ragged else list(field.shape)
    return f"{field.name} {shape} {field.dtype}".replace("'", "") + (
        " (bits)" if field.packing else ""
    )


def channel_moments(receipts: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """Per-band mean and variance: from exact histograms (8-bit images), or from counts, sums
    and sums of squares (16-bit and float images)."""
    moments = [
        np.asarray(r["channel_moments"], np.float64) for r in receipts if "channel_moments" in r
    ]
    with np.errstate(invalid="ignore", divide="ignore"):
        if moments:
            count, total, squares = np.sum(moments, axis=0).T
            mean = total / count
            return mean, squares / count - mean**2
        hists = [np.asarray(r["channel_hist"], np.float64) for r in receipts]
        hists = [h for h in hists if h.any()]  # a shard of rejected records counted nothing
        hist = np.sum(hists, axis=0) if hists else np.zeros((3, 256))
        values = np.arange(256, dtype=np.float64)
        total = hist.sum(axis=1)
        mean = (hist * values).sum(axis=1) / total
        return mean, (hist * values**2).sum(axis=1) / total - mean**2
