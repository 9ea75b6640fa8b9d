"""`scan`: detect a source's layout, run it, then apply the split policy and sort the result.

Every layout is a module beside this one with the same small protocol (what TFDS builders are
to datasets): `NAME`, `LOOKED_FOR` (what it looks for), `DESCRIPTION` (one line for --help),
`detect(tree, annotations)` -> why it fits or None, and `scan(root, tree, annotations)` ->
`Found`. `REGISTRY` lists them in the order auto tries them: published datasets that name
themselves by their files first, then the generic ones (mask folders, class folders). A new
layout is a module and a line here. `detect` may refuse to guess (SourceError) when a tree
fits ambiguously; it is only called under auto.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from operator import itemgetter
from pathlib import Path

from ..errors import SourceError
from ..flags import flag
from . import (
    ade20k,
    cityscapes,
    class_folders,
    coco,
    coco_panoptic,
    hf_datasets,
    lists,
    mask_folders,
    voc,
    yolo,
)
from .class_folders import CLASS_HELP, refuse_unread_annotations
from .coco_exports import Cvat, LabelStudio, Roboflow
from .lists import list_file_note, scan_list_file
from .mask_folders import PAIR_HELP, scan_explicit_masks
from .model import (
    PACK_MARKERS,
    AnnotationOptions,
    Found,
    Rejection,
    Sample,
    Skips,
    SourceScan,
    Tree,
    is_image,
)
from .splits import assign_split, check_fractions
from .walk import folder_key, is_pack, kind, locate, resolve, walk

# The layouts, in the order auto tries them.
REGISTRY = (
    coco,
    Cvat,
    Roboflow,
    LabelStudio,
    coco_panoptic,
    cityscapes,
    ade20k,
    yolo,
    voc,
    hf_datasets,
    mask_folders,
    class_folders,
    lists,
)
BY_NAME = {layout.NAME: layout for layout in REGISTRY}
LAYOUTS = ("auto", *BY_NAME)
# Layouts --masks and --mask-suffix may come with (a list refuses a folder on its own).
MASK_FILE_LAYOUTS = ("auto", mask_folders.NAME, lists.NAME)


def describe(layout) -> str:
    """A layout's one line for --help: its DESCRIPTION, else what it looks for."""
    return getattr(layout, "DESCRIPTION", "") or layout.LOOKED_FOR


def layouts_help() -> str:
    """Every layout with its line, in the order auto tries them."""
    return "; ".join(f"{layout.NAME}: {describe(layout)}" for layout in REGISTRY)


def scan(
    src: str | os.PathLike,
    *,
    layout: str = "auto",
    masks: str | os.PathLike | None = None,
    mask_suffix: str | None = None,
    split: Mapping[str, float] | None = None,
    exclude: Iterable[str | os.PathLike] = (),
    root: str | os.PathLike | None = None,
    annotations: AnnotationOptions | None = None,
) -> SourceScan:
    """Detect the layout of src (folder or .lst/.csv list); list its samples, splits, rejects.

    Folders in `exclude` (the pack's own output folder) and packer output folders met on the
    way are not scanned; `root` is the folder a list's relative paths start from (default:
    the list's own folder).
    """
    annotations = dataclasses.replace(
        annotations or AnnotationOptions(), layout=layout, mask_suffix=mask_suffix
    )
    if layout not in LAYOUTS:
        raise SourceError(f"unknown layout {layout!r}; choose one of {', '.join(LAYOUTS)}")
    try:
        fractions = None if split is None else check_fractions(split)
    except ValueError as exc:
        raise SourceError(str(exc)) from None
    path = locate(src)
    what = kind(path)
    if root is not None and what != "file":
        raise SourceError(f"{flag('root')} applies to a .lst/.csv list as SRC, not to a folder")
    if what == "file" and annotations.coco:
        raise SourceError(f"{flag('coco')} needs the folder of the images as SRC, not a file")
    if what == "file" and path.name.lower().endswith(".parquet"):  # one Hub Parquet file
        root, found = hf_datasets.scan_file(path, annotations)
    elif what == "file":
        root, found = scan_list_file(path, layout, masks, mask_suffix, root)
    elif what == "folder":
        keys = {folder_key(locate(p)) for p in exclude} - {None}
        skips = Skips(frozenset(keys))  # type: ignore[arg-type]
        root, found = _scan_folder(resolve(path), masks, skips, annotations)
        found.notes.extend(skips.notes())
    else:
        raise SourceError(f"{src}: no such file or folder")
    _check_task(found, annotations.task)
    return _finish(root, found, fractions)


