"""The mask-folder layout: image folders paired with mask folders, images with masks by stem.

Pairs are found by name at any depth (X/ + Xannot/, JPEGImages/ + SegmentationClass/, images/ +
masks/, ...) or named with --masks; VOC pairs take their splits from ImageSets/Segmentation/.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ..errors import SourceError
from ..flags import flag
from .class_folders import class_scan
from .mask_names import MASK_DIR_SUFFIXES, NAMED_PAIRS, PAIR_HELP
from .model import (
    AnnotationOptions,
    Found,
    Rejection,
    Skips,
    Tree,
    ext,
    folders,
    is_image,
    join,
    not_image,
    stem,
)
from .splits import SPLIT_NAMES, folder_split
from .walk import kind, read_text, resolve, walk

_SUFFIX_START = re.compile(r"[_\-. ]")

NAME = "mask-folders"
DESCRIPTION = "image folders with mask folders beside them (segmentation)"
LOOKED_FOR = PAIR_HELP


@dataclass(frozen=True)
class Pair:
    """An image folder and its mask folder, both relative to the root."""

    image_dir: str
    mask_dir: str
    kind: str
    voc: bool = False
    parent: str = ""


def detect(tree: Tree, annotations: AnnotationOptions) -> str | None:
    """Why the source is image/mask folder pairs (or a mask suffix was given), or None."""
    if annotations.mask_suffix is not None:
        return f"{flag('mask_suffix', annotations.mask_suffix)} given"
    pairs = find_pairs(tree)
    return f"image/mask folder pairs: {pair_kinds(pairs)}" if pairs else None


def scan(root: Path, tree: Tree, annotations: AnnotationOptions) -> Found:
    """Images paired with masks in every pair of folders; the images outside them rejected.
    Under auto, folders beside the pairs that look like class folders are a guess refused."""
    pairs = find_pairs(tree)
    if not pairs:
        raise SourceError(
            f"no image/mask folder pairs found in {root} (looked for {PAIR_HELP}); "
            f"pass {flag('masks')} to name the mask folder"
        )
    if annotations.layout == "auto":
        _refuse_class_folders_beside(root, tree, pairs)
    found = pair_scan(root, tree, pairs, annotations.mask_suffix)
    reject_unpaired_images(tree, pairs, found)
    return found


def _refuse_class_folders_beside(root: Path, tree: Tree, pairs: list[Pair]) -> None:
    """Refuse to guess when folders beside the pairs hold images like class folders."""
    leftover = class_scan(tree, claimed_dirs(tree, pairs)).class_dirs
    direct = [d + "/" for ds in leftover for d in ds if any(map(is_image, tree[d].files))]
    if direct:
        raise SourceError(
            f"{root} holds image/mask folders ({pair_kinds(pairs)}) and also folders that "
            f"look like class folders ({', '.join(direct[:5])}); pass "
            f"{flag('layout', 'mask-folders')} or {flag('layout', 'class-folders')}"
        )


def find_pairs(tree: Tree) -> list[Pair]:
    """Find image/mask sibling folders at any depth, not descending into the pairs found."""
    pairs: list[Pair] = []
    stack = [""]
    while stack:
        rel = stack.pop()
        found = _pairs_in(rel, tree[rel].dirs)
        pairs.extend(found)
        taken = {d for p in found for d in (p.image_dir, p.mask_dir)}
        if any(p.voc for p in found):
            taken.update(join(rel, d) for d in tree[rel].dirs)
        stack.extend(c for c in (join(rel, d) for d in reversed(tree[rel].dirs)) if c not in taken)
    return pairs


def pair_kinds(pairs: list[Pair]) -> str:
    """The distinct pair kinds, in order of discovery."""
    return ", ".join(dict.fromkeys(p.kind for p in pairs))


def claimed_dirs(tree: Tree, pairs: list[Pair]) -> set[str]:
    """Folders that belong to the pairs: theirs, plus every sibling of a VOC pair."""
    claimed = {d for p in pairs for d in (p.image_dir, p.mask_dir)}
    for pair in pairs:
        if pair.voc:
            claimed.update(join(pair.parent, d) for d in tree[pair.parent].dirs)
    return claimed


def scan_explicit_masks(
    src: Path, masks: Path, mask_suffix: str | None, skips: Skips | None = None
) -> tuple[Path, Found]:
    """Pair the images under src with the masks in an explicit folder, mirroring subfolders."""
    mask_root = _resolve_masks(src, masks)
    if mask_root == src or src.is_relative_to(mask_root):
        raise SourceError(
            f"{flag('masks', str(masks))} must be a folder inside or beside SRC, not SRC itself"
        )
    common = type(src)(os.path.commonpath([src, mask_root]))  # a URL stays a URL
    root = src if mask_root.is_relative_to(src) else common
    image_dir = "" if src == root else src.relative_to(root).as_posix()
    mask_dir = mask_root.relative_to(root).as_posix()
    rejected: list[Rejection] = []
    starts = [image_dir] if image_dir == "" else [image_dir, mask_dir]
    tree = walk(root, starts, rejected, skips)
    pair = Pair(image_dir, mask_dir, "--masks")
    found = pair_scan(root, tree, [pair], mask_suffix)
    found.layout = "mask-folders (--masks)"
    found.rejected.extend(rejected)
    return root, found


def pair_scan(root: Path, tree: Tree, pairs: list[Pair], suffix: str | None) -> Found:
    """Segmentation samples: images paired with masks by subfolder and file stem."""
    kinds = pair_kinds(pairs)
    found = Found(f"mask-folders ({kinds})", "segmentation", f"image/mask pairs in {kinds}")
    sides = []
    for pair in pairs:
        masks = _index_side(tree, pair.mask_dir, set(), found.rejected)
        explicit = pair.kind == "--masks"
        flat = explicit and not any(sub for sub, _ in masks)
        prune = {pair.mask_dir}
        images = _index_side(
            tree, pair.image_dir, prune, found.rejected, is_src=explicit, flat=flat
        )
        sides.append((images, masks))
    if suffix is None:
        suffix = _detect_suffix(sides, found.notes)
    mask_names = [rel for _, masks in sides for rel in masks.values()]
    exts = {ext(rel) for rel in mask_names}
    looked_ext = exts.pop() if len(exts) == 1 else ".*"
    for pair, (images, masks) in zip(pairs, sides, strict=True):
        _match(root, tree, pair, images, masks, suffix, looked_ext, found)
    return found


def reject_unpaired_images(tree: Tree, pairs: list[Pair], found: Found) -> None:
    """Reject images that lie outside every image/mask folder pair."""
    reason = f"not inside an image/mask folder pair ({pair_kinds(pairs)})"
    for folder, names in folders(tree, "", claimed_dirs(tree, pairs)):
        found.rejected.extend(Rejection(join(folder, n), reason) for n in names if is_image(n))


def _pairs_in(parent: str, names: list[str]) -> list[Pair]:
    """The image/mask pairs among the subfolders of one folder."""
    by_lower = {name.lower(): name for name in names}
    pairs = []
    for name in names:
        low = name.lower()
        named = [by_lower[m.lower()] for m in NAMED_PAIRS.get(low, ()) if m.lower() in by_lower]
        if named:  # the first in order of preference: SegmentationClass/ before ...Aug/
            pairs.append(_named_pair(parent, name, named[0]))
            continue
        masks = [by_lower[low + s] for s in MASK_DIR_SUFFIXES if low + s in by_lower]
        if len(masks) > 1:
            raise SourceError(
                f"{join(parent, name)}/ has several candidate mask folders "
                f"({', '.join(m + '/' for m in masks)}); pass {flag('masks')} to choose one"
            )
        if masks:
            suffix = masks[0][len(name) :]
            pairs.append(Pair(join(parent, name), join(parent, masks[0]), f"X/ + X{suffix}/"))
    return pairs


def _named_pair(parent: str, image: str, mask: str) -> Pair:
    """A pair from the fixed folder names (VOC, images/masks)."""
    voc = image.lower() == "jpegimages"
    described = f"JPEGImages/ + {mask}/" if voc else f"{image.lower()}/ + {mask.lower()}/"
    return Pair(join(parent, image), join(parent, mask), described, voc, parent)


def _resolve_masks(src: Path, masks: Path) -> Path:
    """Find the --masks folder: as given (absolute or from the working folder), else inside SRC."""
    for candidate in (masks, src / masks):
        if kind(candidate) == "folder":
            return resolve(candidate)
    raise SourceError(
        f"{flag('masks', str(masks))}: no such folder (looked in the working folder and {src})"
    )


def _index_side(
    tree: Tree,
    top: str,
    prune: set[str],
    rejected: list[Rejection],
    *,
    is_src: bool = False,
    flat: bool = False,
) -> dict[tuple[str, str], str]:
    """Index the images under top by (subfolder, stem); reject other files and stem clashes.

    is_src: top is SRC itself (--masks), whose own non-image files are metadata, not rejects.
    flat: the mask folder has no subfolders, so images pair by stem alone, wherever they lie.
    """
    index: dict[tuple[str, str], str] = {}
    cut = len(top) + 1 if top else 0
    for folder, names in folders(tree, top, prune):
        sub = "" if flat else folder[cut:]
        for name in names:
            rel = join(folder, name)
            if not is_image(name):
                if not (is_src and folder == top):
                    rejected.append(not_image(rel, name))
                continue
            key = (sub, stem(name))
            if key in index:
                reason = f"same name stem as {index[key]}; masks pair by stem, so it is ambiguous"
                rejected.append(Rejection(rel, reason))
            else:
                index[key] = rel
    return index


def _detect_suffix(sides: list[tuple[dict, dict]], notes: list[str]) -> str:
    """What mask names add after the image stem: "" when some names match, else the commonest."""
    images = {(i, *key) for i, (side, _) in enumerate(sides) for key in side}
    masks = [(i, *key) for i, (_, side) in enumerate(sides) for key in side]
    if not masks or any(key in images for key in masks):
        return ""
    counts: Counter[str] = Counter()
    for i, sub, mask_stem in masks:
        for match in _SUFFIX_START.finditer(mask_stem):
            if match.start() and (i, sub, mask_stem[: match.start()]) in images:
                counts[mask_stem[match.start() :]] += 1
    if not counts:
        return ""
    (best, n), *rest = counts.most_common(2)
    if rest and rest[0][1] == n:
        raise SourceError(
            f"mask names carry different suffixes ({best!r}, {rest[0][0]!r}) equally often; "
            f"pass {flag('mask_suffix')}"
        )
    notes.append(f"detected mask suffix {best!r}: masks are named <image stem>{best} ({n} masks)")
    return best


def _match(
    root: Path,
    tree: Tree,
    pair: Pair,
    images: dict[tuple[str, str], str],
    masks: dict[tuple[str, str], str],
    suffix: str,
    looked_ext: str,
    found: Found,
) -> None:
    """Pair the images of one pair of folders with their masks; reject or count the rest."""
    splits, listing = _voc_splits(root, tree, pair, found) if pair.voc else (None, "")
    used = set()
    maskless = 0
    for (sub, image_stem), image in images.items():
        key = (sub, image_stem + suffix)
        if key not in masks:
            if pair.voc:
                maskless += 1
            else:
                looked = join(join(pair.mask_dir, sub), image_stem + suffix) + looked_ext
                found.rejected.append(
                    Rejection(image, f"no mask found for this image (looked for {looked})")
                )
            continue
        used.add(key)
        split = folder_split(image) if splits is None else splits.get(image_stem)
        if split is None:
            found.rejected.append(Rejection(image, f"not listed in {listing}"))
            continue
        found.items.append((image, split, masks[key], None))
    for key, mask in masks.items():
        if key not in used:
            found.rejected.append(Rejection(mask, _orphan_reason(pair, *key, suffix)))
    if maskless:
        found.notes.append(
            f"{maskless} images in {pair.image_dir}/ have no mask and are not part of the "
            "segmentation set"
        )
    if pair.voc:
        found.notes.extend(_voc_ignored(tree, pair))
        if "Annotations" in tree[pair.parent].dirs:
            found.task_why = (
                f"{pair.kind} masks; {flag('task', 'detection')} packs the boxes of "
                f"{join(pair.parent, 'Annotations')}/ instead (Pascal VOC detection)"
            )


def _orphan_reason(pair: Pair, sub: str, mask_stem: str, suffix: str) -> str:
    """Why a mask has no image: wrong suffix, or no image of that name."""
    if not mask_stem.endswith(suffix):
        return f"mask name does not end with the mask suffix {suffix!r}"
    base = mask_stem[: len(mask_stem) - len(suffix)]
    return f"no image found for this mask (looked for {join(join(pair.image_dir, sub), base)}.*)"


def _voc_splits(
    root: Path, tree: Tree, pair: Pair, found: Found
) -> tuple[dict[str, str] | None, str]:
    """Read VOC's ImageSets/Segmentation/<split>.txt into stem -> split; None when absent."""
    folder = join(pair.parent, "ImageSets/Segmentation")
    node = tree.get(folder)
    lists = [n for n in node.files if ext(n) == ".txt"] if node else []
    used = [n for n in lists if stem(n).lower() in SPLIT_NAMES]
    if not used:
        return None, ""
    splits: dict[str, str] = {}
    for name in used:  # sorted names: a stem listed twice stays in the first split file
        text = read_text(root / folder / name, f"{folder}/{name}")
        for line in text.splitlines():
            if line.strip():
                splits.setdefault(line.split()[0], stem(name))
    ignored = [n for n in lists if n not in used]
    found.split_origin = f"{folder}/"
    found.notes.append(f"splits from {folder}/: {', '.join(used)}")
    if ignored:
        found.notes.append(f"ignored {', '.join(ignored)} in {folder}/ (not split names)")
    return splits, f"{folder}/{' or '.join(used)}"


def _voc_ignored(tree: Tree, pair: Pair) -> list[str]:
    """Name the folders beside a VOC pair that hold images but are not read."""
    notes = []
    for name in tree[pair.parent].dirs:
        rel = join(pair.parent, name)
        if rel in (pair.image_dir, pair.mask_dir):
            continue
        count = sum(is_image(n) for _, names in folders(tree, rel) for n in names)
        if count:
            notes.append(f"ignored {rel}/ ({count} images): only {pair.kind} are read")
    return notes
