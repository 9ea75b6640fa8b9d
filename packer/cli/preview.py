"""`packer preview DIR --out grid.png`: a picture of packed samples, to check a pack by eye.
DIR may be a saved mixture (`Mixture.save`, a .json): its first draws, captioned by pack.

Each field's kind draws it over its sample's image (`FieldKind.draw`): segmentation masks in
the class colours (the ignore index stays clear) with a legend of the classes shown; a class
name under classification samples; boxes with class names and per-object mask outlines; points
as small crosses in their objects' class colours. Other fields (extra pixel planes, flags,
numbers) are not drawn.
"""

from __future__ import annotations

import errno
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from .. import storage
from ..errors import PackError, StorageError
from ..fields import kind_of
from ..labels import preview_colors
from ..reading.dataset import PackedDataset, Split
from ..reading.mixture import Mixture, is_mixture_file
from ..schema import Field
from .preview_objects import Tile

TILE_WIDTH = 240
CAPTION = 16
MARGIN = 6


def class_colors(dataset: PackedDataset) -> np.ndarray:
    """(C, 3) uint8 display colours: the dataset's own, or distinct ones where it has none."""
    fallback = preview_colors(len(dataset.classes))
    return np.asarray(
        [c["color"] or fallback[i] for i, c in enumerate(dataset.classes)], np.uint8
    ).reshape(-1, 3)


