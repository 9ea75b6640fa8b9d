"""What the pack stores of its sources' samples, decided from a few headers before any decode:
the images' sample type and band count (and what converting them loses), the masks' bits.

The first images of the scan (up to `PROBE_IMAGES`, spread evenly) are probed: they must agree
once converted as asked, else the pack is refused in one line naming two that differ (the
converter checks every other image against the same kind). Index masks without a class table
are 16-bit when a probed mask is, so that class 256 stays 256.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import storage
from ..errors import ImageError, ImageKindError
from ..flags import flag
from ..imaging.decode import probe_kind
from ..imaging.kinds import PICTURE, Conversion, PixelKind
from ..sources import Sample
from .preflight import HEAD_BYTES

PROBE_IMAGES = 8


@dataclass(frozen=True)
class ImageKinds:
    """The images' stored kind, the first image probed (its path and source kind), and the
    losses converting it to the stored kind brings (empty: nothing lost)."""

    stored: PixelKind
    first: str
    source: PixelKind
    losses: tuple[str, ...]

    def mismatch(self, path: str, source: PixelKind, stored: PixelKind) -> str:
        """The one-line refusal for an image whose stored kind is not the pack's."""
        if not self.first:  # no image could be read before packing
            return (
                f"{path} is {source.describe()}, the pack stores {self.stored.describe()} "
                f"(no image header could be read before packing): convert with "
                f"{flag('channels')} and/or {flag('dtype')}"
            )
        return (
            f"images differ: {self.first} is {self.source.describe()}, {path} is "
            f"{source.describe()}; a pack stores one kind per field: convert them all with "
            f"{flag('channels')} and/or {flag('dtype')} (e.g. {flag('channels', 'rgb')} "
            f"{flag('dtype', 'uint8')}), or pack them apart"
        )


def spread(samples: Sequence[Sample], count: int) -> list[Sample]:
    """Up to `count` samples, evenly spread, the first always among them."""
    step = max(1, len(samples) / count)
    return [samples[int(i * step)] for i in range(min(len(samples), count))]


def _probe(path: str, max_pixels: int) -> tuple[bytes, object, PixelKind]:
    """The head of a file, Pillow's lazy image of it (or None) and the kind of its samples,
    from its first bytes, or from all of them when the header needs it (a TIFF's directory
    may come last)."""
    head, _ = storage.read_head_tail(path, HEAD_BYTES, 0)
    try:
        _, image, kind = probe_kind(head, max_pixels)
    except ImageError:
        if len(head) < HEAD_BYTES:
            raise
        head = storage.read_bytes(path)
        _, image, kind = probe_kind(head, max_pixels)
    return head, image, kind


def image_kinds(
    root: Path, samples: Sequence[Sample], conversion: Conversion, max_pixels: int
) -> ImageKinds:
    """The stored kind of the images, from the first ones' headers (unreadable ones have no
    say: the converter rejects them). No readable image: 8-bit RGB, as always."""
    found: list[tuple[str, PixelKind, PixelKind]] = []
    for sample in spread(samples, PROBE_IMAGES):
        try:
            source = _probe(os.path.join(root, sample.image), max_pixels)[2]
        except (ImageError, OSError):
            continue
        try:
            stored = conversion.output(source)
        except ImageError as exc:
            raise ImageKindError(f"{sample.image}: {exc}") from None
        found.append((sample.image, source, stored))
    if not found:
        return ImageKinds(conversion.output(PICTURE), "", PICTURE, ())
    first, source, stored = found[0]
    kinds = ImageKinds(stored, first, source, tuple(conversion.losses(source)))
    for path, other, other_stored in found[1:]:
        if other_stored != stored:
            raise ImageKindError(kinds.mismatch(path, other, other_stored))
    return kinds


def mask_bits(root: Path, samples: Sequence[Sample], max_pixels: int) -> int:
    """16 when one of the first mask files (spread as the images) holds 16-bit values, else 8."""
    for sample in spread([s for s in samples if isinstance(s.mask, str)], PROBE_IMAGES):
        try:
            _, image, kind = _probe(os.path.join(root, sample.mask), max_pixels)
        except (ImageError, OSError):
            continue
        if kind.dtype != "uint8" or (image is not None and image.mode == "I"):
            return 16
    return 8
