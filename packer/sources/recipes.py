"""A sample's mask as a recipe: how the converter gets its class ids when no mask file holds them.

Most masks are one file (`Sample.mask` is then its path). Published datasets also describe
masks as annotations: COCO polygons and RLE inside a JSON, panoptic PNGs whose segment ids
mean something only through the JSON's `segments_info`. A recipe carries exactly its image's
annotations (never the whole index), travels with its chunk task to a worker, and there
turns into pixels. Its `digest` enters the shard fingerprints, so editing one image's
annotations re-packs the shard that holds it and no other.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

import numpy as np

# A function that returns a source file's bytes by its path relative to the source root (the
# converter's reader, which also records the file's state for later freshness checks).
Reader = Callable[[str], bytes]


class MaskRecipe:
    """Base of the mask recipes: what a sample's mask is made from and how.

    Subclasses are frozen dataclasses whose fields are plain data (picklable): `source` (the
    annotation file, relative to the source root), `digest`, `files` (source files read to
    make the pixels), and `pixels` (class ids at the image's own size).
    """

    source: str
    digest: str  # a short hash of everything the pixels depend on besides the files read
    files: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """Where the annotations come from, as the manifest's provenance shows it."""
        raise NotImplementedError

    def pixels(self, read: Reader, size: tuple[int, int], ignore_index: int) -> np.ndarray:
        """Class ids (H, W) for an image of `size` (W, H); `ignore_index` where no class
        applies. Annotations that cannot be drawn raise LabelError with their id."""
        raise NotImplementedError


def digest_of(data: object) -> str:
    """A stable 16-hex-digit hash of JSON-like data (dict keys sorted)."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def mask_files(mask: str | MaskRecipe | None) -> tuple[str, ...]:
    """The source files a sample's mask reads."""
    if mask is None:
        return ()
    return (mask,) if isinstance(mask, str) else mask.files


def mask_key(mask: str | MaskRecipe | None) -> str | None:
    """A mask as provenance and rejections name it: its file, or its recipe's key."""
    return mask if mask is None or isinstance(mask, str) else mask.key


def mask_line(mask: str | MaskRecipe | None) -> str | None:
    """A mask as a plan fingerprint reads it: a recipe with its digest."""
    return mask if mask is None or isinstance(mask, str) else f"{mask.key}@{mask.digest}"
