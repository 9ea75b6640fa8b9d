"""Detection targets at batch time: per-sample dicts (torchvision's convention) or padded
arrays (KerasHub's), with the objects padding cuts counted, never silently lost."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from ..schema import Field

PAD = -1  # KerasHub's padding of boxes and labels


class Padder:
    """Per-sample rows of ragged fields -> one `[B, max_boxes, *row]` array per field (of its
    own dtype), padded with -1; `cut` counts the objects that did not fit, and the first
    batch that cuts any warns once, naming the option."""

    def __init__(self, max_boxes: int, fields: Sequence[Field] = ()) -> None:
        if not isinstance(max_boxes, int) or isinstance(max_boxes, bool) or max_boxes < 1:
            raise ValueError(f"max_boxes must be a positive integer, not {max_boxes!r}")
        self.max_boxes = max_boxes
        # the ragged fields padded, in the pack's order: those whose kind has `padded` (boxes
        # and labels make KerasHub's bounding-box dict; per-object masks are not read)
        self.fields = tuple(fields)
        self.cut = 0

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    def padded_fields(self) -> tuple[Field, ...]:
        """The padded arrays as fields of one batch row: `[max_boxes, *row]` each."""
        return tuple(Field(f.name, (self.max_boxes, *f.shape), f.dtype) for f in self.fields)

    def __call__(self, fields: dict[str, np.ndarray], counts: np.ndarray) -> dict[str, np.ndarray]:
        """Padded arrays of a batch's ragged fields (every row, sample after sample) and
        each sample's row count."""
        batch, size = len(counts), self.max_boxes
        ends = np.cumsum(counts)
        # each row's place in the [B * max_boxes] rows of the padded arrays: one index per row
        # assigns along one axis, twice as fast as a (sample, place) pair of index arrays
        dest = np.arange(ends[-1] if batch else 0)
        dest += np.repeat(np.arange(0, batch * size, size) - ends + counts, counts)
        keep = dest < np.repeat(np.arange(size, (batch + 1) * size, size), counts)
        whole = bool(keep.all())  # nothing cut (the usual case): every row as it is
        if not whole:
            dest = dest[keep]
        padded = {}
        for f in self.fields:
            out = np.full((batch, size, *f.shape), np.array(PAD).astype(f.dtype))
            rows = fields[f.name]
            out.reshape(batch * size, *f.shape)[dest] = rows if whole else rows[keep]
            padded[f.name] = out
        cut = len(keep) - len(dest)
        if cut:
            if not self.cut:
                warnings.warn(
                    f"max_boxes={self.max_boxes} cut {cut} objects from a batch (images with "
                    "more objects keep their first max_boxes); raise max_boxes to keep them",
                    stacklevel=3,
                )
            self.cut += cut
        return padded
