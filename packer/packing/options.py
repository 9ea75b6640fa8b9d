"""The options of a pack, declared once (see `packer.options`): what the plan decides with
(`PLAN_OPTIONS`) and how the plan is run (`RUN_OPTIONS`). `pack --help`, `packer.pack()`,
`make_plan` and `execute` all read them; formats and engines declare their own."""

from __future__ import annotations

from ..engines import ENGINES
from ..imaging import DEFAULT_MAX_PIXELS, INTERPOLATIONS, RESIZE_MODES
from ..options import Option
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

PLAN_OPTIONS = (
    Option(
        "resize",
        "fill",
        "fill: cover then centre-crop; fit: inside then pad; stretch; none: crop/pad.",
        kind="choice",
        choices=RESIZE_MODES,
    ),
    Option(
        "interpolation",
        "auto",
        "Image resampling (auto: area to shrink, cubic to enlarge). Masks always use nearest "
        "neighbour.",
        kind="choice",
        choices=INTERPOLATIONS,
    ),
    Option(
        "pad_value",
        0,
        "Image padding value for fit and none (masks pad with the ignore index).",
        kind="int",
        range=(0, 255),
    ),
    Option(
        "shard_size",
        DEFAULT_SHARD_BYTES,
        "Bytes per shard (e.g. 256MB, 1GiB, 1000000).",
        kind="bytes",
        cli_default="256MB",
    ),
    Option("seed", 0, "Seed of the sample order.", kind="int", range=(None, None)),
    Option(
        "split",
        None,
        "Without split folders: e.g. train=0.9,val=0.1 (stable hash of each path).",
        kind="split",
        shown="split folders, else all in train",
    ),
    Option(
        "task",
        "auto",
        "What each sample's target is: auto takes the layout's own (YOLO boxes and VOC: "
        "detection; YOLO polygons: instances; COCO: segmentation); --dry-run says which.",
        kind="choice",
        choices=("auto", "classification", "segmentation", "detection", "instances"),
    ),
    Option(
        "layout",
        "auto",
        f"Source layout; auto tries them in this order: {layouts_help()}.",
        kind="choice",
        choices=LAYOUTS,
    ),
    Option(
        "masks",
        None,
        "Folder of masks matching the images by file stem.",
        kind="folder",
        shown="detected mask folders",
    ),
    Option(
        "mask_suffix",
        None,
        "Suffix after the image stem in mask names (e.g. _L).",
        shown="detected",
    ),
    Option(
        "classes",
        None,
        "class_dict.csv (name,r,g,b) or a names file (line N = class N).",
        kind="file",
        shown="a class_dict.csv or names file in SRC, else folder names or mask values",
    ),
    Option(
        "coco",
        None,
        "COCO instances JSON for the images in SRC; SPLIT=FILE for several "
        "(--coco train=a.json --coco val=b.json).",
        shown="annotations/instances_<split>.json in SRC",
        multiple=True,
    ),
    Option(
        "overlap",
        "ignore",
        "COCO: pixels of two or more instances become --ignore-index, or the later one's class.",
        kind="choice",
        choices=OVERLAPS,
    ),
    Option(
        "crowd",
        "ignore",
        "COCO: crowd regions become --ignore-index, or their category's class; with --task "
        "detection/instances crowds are left out, or with class kept, flagged iscrowd.",
        kind="choice",
        choices=CROWDS,
    ),
    Option(
        "ignore_class",
        (),
        "A class whose pixels become --ignore-index; the rest keep their order (repeatable).",
        shown="none",
        multiple=True,
    ),
    Option(
        "class_map",
        None,
        "CSV of source,target rows: a class name, mask value or 'r g b' colour -> a class "
        "name (renames, merges) or 'ignore'.",
        kind="file",
        shown="none",
    ),
    Option(
        "root",
        None,
        "Folder the relative paths in a .lst/.csv list start from.",
        kind="folder",
        shown="the list's folder",
    ),
    Option(
        "ignore_index",
        None,
        "Class id for mask pixels outside the class table.",
        kind="int",
        range=(0, 65535),
        shown="255; 65535 above 255 classes",
    ),
    Option(
        "unknown_colors",
        "ignore",
        "Unknown mask colours: map to --ignore-index, or stop.",
        kind="choice",
        choices=("ignore", "error"),
    ),
    Option(
        "max_pixels",
        DEFAULT_MAX_PIXELS,
        "Images with more pixels are rejected (decompression bombs).",
        kind="int",
        range=(1, None),
    ),
)

RUN_OPTIONS = (
    Option("workers", None, "Worker processes.", kind="int", range=(1, None), shown="the cores"),
    Option("strict", False, "Stop at the first input that cannot be packed.", kind="flag"),
    Option(
        "max_rejects",
        None,
        "Stop once more than this many inputs could not be packed.",
        kind="int",
        range=(0, None),
        shown="no limit",
    ),
    Option(
        "engine",
        "local",
        "Where the shard tasks run (local: a process pool on this machine).",
        kind="choice",
        choices=tuple(ENGINES),
    ),
    Option("overwrite", False, "Replace a different pack already in --out.", kind="flag"),
    Option(
        "update",
        True,
        "Re-pack the shards whose sources were added, removed or changed since a finished "
        "pack (--no-update: leave it as it is and say what changed).",
        kind="switch",
    ),
    Option(
        "force",
        False,
        "Go ahead despite a safety check: an output that needs far more than the free space, "
        "or the stale lock of a remote --out (its holder stopped renewing it).",
        kind="flag",
    ),
    Option(
        "progress",
        False,
        "Show a progress bar (on the command line: when stderr is a terminal).",
        kind="switch",
        cli_default=True,
    ),
)
