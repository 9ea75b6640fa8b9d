"""The options of a pack, declared once (see `packer.options`): what the plan decides with
(`PlanOptions`) and how the plan is run (`RunOptions`), each a frozen dataclass whose fields
carry their help and command-line spelling. `pack --help` (through `PLAN_OPTIONS` and
`RUN_OPTIONS`, their `Option`s), `packer.pack()`, `make_plan` and `execute` all read them;
formats and engines declare their own."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import engines, formats
from ..imaging import DEFAULT_MAX_PIXELS, INTERPOLATIONS, RESIZE_MODES
from ..imaging.kinds import DTYPES
from ..options import Option, Options, declared, option, refuse_unknown
from ..sources import LAYOUTS, layouts_help
from ..sources.model import CROWDS, OVERLAPS
from .preflight import SIZE_STEP

DEFAULT_SHARD_BYTES = 256 * 1000 * 1000

# out, format and size: make_plan's and pack's positional arguments after SRC.
OUT = Option(
    "out",
    None,
    "Output folder (inside SRC it is left out of the scan).",
    shown="SRC-FORMAT beside SRC",
)
SIZE = Option(
    "size",
    None,
    "Output WIDTHxHEIGHT (e.g. 480x352; one number = square).",
    kind="size",
    shown="the images' size when they share one, else the median width and height rounded "
    f"to multiples of {SIZE_STEP}",
)


@dataclass(frozen=True)
class PlanOptions(Options):
    """What the plan decides with: the source's reading, the geometry, the order and the shards."""

    resize: str = option(
        "fill",
        "fill: cover then centre-crop; fit: inside then pad; stretch; none: crop/pad.",
        kind="choice",
        choices=RESIZE_MODES,
    )

    interpolation: str = option(
        "auto",
        "Image resampling (auto: area to shrink, cubic to enlarge). Masks always use nearest "
        "neighbour.",
        kind="choice",
        choices=INTERPOLATIONS,
    )

    pad_value: int = option(
        0,
        "Image padding value for fit and none (masks pad with the ignore index).",
        kind="int",
        range=(0, 255),
    )

    channels: str | int = option(
        "auto",
        "Image bands stored: auto keeps the source's (8-bit pictures: RGB), rgb, grey "
        "(luminance), or N (the first N bands; one band repeated). Dropping bands is said in "
        "the summary.",
    )

    dtype: str = option(
        "auto",
        "Image sample type stored: auto keeps the source's (uint8, uint16, float32); 16 to 8 "
        "bits is round(v / 257) and said in the summary (a grey image made 8-bit is RGB, as "
        "8-bit grey pictures are, unless --channels says otherwise).",
        kind="choice",
        choices=DTYPES,
    )

    shard_size: int = option(
        DEFAULT_SHARD_BYTES,
        "Bytes per shard on disk (e.g. 256MB, 1GiB, 1000000). With --encoding jpeg|png a "
        "sample's bytes are estimated from 24 samples encoded at plan time, so shards land near "
        "the size, not exactly.",
        kind="bytes",
        cli_default="256MB",
    )

    seed: int = option(
        0,
        "Seed of the sample order.",
        kind="int",
        range=(None, None),
    )

    split: dict[str, float] | None = option(
        None,
        "Without split folders: e.g. train=0.9,val=0.1 (stable hash of each path).",
        kind="split",
        shown="split folders, else all in train",
    )

    task: str = option(
        "auto",
        "What each sample's target is: auto takes the layout's own (YOLO boxes and VOC: "
        "detection; YOLO polygons: instances; YOLO pose and COCO person keypoints: keypoints; "
        "COCO: segmentation); --dry-run says which.",
        kind="choice",
        choices=("auto", "classification", "segmentation", "detection", "instances", "keypoints"),
    )

    layout: str = option(
        "auto",
        f"Source layout; auto tries them in this order: {layouts_help()}.",
        kind="choice",
        choices=LAYOUTS,
    )

    masks: str | os.PathLike | None = option(
        None,
        "Folder of masks matching the images by file stem.",
        kind="folder",
        shown="detected mask folders",
    )

    mask_suffix: str | None = option(
        None,
        "Suffix after the image stem in mask names (e.g. _L).",
        shown="detected",
    )

    classes: str | os.PathLike | None = option(
        None,
        "class_dict.csv (name,r,g,b) or a names file (line N = class N).",
        kind="file",
        shown="a class_dict.csv or names file in SRC, else folder names or mask values",
    )

    coco: str | Sequence[str] | None = option(
        None,
        "COCO instances JSON for the images in SRC; SPLIT=FILE for several "
        "(--coco train=a.json --coco val=b.json).",
        shown="annotations/instances_<split>.json in SRC",
        multiple=True,
    )

    overlap: str = option(
        "ignore",
        "COCO: pixels of two or more instances become --ignore-index, or the later one's class.",
        kind="choice",
        choices=OVERLAPS,
    )

    crowd: str = option(
        "ignore",
        "COCO: crowd regions become --ignore-index, or their category's class; with --task "
        "detection/instances crowds are left out, or with class kept, flagged iscrowd.",
        kind="choice",
        choices=CROWDS,
    )

    min_box_size: float = option(
        0.0,
        "Detection/instances: drop objects whose box, after the geometry, is under this many "
        "pixels wide or high (counted in the summary); 0 keeps every object with an area.",
        kind="number",
        range=(0, None),
    )

    ignore_class: Sequence[str] = option(
        (),
        "A class whose pixels become --ignore-index; the rest keep their order (repeatable).",
        shown="none",
        multiple=True,
    )

    class_map: str | os.PathLike | None = option(
        None,
        "CSV of source,target rows: a class name, mask value or 'r g b' colour -> a class "
        "name (renames, merges) or 'ignore'.",
        kind="file",
        shown="none",
    )

    root: str | os.PathLike | None = option(
        None,
        "Folder the relative paths in a .lst/.csv list start from.",
        kind="folder",
        shown="the list's folder",
    )

    columns: str | None = option(
        None,
        "A list's column roles as COLUMN:ROLE pairs, comma-separated (e.g. "
        "id:image,tags:multi,age:number; roles: image, class, multi, number, split, skip); "
        "columns not named keep the role detected from their values (--dry-run says why).",
        kind="text",
        shown="detected",
    )

    vocabulary: str | os.PathLike | None = option(
        None,
        "A file of the tags a list's multi-label column may hold, one a line (their sorted "
        "order is the multi-hot order); a row with another tag is rejected.",
        kind="file",
        shown="the tags found",
    )

    ignore_index: int | None = option(
        None,
        "Class id for mask pixels outside the class table.",
        kind="int",
        range=(0, 65535),
        shown="255; 65535 above 255 classes",
    )

    unknown_colors: str = option(
        "ignore",
        "Unknown mask colours: map to --ignore-index, or stop.",
        kind="choice",
        choices=("ignore", "error"),
    )

    max_pixels: int = option(
        DEFAULT_MAX_PIXELS,
        "Images with more pixels are rejected (decompression bombs).",
        kind="int",
        range=(1, None),
    )