def displayable(images: np.ndarray) -> np.ndarray:
    """A batch of images of any kept kind `[B,H,W,C]` as 8-bit RGB to look at: uint16 by
    round(v / 257), floats stretched over the batch's range; one band as grey, the first
    three bands of more (a picture of the data, never stored)."""
    if images.dtype == np.uint16:
        images = ((images.astype(np.uint32) + 128) // 257).astype(np.uint8)
    elif images.dtype != np.uint8:
        values = np.nan_to_num(images.astype(np.float64))
        low, high = values.min(initial=0.0), values.max(initial=0.0)
        images = np.rint((values - low) * (255 / max(high - low, 1e-12))).astype(np.uint8)
    bands = images.shape[-1]
    if bands == 3:
        return images
    return np.repeat(images[..., :1], 3, axis=-1) if bands < 3 else images[..., :3].copy()


@dataclass(frozen=True)
class Preview:
    """A grid written to `path`; `text` says what it shows (split, samples, how chosen)."""

    path: Path
    text: str


def choose(dataset: PackedDataset, split: str | None) -> Split:
    """The split asked for; by default train, else the first."""
    if split is None or (split == "train" and "train" not in dataset.splits):
        return dataset[next(iter(dataset.splits))]
    return dataset[split]


def samples(part: Split, count: int, seed: int) -> tuple[np.ndarray, dict[str, np.ndarray], list]:
    """`count` seeded random samples (sorted indices, their arrays, and their objects for a
    detection pack); the first `count` in file order for packs without random access (gzip
    TFRecords)."""
    objects = [f.name for f in part.dataset.fields if f.ragged]
    if not part.random_access:
        records = list(part.records(limit=count))
        batch = {k: np.stack([r[k] for r in records]) for k in records[0] if k not in objects}
        targets = [{k: r[k] for k in objects} for r in records] if objects else []
        return np.arange(len(records)), batch, targets
    chosen = np.sort(np.random.default_rng(seed).permutation(part.count)[:count])
    return chosen, part.reader.read(chosen), part.reader.objects(chosen) if objects else []


def render(
    path: str | os.PathLike | Mixture, split: str | None = "train", count: int = 16, seed: int = 0
) -> Image.Image:
    """A grid of `count` seeded random samples of `split` (train, else the first split); of a
    mixture (or a saved one's .json), the first `count` draws of its epoch 0 with `seed`."""
    mixture = _mixture(path)
    targets: list = []
    if mixture is not None:
        dataset, captions, batch = _mixture_draws(mixture, split or "train", count, seed)
    else:
        dataset = PackedDataset(path)
        chosen, batch, targets = samples(choose(dataset, split), count, seed)
        captions = [f"#{index}" for index in chosen]
    image = _input(dataset.fields)
    pictures = displayable(batch[image.name])
    colors = class_colors(dataset)
    height, width = pictures.shape[1:3]
    tile = (TILE_WIDTH, max(1, round(TILE_WIDTH * height / width)))
    columns = math.ceil(math.sqrt(len(captions)))
    rows = math.ceil(len(captions) / columns)
    font = ImageFont.load_default()
    drawn = sorted(
        (f for f in dataset.fields if f is not image), key=lambda f: kind_of(f).draw_layer
    )
    edges = tuple(tuple(e) for e in dataset.manifest.get("keypoints", {}).get("skeleton", []))
    tiles, shown = [], set()
    for k, caption in enumerate(captions):
        sample = Tile(pictures[k], tile, colors, dataset.class_names, font, caption, edges)
        values = _values(drawn, batch, targets, k)
        _know_classes(sample, values)
        for field, value in values:
            kind_of(field).draw(sample, value)
        tiles.append((sample.picture(), sample.caption))
        shown |= sample.shown
    shown = sorted(shown)
    legend_rows = math.ceil(len(shown) / columns) if shown else 0
    cell = (tile[0] + MARGIN, tile[1] + CAPTION + MARGIN)
    canvas = Image.new(
        "RGB",
        (columns * cell[0] + MARGIN, rows * cell[1] + MARGIN + legend_rows * CAPTION + MARGIN),
        "white",
    )
    draw = ImageDraw.Draw(canvas)
    for k, (picture, caption) in enumerate(tiles):
        x, y = MARGIN + (k % columns) * cell[0], MARGIN + (k // columns) * cell[1]
        canvas.paste(picture, (x, y))
        draw.text((x, y + tile[1] + 2), caption, fill="black", font=font)
    top = rows * cell[1] + MARGIN
    _legend(draw, shown, dataset.class_names, colors, top, cell[0], columns, font)
    return canvas


def _mixture(path) -> Mixture | None:
    """The mixture `path` is or names (a saved mixture's .json), else None."""
    if isinstance(path, Mixture):
        return path
    return Mixture.load(path) if is_mixture_file(path) else None


def _mixture_draws(mixture: Mixture, split: str, count: int, seed: int):
    """The mixture's split, a caption per draw (its pack and sample) and the draws' arrays:
    the first `count` draws of epoch 0, as a reader with `seed` would read them."""
    part = mixture.open(split)
    ids = np.sort(part.plan.order(seed, 0)[:count])
    pack, sample = part.locate(ids)
    names = [Path(os.fspath(s.path)).name for s in mixture.streams]
    captions = [f"{names[k]} #{i}" for k, i in zip(pack, sample, strict=True)]
    return part.dataset, captions, part.reader.read(ids)


def _input(fields: tuple[Field, ...]) -> Field:
    """The pack's input field: its first of kind image."""
    return next(f for f in fields if f.kind == "image")


def _values(fields: list[Field], batch: dict, targets: list, k: int) -> list[tuple[Field, object]]:
    """Sample `k`'s value of each field read (fixed fields from the batch, ragged ones from
    its objects)."""
    values = []
    for f in fields:
        if f.ragged and targets:
            values.append((f, targets[k][f.name]))
        elif not f.ragged and f.name in batch:
            values.append((f, batch[f.name][k]))
    return values


def _know_classes(tile: Tile, values: list[tuple[Field, object]]) -> None:
    """The sample's class and its objects' classes (fields whose kinds hold class ids), the
    colours its other fields are drawn in."""
    for field, value in values:
        if not kind_of(field).class_ids:
            continue
        if field.ragged:
            tile.object_classes = np.asarray(value)
        elif np.ndim(value) == 0:
            tile.sample_class = int(value)


def _legend(draw, shown, names, colors, top: int, column: int, per_row: int, font) -> None:
    """Colour swatches with class names, one per grid column, below the grid."""
    for k, cls in enumerate(shown):
        x, y = MARGIN + (k % per_row) * column, top + (k // per_row) * CAPTION
        draw.rectangle(
            (x, y + 2, x + 12, y + 12), fill=tuple(int(v) for v in colors[cls]), outline="black"
        )
        draw.text((x + 18, y + 1), f"{cls} {names[cls]}", fill="black", font=font)


def save(
    path: str | os.PathLike,
    out: str | os.PathLike,
    split: str | None = "train",
    count: int = 16,
    seed: int = 0,
) -> Preview:
    """Render and write the grid (PNG, JPEG, ... by `out`'s extension); says what it shows."""
    out = Path(out)
    if out.suffix.lower() not in Image.registered_extensions():
        raise StorageError(
            f"{out}: give the picture a file name with an image extension, e.g. {out}.png"
        )
    if not storage.is_dir(out.parent if str(out.parent) else Path(".")):
        raise StorageError(f"{out}: folder {out.parent} does not exist; create it first")
    mixture = _mixture(path)
    part = mixture.open(split or "train") if mixture else choose(PackedDataset(path), split)
    try:
        image = render(mixture or path, part.name, count, seed)
    except OSError as exc:
        if isinstance(exc, PackError):
            raise
        raise StorageError(f"{exc}; check the pack with `packer verify {path}`") from exc
    try:
        image.save(out)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            folder = out.parent if str(out.parent) else Path(".")
            raise StorageError(
                f"cannot write {out}: folder {folder} is not writable; choose a folder you "
                "can write to"
            ) from exc
        raise StorageError(f"cannot write {out}: {exc.strerror or exc}") from exc
    except (ValueError, KeyError) as exc:
        raise StorageError(f"cannot write {out}: {exc}; try a .png name") from exc
    shown = min(count, part.count)
    if mixture is not None:
        return Preview(out, f"the first {shown} draws of epoch 0 (seed {seed}) of the mixture's "
                       f"{part.count} in split {part.name!r}, captioned by pack")  # fmt: skip
    how = (
        f"the first {shown} (this format is read in file order)"
        if not part.random_access
        else f"{shown} drawn with seed {seed}"
    )
    return Preview(out, f"{how} of the {part.count} samples of split {part.name!r}")
