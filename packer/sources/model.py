"""What a scan produces and shares between its layouts: samples, rejections, the folder tree.

The public results (`Sample`, `Rejection`, `SourceScan`) and the in-memory forms every layout
module reads and fills (`Folder`, `Tree`, `Item`, `Found`), with the name helpers they share.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import SourceError
from ..fields.keypoints import Skeleton
from ..flags import flag
from ..labels import ClassTable
from .recipes import MaskRecipe, mask_files

IMAGE_EXTENSIONS = frozenset({".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff"})


@dataclass(frozen=True, slots=True)
class Sample:
    """One input to pack: an image and its mask (segmentation) or class index (classification).

    The mask is a file's path, or a recipe (annotations in a JSON) the converter draws. A
    sample given in Python holds its `values` instead; `image` is then its provenance (its
    image's path, else `<sample N>`)."""

    image: str
    split: str
    mask: str | MaskRecipe | None = None
    label: int | None = None
    values: Values | None = None  # a Python sample's own values, by field name


@dataclass(frozen=True, slots=True)
class Values:
    """A Python sample's values by field name (paths, bytes, arrays, numbers; class names
    already class ids), its position in the user's samples, the files its paths name, and a
    digest of everything else, which enters the shard fingerprints."""

    index: int
    by_field: dict
    files: tuple[str, ...]
    digest: str


def sample_files(sample: Sample) -> tuple[str, ...]:
    """The source files a sample reads: its image and mask files, or the paths among a
    Python sample's values."""
    if sample.values is not None:
        return sample.values.files
    return (sample.image, *mask_files(sample.mask))


@dataclass(frozen=True, slots=True)
class Rejection:
    """An input that will not be packed, and why, so a dry run can tell the user."""

    path: str
    reason: str


@dataclass
class SourceScan:
    """Everything the packer needs to know about a source before decoding anything."""

    root: Path
    layout: str
    task: str
    samples: list[Sample]
    class_names: list[str] | None
    rejected: list[Rejection]
    split_source: str
    notes: list[str]
    table: ClassTable | None = None  # the layout's own classes (COCO categories, Cityscapes)
    why: str = ""  # how the layout was recognised, for a dry run
    task_why: str = ""  # why this task, and what another --task would give, for a dry run
    left_out: list[str] = field(default_factory=list)  # what the source holds, never stored
    keypoints: Skeleton | None = None  # the points of a keypoints pack (names, skeleton, flips)


@dataclass
class Folder:
    """The visible children of one folder, names sorted."""

    dirs: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)


# Every folder walked, by POSIX path relative to the walk's top ("" is the top itself).
Tree = dict[str, Folder]

# Files whose presence marks a folder as packer's output: a finished or an unfinished pack.
PACK_MARKERS = ("dataset.json", ".partial")


@dataclass
class Skips:
    """Folders a walk leaves out: those named (the pack's own output folder, by device and
    inode) and any packer output it meets; `skipped` collects what was left out and why."""

    exclude: frozenset[tuple[int, int]] = frozenset()
    skipped: list[str] = field(default_factory=list)

    def notes(self) -> list[str]:
        """One note per folder left out."""
        return [f"not scanned: {s}" for s in self.skipped]


# (image, split, mask, label) before the split policy, split "" meaning "not in a split
# folder"; plain tuples keep a million samples cheap until the scan builds the Samples.
Item = tuple[str, str, str | MaskRecipe | None, int | None]


@dataclass
class Found:
    """What a layout found: its samples as Items, plus everything a dry run reports."""

    layout: str
    task: str
    looked_for: str
    items: list[Item] = field(default_factory=list)
    class_names: list[str] | None = None
    rejected: list[Rejection] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    split_origin: str = "split folders"
    resplit: bool = False  # its splits are lists (VOC's ImageSets) that --split may replace
    class_dirs: list[list[str]] = field(default_factory=list)  # per split, sibling class folders
    table: ClassTable | None = None  # the layout's own classes, when it names them
    why: str = ""  # how the layout was recognised, for a dry run
    task_why: str = ""  # why this task, and what another --task would give, for a dry run
    # What the source holds that no field of the task stores (YOLO pose keypoints), one line
    # each: said by the pack's summary and recorded in the manifest's `left_out`.
    left_out: list[str] = field(default_factory=list)
    keypoints: Skeleton | None = None  # with task keypoints: what its K points are


