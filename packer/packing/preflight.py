"""What the sources' headers say before any pixel is decoded: predicted rejections, image sizes.

The dry run reads the first and last bytes of every image and mask and predicts the
converter's rejections from them, worded as the converter words them: empty or unreadable
files, files that are no image, truncated JPEGs and PNGs, images over the pixel limit, masks
whose size differs from their image's. The default output size comes from the same header
reads. What only decoding finds is listed in `DECODE_ONLY`.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .. import storage
from ..errors import ImageError, SourceError
from ..flags import flag, name_of
from ..imaging.decode import probe_kind
from ..imaging.orientation import oriented_size
from ..imaging.probe import check_complete
from ..sources import ObjectsRecipe, Rejection, Sample, mask_files, mask_key

HEAD_BYTES = 64 << 10  # JPEG frame headers and PNG IHDRs lie well inside
TAIL_BYTES = 4 << 10  # where the end-of-image marker / IEND chunk lies
SIZE_SAMPLE = 512  # images whose headers decide the default size (evenly spread)
SIZE_STEP = 16  # the default size is rounded to a multiple of this
READ_THREADS = 8
DECODE_ONLY = (
    "damaged compressed data inside a file (e.g. a failed PNG chunk CRC), "
    "mask colours outside the class table"
)


def header_size(path: str, max_pixels: int) -> tuple[int, int]:
    """(W, H) of an image as the converter sees it (EXIF orientation applied), from its header.

    Raises ImageError with the converter's reason for a file it would reject.
    """
    try:
        head, tail = storage.read_head_tail(path, HEAD_BYTES, TAIL_BYTES)
    except OSError as exc:
        raise ImageError(f"cannot read file: {exc.strerror or exc}") from exc
    try:
        header = probe_kind(head, max_pixels)[0]
    except ImageError:
        if not tail:  # that was the whole file
            raise
        try:  # an unusual layout (a large EXIF block, a TIFF's directory at the end)
            data = storage.read_bytes(path)
        except OSError as exc:
            raise ImageError(f"cannot read file: {exc.strerror or exc}") from exc
        head, tail = data, b""
        header = probe_kind(head, max_pixels)[0]
    check_complete(head + tail, header.format)
    return oriented_size(header.size, header.orientation)


def mask_size_mismatch(
    mask_size: tuple[int, int], image_size: tuple[int, int], image: str
) -> str | None:
    """The converter's reason for a mask that does not fit its image, or None."""
    if mask_size == image_size:
        return None
    return (
        f"mask is {mask_size[0]}x{mask_size[1]} pixels but its image {image} "
        f"is {image_size[0]}x{image_size[1]}"
    )


def predict_rejections(root: Path, samples: Sequence[Sample], max_pixels: int) -> list[Rejection]:
    """The samples the converter would reject, as far as headers tell, with its reasons."""

    def check(sample: Sample) -> Rejection | None:
        try:
            image_size = header_size(os.path.join(root, sample.image), max_pixels)
        except ImageError as exc:
            return Rejection(sample.image, str(exc))
        files = mask_files(sample.mask)
        if not files or isinstance(sample.mask, ObjectsRecipe):  # no mask picture to check:
            return None  # classification, annotations drawn at the image's size, objects
        try:
            mask_size = header_size(os.path.join(root, files[0]), max_pixels)
        except ImageError as exc:
            return Rejection(files[0], str(exc))
        reason = mask_size_mismatch(mask_size, image_size, sample.image)
        return Rejection(mask_key(sample.mask), reason) if reason else None

    with ThreadPoolExecutor(READ_THREADS) as pool:
        found = [r for r in pool.map(check, samples) if r is not None]
    return sorted(found, key=lambda r: (r.path, r.reason))


def default_size(
    root: Path, samples: Sequence[Sample], max_pixels: int
) -> tuple[tuple[int, int], str]:
    """The output size without `size`, and how it was chosen (a sentence): the images' size
    when they all share one, else the median width and median height, each rounded to a
    multiple of 16 (at least 16).

    Up to SIZE_SAMPLE images, spread evenly over the sorted samples, are read (headers only).
    """
    step = max(1, len(samples) / SIZE_SAMPLE)
    picked = [samples[int(i * step)].image for i in range(min(len(samples), SIZE_SAMPLE))]

    def size_of(image: str) -> tuple[int, int] | None:
        try:
            return header_size(os.path.join(root, image), max_pixels)
        except ImageError:
            return None  # the pack rejects it; it has no say in the size

    with ThreadPoolExecutor(READ_THREADS) as pool:
        sizes = [s for s in pool.map(size_of, picked) if s is not None]
    if not sizes:
        raise SourceError(
            f"no size given and none of the {len(picked)} images read has a readable header; "
            f"pass {flag('size')}"
        )
    read = (
        f"{len(sizes)} of {len(samples)} images read"
        if len(samples) > len(picked)
        else (f"{len(sizes)} images")
    )
    unset = f"no {name_of('size')} given"
    if len(set(sizes)) == 1:
        width, height = sizes[0]
        return (width, height), f"{unset}: {width}x{height}, the size of all {read}"
    median = (statistics.median(w for w, _ in sizes), statistics.median(h for _, h in sizes))
    width, height = (max(SIZE_STEP, int(v / SIZE_STEP + 0.5) * SIZE_STEP) for v in median)
    low = min(sizes, key=lambda s: s[0] * s[1])
    high = max(sizes, key=lambda s: s[0] * s[1])
    rule = (
        f"{unset}: {width}x{height}, the median image size ({median[0]:g}x{median[1]:g}) "
        f"rounded to multiples of {SIZE_STEP}; sizes range from {low[0]}x{low[1]} to "
        f"{high[0]}x{high[1]} ({read}); pass {flag('size')} to choose"
    )
    return (width, height), rule
