"""Detection targets at batch time: per-sample dicts (torchvision's convention) or padded
arrays (KerasHub's), with the objects padding cuts counted, never silently lost."""

from __future__ import annotations

import warnings

import numpy as np

PAD = -1  # KerasHub's padding of boxes and labels


class Padder:
    """Per-sample targets -> `{"boxes": float32 [B,max_boxes,4], "labels": int32
    [B,max_boxes]}` padded with -1; `cut` counts the objects that did not fit, and the first
    batch that cuts any warns once, naming the option."""

    def __init__(self, max_boxes: int) -> None:
        if not isinstance(max_boxes, int) or isinstance(max_boxes, bool) or max_boxes < 1:
            raise ValueError(f"max_boxes must be a positive integer, not {max_boxes!r}")
        self.max_boxes = max_boxes
        self.cut = 0

    def __call__(self, fields: dict[str, np.ndarray], counts: np.ndarray) -> dict[str, np.ndarray]:
        """Padded targets of a batch's ragged fields (every row, sample after sample) and
        each sample's row count."""
        batch = len(counts)
        boxes = np.full((batch, self.max_boxes, 4), PAD, np.float32)
        labels = np.full((batch, self.max_boxes), PAD, np.int32)
        row = np.repeat(np.arange(batch), counts)
        place = np.arange(len(row)) - np.repeat(np.cumsum(counts) - counts, counts)
        keep = place < self.max_boxes
        boxes[row[keep], place[keep]] = fields["boxes"][keep]
        labels[row[keep], place[keep]] = fields["labels"][keep]
        cut = int((~keep).sum())
        if cut:
            if not self.cut:
                warnings.warn(
                    f"max_boxes={self.max_boxes} cut {cut} objects from a batch (images with "
                    "more objects keep their first max_boxes); raise max_boxes to keep them",
                    stacklevel=3,
                )
            self.cut += cut
        return {"boxes": boxes, "labels": labels}