PLAN_OPTIONS = declared(PlanOptions)


@dataclass(frozen=True)
class RunOptions(Options):
    """How a plan is run: workers, engine, limits, and what to do with an existing pack."""

    workers: int | None = option(
        None,
        "Worker processes.",
        kind="int",
        range=(1, None),
        shown="the cores",
    )

    strict: bool = option(
        False,
        "Stop at the first input that cannot be packed.",
        kind="flag",
    )

    max_rejects: int | None = option(
        None,
        "Stop once more than this many inputs could not be packed.",
        kind="int",
        range=(0, None),
        shown="no limit",
    )

    engine: str = option(
        "local",
        "Where the shard tasks run (local: a process pool on this machine).",
        kind="choice",
        choices=tuple(engines.ENGINES),
    )

    overwrite: bool = option(
        False,
        "Replace the pack already in --out: a different one, or this one packed afresh (a "
        "compressed pack's stored size estimated anew).",
        kind="flag",
    )

    update: bool = option(
        True,
        "Re-pack the shards whose sources were added, removed or changed since a finished "
        "pack (--no-update: leave it as it is and say what changed).",
        kind="switch",
    )

    force: bool = option(
        False,
        "Go ahead despite a safety check: an output that needs far more than the free space, "
        "or the stale lock of a remote --out (its holder stopped renewing it).",
        kind="flag",
    )

    progress: bool = option(
        False,
        "Show a progress bar (on the command line: when stderr is a terminal).",
        kind="switch",
        cli_default=True,
    )


RUN_OPTIONS = declared(RunOptions)


@dataclass(frozen=True)
class Stages:
    """A pack's keywords, split once by the stage that takes them (for `packer.pack` and the
    command line alike)."""

    plan: dict[str, Any]  # the plan's and the format's own: `make_plan`'s keywords
    run: RunOptions
    engine: dict[str, Any]  # the chosen engine's own, checked, its defaults filled


def by_stage(given: Mapping[str, Any]) -> Stages:
    """`given` split into the plan's, the run's and the engine's options; a keyword that no
    stage takes, or an option of an engine that was not chosen, is refused in one line."""
    check_keywords(given)
    run = RunOptions.resolve(given)
    elsewhere = {o.name for o in RUN_OPTIONS} | engines.option_names()
    planned = {k: v for k, v in given.items() if k not in elsewhere}
    return Stages(planned, run, engines.options_for(run.engine, given))


def check_keywords(given: Iterable[str]) -> None:
    """Refuse keywords that neither the plan, the run, an engine nor a format takes, with the
    nearest known names, so a typo never passes silently as a format option."""
    known = [o.name for o in (*PLAN_OPTIONS, *RUN_OPTIONS, *engines.all_options())]
    refuse_unknown(given, [*known, "command", *(o.name for o, _ in formats.all_options())])