def folders(
    tree: Tree, top: str, prune: set[str] | frozenset[str] = frozenset()
) -> Iterator[tuple[str, list[str]]]:
    """Yield (folder, file names) for top and every folder below it, skipping pruned ones."""
    stack = [top]
    while stack:
        rel = stack.pop()
        node = tree.get(rel)
        if node is None:
            continue
        yield rel, node.files
        children = (join(rel, name) for name in reversed(node.dirs))
        stack.extend(child for child in children if child not in prune)


def join(folder: str, name: str) -> str:
    """Join relative POSIX paths where "" is the root."""
    return f"{folder}/{name}" if folder and name else folder or name


def ext(name: str) -> str:
    """Lower-case extension with its dot, "" when there is none."""
    dot = name.rfind(".")
    return name[dot:].lower() if dot > 0 else ""


def stem(name: str) -> str:
    """File name without its last extension."""
    dot = name.rfind(".")
    return name[:dot] if dot > 0 else name


def is_image(name: str) -> bool:
    """Whether a file name has an image extension (any case); inlined for speed."""
    return name[name.rfind(".") :].lower() in IMAGE_EXTENSIONS


def not_image(rel: str, name: str) -> Rejection:
    """The rejection of a non-image file found where images belong."""
    return Rejection(rel, f"not an image file type ({ext(name) or 'no extension'})")


OVERLAPS = ("ignore", "last")  # pixels of two or more instances: the ignore index, or the later
CROWDS = ("ignore", "class")  # crowd regions: the ignore index, or their category's class


@dataclass(frozen=True)
class AnnotationOptions:
    """What every layout's detect and scan are told: how layouts that describe masks as
    annotations draw them (COCO), JSON files named for them ((split, path) pairs, split ""
    meaning "from the file name"), the task asked, and the scan's own choices (the layout
    asked, a mask suffix), which the scan fills in."""

    coco: tuple[tuple[str, str], ...] = ()
    overlap: str = "ignore"
    crowd: str = "ignore"
    task: str = "auto"  # auto: the layout's own; or detection, instances, segmentation, ...
    classes: str | None = None  # a names file giving the classes' order (VOC, YOLO)
    layout: str = "auto"  # the layout asked for: guards against guessing apply under auto
    mask_suffix: str | None = None  # what mask names add after the image stem (mask folders)

    @classmethod
    def given(
        cls,
        coco,
        overlap: str = "ignore",
        crowd: str = "ignore",
        task: str = "auto",
        classes: str | os.PathLike | None = None,
    ) -> AnnotationOptions:
        """From pack's arguments: `coco` one path, or split -> path; choices checked."""
        for name, value, choices in (("overlap", overlap, OVERLAPS), ("crowd", crowd, CROWDS)):
            if value not in choices:
                raise SourceError(f"{flag(name, value)}: choose one of {', '.join(choices)}")
        if coco is None:
            files: tuple[tuple[str, str], ...] = ()
        elif isinstance(coco, Mapping):
            files = tuple((str(k), str(v)) for k, v in coco.items())
        elif isinstance(coco, (str, os.PathLike)):
            files = (("", str(coco)),)
        else:
            files = tuple(_split_and_path(str(c)) for c in coco)
        return cls(files, overlap, crowd, task, None if classes is None else str(classes))

    def to_options(self) -> dict:
        """What the pack's options record: only what differs from the defaults (so packs made
        before these options existed keep their fingerprints); `classes` is the pack's own
        option, recorded there, as are `layout` and `mask_suffix`."""
        found: dict = {}
        if self.coco:
            found["coco"] = [list(pair) for pair in self.coco]
        if self.overlap != "ignore":
            found["overlap"] = self.overlap
        if self.crowd != "ignore":
            found["crowd"] = self.crowd
        if self.task != "auto":
            found["task"] = self.task
        return found


def _split_and_path(text: str) -> tuple[str, str]:
    """`train=a.json` -> ("train", "a.json"); `a.json` -> ("", "a.json")."""
    split, sep, path = text.partition("=")
    if sep and split and "/" not in split and not split.endswith(".json"):
        return split, path
    return "", text