def _scan_folder(
    root: Path, masks: str | os.PathLike | None, skips: Skips, annotations: AnnotationOptions
) -> tuple[Path, Found]:
    """Scan a folder source with the layout asked for, or detect it."""
    layout, mask_suffix = annotations.layout, annotations.mask_suffix
    if is_pack(root):
        raise SourceError(
            f"{root} is a pack made by packer (it holds {' or '.join(PACK_MARKERS)}), not "
            "a source folder; open it with packer.open, or pack the folder it was made from"
        )
    if layout == class_folders.NAME and (masks is not None or mask_suffix is not None):
        raise SourceError(
            f"{flag('masks')}/{flag('mask_suffix')} contradict {flag('layout', 'class-folders')}"
        )
    if (layout not in MASK_FILE_LAYOUTS or annotations.coco) and (masks or mask_suffix):
        raise SourceError(
            f"{flag('masks')}/{flag('mask_suffix')} do not apply to a layout whose targets are "
            "annotations, not mask files (COCO, Cityscapes, ADE20K, YOLO, VOC)"
        )
    if masks is not None:
        return scan_explicit_masks(root, locate(masks), mask_suffix, skips)
    rejected: list[Rejection] = []
    tree = walk(root, [""], rejected, skips)
    found = _run_layout(root, tree, annotations)
    found.rejected.extend(rejected)
    found.notes.extend(list_file_note(tree))
    return root, found


def _run_layout(root: Path, tree: Tree, annotations: AnnotationOptions) -> Found:
    """The scan of the layout asked for, or of the first in the registry that detects itself."""
    asked = annotations.layout
    if annotations.coco and asked not in ("auto", coco.NAME):
        raise SourceError(f"{flag('coco')} applies to {flag('layout', coco.NAME)} only")
    if asked != "auto":
        layout = BY_NAME[asked]
        found = layout.scan(root, tree, annotations)
        found.why = found.why or f"{flag('layout', asked)} as asked"
        return found
    for layout in REGISTRY:
        why = layout.detect(tree, annotations)
        if why is not None:
            found = layout.scan(root, tree, annotations)
            found.why = found.why or why
            return found
    refuse_unread_annotations(root, tree)
    raise _unrecognised(root, tree)


def _check_task(found: Found, asked: str) -> None:
    """A layout that gives another task than the one asked: one line saying so."""
    if asked not in ("auto", found.task):
        raise SourceError(
            f"{flag('task', asked)}: the {found.layout} layout gives {found.task}, not {asked}"
        )


def _unrecognised(root: Path, tree: Tree) -> SourceError:
    """The error for a folder that matches no layout, saying what it does hold."""
    node = tree[""]
    images = sum(is_image(name) for name in node.files)
    return SourceError(
        f"cannot recognise the layout of {root}: it holds {len(node.dirs)} folders and "
        f"{images} images directly, but no {CLASS_HELP} with images and no image/mask folders "
        f"({PAIR_HELP}); pass {flag('layout')}, {flag('masks')}, or a .lst/.csv list as SRC"
    )


def _finish(root: Path, found: Found, fractions: dict[str, float] | None) -> SourceScan:
    """Apply the split policy, refuse an empty result and sort everything deterministically."""
    items, rejected = found.items, found.rejected
    folder_splits = sorted({split for _, split, _, _ in items if split})
    if folder_splits and fractions is not None and found.resplit:
        items = _resplit(items, fractions, found)
        split_source = "hash"
    elif folder_splits:
        if fractions is not None:
            raise SourceError(
                f"the source already has splits ({', '.join(folder_splits)}) from its "
                f"{found.split_origin}; drop {flag('split')}"
            )
        where = "inside a split folder"
        if found.split_origin.startswith("split column"):
            where = f"given a split in the {found.split_origin}"
        reason = f"not {where}, unlike the other samples ({', '.join(folder_splits)})"
        rejected.extend(Rejection(item[0], reason) for item in items if not item[1])
        items = [item for item in items if item[1]]
        split_source = "folders"
    elif fractions is not None:
        items = [(i, assign_split(i, fractions), m, label) for i, _, m, label in items]
        split_source = "hash"
    else:
        items = [(i, "train", m, label) for i, _, m, label in items]
        split_source = "single"
    rejected.sort(key=lambda r: (r.path, r.reason))
    if not items:
        raise _empty_error(root, found, rejected)
    items.sort(key=itemgetter(1, 0))
    samples = [Sample(*item) for item in items]
    return SourceScan(
        root,
        found.layout,
        found.task,
        samples,
        found.class_names,
        rejected,
        split_source,
        found.notes,
        found.table,
        found.why,
        found.task_why,
        found.left_out,
        found.keypoints,
    )


def _resplit(items: list, fractions: dict[str, float], found: Found) -> list:
    """--split over a source whose splits are lists: each listed image once (in the first
    list naming it), assigned by the hash of its path as a source without splits is."""
    listed = sorted({split for _, split, _, _ in items if split})
    once = {}
    for item in sorted(items, key=itemgetter(1, 0)):
        once.setdefault(item[0], item)
    found.notes.append(
        f"{flag('split')} re-splits the {len(once):,} images of the {found.split_origin} "
        f"({', '.join(listed)}) by a hash of each path, instead of those splits"
    )
    return [(i, assign_split(i, fractions), m, label) for i, _, m, label in once.values()]


def _empty_error(root: Path, found: Found, rejected: list[Rejection]) -> SourceError:
    """The error for a layout that yields no sample, with what was looked for and why."""
    if rejected:
        first = rejected[0]
        detail = f"{len(rejected)} inputs rejected, e.g. {first.path}: {first.reason}"
    else:
        detail = "no image files there"
    return SourceError(
        f"no samples in {root} ({found.layout}; looked for {found.looked_for}): {detail}"
    )
