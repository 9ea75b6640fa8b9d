"""The ADE20K SceneParsing layout: `ADEChallengeData2016/images/{training,validation}/*.jpg`
with `annotations/{training,validation}/*.png` (SRC the ADEChallengeData2016 folder or its
parent).

Mask value 0 ("other") is the ignore index and value k is class k-1 (mmsegmentation's
`reduce_zero_label`), named by `objectInfo150.csv`/`.txt` when the folder holds one, else by
the built-in 150 names. The mask stays a file path; the table's value map does the shift.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

from ..errors import SourceError
from ..flags import flag
from ..labels import IGNORED, ClassInfo, ClassTable
from .ade20k_names import ADE20K_NAMES
from .model import (
    AnnotationOptions,
    Found,
    Rejection,
    Tree,
    ext,
    folders,
    is_image,
    join,
    not_image,
    stem,
)
from .walk import read_text

NAME = "ade20k"
FOLDER = "ADEChallengeData2016"
SPLITS = {"training": "train", "validation": "val"}  # folder -> split
NAME_FILES = ("objectInfo150.csv", "objectInfo150.txt")
DESCRIPTION = "ADE20K SceneParsing: ADEChallengeData2016/ images/ + annotations/"
LOOKED_FOR = (
    "ADEChallengeData2016/images/{training,validation}/*.jpg beside "
    "annotations/{training,validation}/*.png"
)


def detect(tree: Tree, annotations: AnnotationOptions) -> str | None:
    """Why the source is ADE20K (images/ and annotations/ with training/ or validation/)."""
    base = _base(tree)
    if base is None:
        return None
    images = join(base, "images")
    shown = " + ".join(
        f"{_count_images(tree, join(images, f)):,} {s}"
        for f, s in SPLITS.items()
        if f in tree[images].dirs
    )
    where = f"{base}/" if base else ""
    return f"ADE20K SceneParsing: {where}images/ + annotations/, {shown} images"


def scan(root: Path, tree: Tree, annotations: AnnotationOptions) -> Found:
    """Pair each image with the annotation of the same stem in the same split folder."""
    base = _base(tree)
    if base is None:
        raise SourceError(
            f"{flag('layout', NAME)}: {root} has no ADE20K layout (looked for {LOOKED_FOR})"
        )
    names, source = _names(root, tree, base)
    value_map = ((0, IGNORED), *((k, k - 1) for k in range(1, len(names) + 1)))
    table = ClassTable(tuple(ClassInfo(i, n) for i, n in enumerate(names)), source, value_map)
    found = Found(
        NAME, "segmentation", LOOKED_FOR, split_origin="ADE20K split folders", table=table
    )
    found.notes.append(
        f"ADE20K classes from {source}: mask value 0 (other) is ignored, k becomes class k-1"
    )
    masks = _masks(tree, join(base, "annotations"), found.rejected)
    _pair_images(tree, join(base, "images"), join(base, "annotations"), masks, found)
    _note_unread(tree, base, found.notes)
    return found


def _base(tree: Tree) -> str | None:
    """The folder holding images/ and annotations/: ADEChallengeData2016/, else the root."""
    for base in (FOLDER, ""):
        node = tree.get(base)
        if node is None or "images" not in node.dirs or "annotations" not in node.dirs:
            continue
        images, masks = tree[join(base, "images")].dirs, tree[join(base, "annotations")].dirs
        if any(f in images and f in masks for f in SPLITS):
            return base
    return None


def _masks(tree: Tree, top: str, rejected: list[Rejection]) -> dict[tuple[str, str], str]:
    """(folder below annotations/, stem) -> mask path, for every PNG under annotations/."""
    masks: dict[tuple[str, str], str] = {}
    for folder, names in folders(tree, top):
        sub = folder[len(top) + 1 :]
        for name in names:
            rel = join(folder, name)
            if ext(name) == ".png":
                masks[(sub, stem(name))] = rel
            else:
                rejected.append(Rejection(rel, "not a PNG mask (ADE20K annotations are .png)"))
    return masks


def _pair_images(
    tree: Tree, top: str, masks_top: str, masks: dict[tuple[str, str], str], found: Found
) -> None:
    """Items for the images that have a mask; rejections for the rest, and for orphan masks."""
    used: dict[str, str] = {}
    for folder, names in folders(tree, top):
        sub = folder[len(top) + 1 :]
        split = SPLITS.get(sub.split("/")[0])
        for name in names:
            rel = join(folder, name)
            mask = masks.get((sub, stem(name)))
            if not is_image(name):
                found.rejected.append(not_image(rel, name))
            elif split is None:
                found.rejected.append(Rejection(rel, f"not inside {top}/training/ or validation/"))
            elif mask is None:
                found.rejected.append(
                    Rejection(rel, f"no mask {join(masks_top, join(sub, stem(name)))}.png")
                )
            elif mask in used:
                found.rejected.append(Rejection(rel, f"{mask} already pairs with {used[mask]}"))
            else:
                used[mask] = rel
                found.items.append((rel, split, mask, None))
    for (sub, name), mask in sorted(masks.items()):
        if mask not in used:
            found.rejected.append(Rejection(mask, f"no image {name}.* in {join(top, sub)}/"))


def _names(root: Path, tree: Tree, base: str) -> tuple[tuple[str, ...], str]:
    """The class names: from objectInfo150 in the ADE folder or the root, else built in."""
    for folder in dict.fromkeys((base, "")):
        for file_name in NAME_FILES:
            if file_name in tree[folder].files:
                shown = join(folder, file_name)
                return _read_names(read_text(root / shown, shown), shown), shown
    return ADE20K_NAMES, "ADE20K objectInfo150 (built in)"


def _read_names(text: str, shown: str) -> tuple[str, ...]:
    """The first name of each row (`a;b;c` or `a, b, c`) of objectInfo150, by Idx 1..N."""
    lines = [line for line in text.splitlines() if line.strip()]
    head = lines[0] if lines else ""
    if "\t" in head or "," in head:
        rows = list(csv.reader(lines, delimiter="\t" if "\t" in head else ","))
    else:
        width = len(head.split())
        rows = [line.split(None, width - 1) for line in lines]
    header = [cell.strip().lower() for cell in rows[0]] if rows else []
    if "idx" not in header or "name" not in header:
        raise SourceError(f"{shown}: expected the columns Idx, Ratio, Train, Val, Name")
    at_idx, at_name = header.index("idx"), header.index("name")
    named: dict[int, str] = {}
    for line_no, row in enumerate(rows[1:], start=2):
        try:
            named[int(row[at_idx])] = re.split(r"[;,]", row[at_name])[0].strip()
        except (ValueError, IndexError):
            raise SourceError(f"{shown}:{line_no}: expected Idx and Name, found {row!r}") from None
    if sorted(named) != list(range(1, len(named) + 1)) or not all(named.values()):
        raise SourceError(f"{shown}: Idx must run 1..N, each with a name")
    return tuple(named[k] for k in sorted(named))


def _count_images(tree: Tree, top: str) -> int:
    """How many images lie under a folder."""
    return sum(is_image(n) for _, names in folders(tree, top) for n in names)


def _note_unread(tree: Tree, base: str, notes: list[str]) -> None:
    """Name the folders beside images/ and annotations/ that the layout does not read."""
    others = [join(base, d) for d in tree[base].dirs if d not in ("images", "annotations")]
    if base:
        others += [d for d in tree[""].dirs if d != base]
    if others:
        notes.append(f"not read by the ADE20K layout: {', '.join(d + '/' for d in others)}")
