"""`scan`: detect a source's layout, run it, then apply the split policy and sort the result.

The layouts live beside this module. Published datasets that name themselves by their files
(COCO, Cityscapes, ADE20K) are tried first, in the registry's order; then the generic ones
(mask folders, class folders, lists). This module chooses between them, refuses to guess
when two fit, and turns what they found into a `SourceScan`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from operator import itemgetter
from pathlib import Path

from ..errors import SourceError
from ..flags import flag
from . import ade20k, cityscapes, coco, coco_panoptic
from .class_folders import CLASS_HELP, class_scan, refuse_twin_folders
from .coco_exports import Cvat, Roboflow
from .lists import list_file_note, scan_list_file
from .mask_folders import (
    PAIR_HELP,
    claimed_dirs,
    find_pairs,
    image_folder_of,
    pair_kinds,
    pair_scan,
    reject_unpaired_images,
    scan_explicit_masks,
)
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

# Layouts that recognise themselves by their files, tried in this order: each module has NAME,
# detect(tree, annotations) -> why it fits or None, and scan(root, tree, annotations) -> Found.
DATASET_LAYOUTS = {m.NAME: m for m in (coco, Cvat, Roboflow, coco_panoptic, cityscapes, ade20k)}
LAYOUTS = ("auto", *DATASET_LAYOUTS, "class-folders", "mask-folders", "list")
# Folders that mark annotations a layout must read: never class folders.
ANNOTATION_FOLDERS = ("annotations", "gtFine", "gtCoarse")


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
    annotations = annotations or AnnotationOptions()
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
    if what == "file":
        root, found = scan_list_file(path, layout, masks, mask_suffix, root)
    elif what == "folder":
        keys = {folder_key(locate(p)) for p in exclude} - {None}
        skips = Skips(frozenset(keys))  # type: ignore[arg-type]
        root, found = _scan_folder(resolve(path), layout, masks, mask_suffix, skips, annotations)
        found.notes.extend(skips.notes())
    else:
        raise SourceError(f"{src}: no such file or folder")
    return _finish(root, found, fractions)


def _scan_folder(
    root: Path,
    layout: str,
    masks: str | os.PathLike | None,
    mask_suffix: str | None,
    skips: Skips,
    annotations: AnnotationOptions,
) -> tuple[Path, Found]:
    """Scan a folder source with the layout asked for, or detect it."""
    if is_pack(root):
        raise SourceError(
            f"{root} is a pack made by packer (it holds {' or '.join(PACK_MARKERS)}), not "
            "a source folder; open it with packer.open, or pack the folder it was made from"
        )
    if layout == "list":
        raise SourceError(
            f"{flag('layout', 'list')} needs the .lst or .csv file itself as SRC, not {root}"
        )
    if layout == "class-folders" and (masks is not None or mask_suffix is not None):
        raise SourceError(
            f"{flag('masks')}/{flag('mask_suffix')} contradict {flag('layout', 'class-folders')}"
        )
    if (layout in DATASET_LAYOUTS or annotations.coco) and (masks or mask_suffix):
        raise SourceError(
            f"{flag('masks')}/{flag('mask_suffix')} do not apply to a layout whose masks are "
            "annotations (COCO, Cityscapes, ADE20K)"
        )
    if masks is not None:
        return scan_explicit_masks(root, locate(masks), mask_suffix, skips)
    rejected: list[Rejection] = []
    tree = walk(root, [""], rejected, skips)
    dataset = _dataset_layout(root, tree, layout, annotations)
    if dataset is not None:
        found = dataset
    elif layout == "class-folders":
        found = class_scan(tree, set())
    else:
        found = _detect(root, tree, layout, mask_suffix)
    found.rejected.extend(rejected)
    found.notes.extend(list_file_note(tree))
    return root, found


def _dataset_layout(
    root: Path, tree: Tree, layout: str, annotations: AnnotationOptions
) -> Found | None:
    """The scan of the dataset layout asked for or recognised first; None when none fits."""
    if annotations.coco and layout not in ("auto", coco.NAME):
        raise SourceError(f"{flag('coco')} applies to {flag('layout', coco.NAME)} only")
    names = [layout] if layout in DATASET_LAYOUTS else list(DATASET_LAYOUTS) * (layout == "auto")
    for name in names:
        module = DATASET_LAYOUTS[name]
        why = module.detect(tree, annotations)
        if why is None and name != layout:
            continue
        found = module.scan(root, tree, annotations)
        found.why = found.why or why or f"{flag('layout', name)} as asked"
        return found
    return None


def _refuse_unread_annotations(root: Path, tree: Tree) -> None:
    """Annotation folders that no layout recognised: say so rather than pack them as classes."""
    held = [d for d in ANNOTATION_FOLDERS if d in tree[""].dirs]
    if held:
        raise SourceError(
            f"{root} holds {', '.join(f'{d}/' for d in held)} but matches no annotation layout "
            f"(COCO: annotations/instances_<split>.json beside <split>/ image folders; "
            f"Cityscapes: leftImg8bit/ + gtFine/; ADE20K: images/ + annotations/); pass "
            f"{flag('layout')} or {flag('coco')}, or {flag('layout', 'class-folders')} if "
            "these really are classes"
        )


def _detect(root: Path, tree: Tree, layout: str, mask_suffix: str | None) -> Found:
    """Choose between mask folders and class folders; refuse to guess when both fit."""
    pairs = find_pairs(tree)
    if pairs:
        claimed = claimed_dirs(tree, pairs)
        leftover = class_scan(tree, claimed).class_dirs
        direct = [d + "/" for ds in leftover for d in ds if any(map(is_image, tree[d].files))]
        if direct and layout == "auto":
            raise SourceError(
                f"{root} holds image/mask folders ({pair_kinds(pairs)}) and also folders that "
                f"look like class folders ({', '.join(direct[:5])}); pass "
                f"{flag('layout', 'mask-folders')} or {flag('layout', 'class-folders')}"
            )
        found = pair_scan(root, tree, pairs, mask_suffix)
        reject_unpaired_images(tree, pairs, found)
        return found
    if layout == "mask-folders" or mask_suffix is not None:
        raise SourceError(
            f"no image/mask folder pairs found in {root} (looked for {PAIR_HELP}); "
            f"pass {flag('masks')} to name the mask folder"
        )
    if layout == "auto":
        _refuse_unread_annotations(root, tree)
    found = class_scan(tree, set())
    refuse_twin_folders(tree, found)
    if not found.items:
        raise _unrecognised(root, tree)
    if layout == "auto":
        _refuse_masks_without_images(root, tree, found)
    return found


def _refuse_masks_without_images(root: Path, tree: Tree, found: Found) -> None:
    """Folders named like mask folders, beside a class_dict.csv, and no image folders: masks
    without their images, not a classification set."""
    if "class_dict.csv" not in {name.lower() for name in tree[""].files}:
        return
    with_images = [d for ds in found.class_dirs for d in ds if any(map(is_image, tree[d].files))]
    missing = {d: image_folder_of(d) for d in with_images}
    if not with_images or not all(missing.values()):
        return
    names = ", ".join(f"{d}/" for d in with_images[:5])
    wanted = ", ".join(f"{m}/" for m in list(missing.values())[:5])
    raise SourceError(
        f"{root} holds only mask folders ({names}) and class_dict.csv, but no images: the image "
        f"folders ({wanted}) that pair with them are missing. Put the images beside their masks, "
        f"or pass {flag('masks')} if they are elsewhere"
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
    if folder_splits:
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
    )


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
