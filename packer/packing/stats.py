"""Per-shard statistics gathered while packing: channel histograms, class counts, backends.

Workers add each record to a chunk's `ChunkStats`; a shard's receipt merges its chunks'. The
manifest turns the receipts' counts into means, standard deviations and class frequencies.
What a value adds is its field's kind's to say (`FieldKind.count_channels`, `count_classes`,
`count_objects`): the channels of the first field that counts them (the input image: exact
integer histograms per band of 8-bit images, count, sum and sum of squares per band of 16-bit
and float ones), every field's class ids (a pack counts pixels, images or objects) and object
counts; a kind that counts nothing is skipped.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from ..fields import kind_of
from ..schema import Field


@dataclass
class ChunkStats:
    """Exact counts over one chunk's records."""

    channel_hist: np.ndarray = field(default_factory=lambda: np.zeros((3, 256), np.int64))
    channel_moments: np.ndarray | None = None  # [bands, 3]: count, sum, sum of squares
    class_counts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    backends: Counter = field(default_factory=Counter)
    objects: Counter | None = None  # objects per image, COCO sizes, dropped

    def add(self, record: dict[str, np.ndarray], backend: str, fields: tuple[Field, ...]) -> None:
        """Count one record of the pack's `fields`, field by field as its kind says: sampled
        rows into the channel histograms, every mask pixel (the label, each object's label,
        each tag) of one field into the class counts, the boxes into the object counts."""
        self.backends[backend] += 1
        channels = classes = False
        for f in _counting_order(tuple(fields)):
            kind, value = kind_of(f), record[f.name]
            counted = None if channels else kind.count_channels(value)
            if counted is not None:
                self._add_channels(*counted)
                channels = True
            counts = None if classes else kind.count_classes(value)
            if counts is not None:
                self._add_classes(counts)
                classes = True
            objects = kind.count_objects(value)
            if objects is not None:
                self.objects = self.objects or Counter()
                self.objects.update(objects)

    def _add_channels(self, key: str, counts: np.ndarray) -> None:
        if key == "channel_hist":
            if self.channel_hist.shape != counts.shape:
                self.channel_hist = np.zeros(counts.shape, np.int64)
            self.channel_hist += counts
        else:
            self.channel_moments = (
                counts.copy() if self.channel_moments is None else self.channel_moments + counts
            )

    def _add_classes(self, counts: np.ndarray) -> None:
        if len(counts) > len(self.class_counts):
            self.class_counts = np.pad(self.class_counts, (0, len(counts) - len(self.class_counts)))
        self.class_counts[: len(counts)] += counts

    def dropped(self, reasons: list[str]) -> None:
        """Count objects left out, by reason."""
        if self.objects is None:
            self.objects = Counter()
        for reason in reasons:
            self.objects["dropped: " + reason] += 1


def merge(chunks: Iterable[ChunkStats]) -> dict:
    """A shard's statistics, as its receipt stores them (JSON-ready)."""
    chunks = list(chunks)
    # a chunk whose records were all rejected has counted nothing (and has 3 default rows)
    hists = [c.channel_hist for c in chunks if c.channel_moments is None and c.channel_hist.any()]
    hist = np.sum(hists, axis=0) if hists else np.zeros((3, 256), np.int64)
    moments = None
    classes: Counter = Counter()
    backends: Counter = Counter()
    objects: Counter | None = None
    for c in chunks:
        if c.objects is not None:
            objects = (objects or Counter()) + c.objects
        if c.channel_moments is not None:
            moments = c.channel_moments if moments is None else moments + c.channel_moments
        classes.update({int(k): int(c.class_counts[k]) for k in np.flatnonzero(c.class_counts)})
        backends.update(c.backends)
    return {
        **(
            {"channel_hist": hist.tolist()}
            if moments is None
            else {"channel_moments": moments.tolist()}
        ),
        "class_counts": {str(k): v for k, v in sorted(classes.items())},
        "backends": dict(sorted(backends.items())),
        **({"objects": dict(sorted(objects.items()))} if objects is not None else {}),
    }


@functools.cache
def _counting_order(fields: tuple[Field, ...]) -> tuple[Field, ...]:
    """The fields in the order `add` counts them (once per pack, not per record): fields of
    class ids first, so that one of them gives the class counts (a class column beside a tag
    column is the pack's class table), else another that counts classes (tags)."""
    return tuple(sorted(fields, key=lambda f: not kind_of(f).class_ids))
