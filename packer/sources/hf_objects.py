"""A Hugging Face dataset row's `objects` as an objects recipe: `bbox` and `category` per object.

Boxes are read in COCO's convention, [x, y, w, h] in source pixels (what the Hub's detection
datasets and `datasets`' object-detection guide use), and become x1, y1, x2, y2 as the COCO
layout makes them; categories are ClassLabel indices 0..K-1. An object whose box has no area,
is not four numbers, or whose category is not a class is left out of its image with a line
saying why, as COCO annotations are.
"""

from __future__ import annotations

from dataclasses import dataclass

from .objects import ObjectsRecipe, SourceObject
from .recipes import Reader, digest_of

# One object: (class index, (x1, y1, x2, y2)).
Box = tuple[int, tuple[float, float, float, float]]


@dataclass(frozen=True)
class HfObjects(ObjectsRecipe):
    """One row's objects, carried whole (a row holds a few dozen at most)."""

    source: str  # the objects cell, `<file>#row=<i>&column=<objects>`
    boxes: tuple[Box, ...]
    problems: tuple[str, ...]
    digest: str
    files: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return self.source

    def objects(self, read: Reader, size: tuple[int, int]) -> tuple[list[SourceObject], list[str]]:
        return [SourceObject(label, box) for label, box in self.boxes], list(self.problems)


def row_objects(value, source: str, classes: int) -> HfObjects:
    """A row's objects value (a dict of lists, or a list of dicts) as a recipe."""
    if isinstance(value, dict):
        bboxes, categories = value.get("bbox") or [], value.get("category") or []
    else:
        rows = value or []
        bboxes = [o.get("bbox") for o in rows]
        categories = [o.get("category") for o in rows]
    boxes, problems = [], []
    for i, (bbox, category) in enumerate(zip(bboxes, categories, strict=False)):
        corners = _corners(bbox)
        if isinstance(corners, str) or not (isinstance(category, int) and 0 <= category < classes):
            why = corners if isinstance(corners, str) else f"category {category!r} is not a class"
            problems.append(f"{source}#object {i}: {why}")
            continue
        boxes.append((category, corners))
    if len(bboxes) != len(categories):
        problems.append(f"{source}: {len(bboxes)} boxes but {len(categories)} categories")
    digest = digest_of([[list(b) if b else b for b in bboxes], list(categories)])
    return HfObjects(source, tuple(boxes), tuple(problems), digest)


def _corners(bbox) -> tuple[float, float, float, float] | str:
    """COCO's [x, y, w, h] as corners, or why it cannot be one."""
    try:
        x, y, w, h = (float(v) for v in bbox)
    except (TypeError, ValueError):
        return f"bbox {bbox!r} is not four numbers"
    if w <= 0 or h <= 0:
        return f"a box of {'negative' if min(w, h) < 0 else 'zero'} size ({w:g}x{h:g})"
    return (x, y, x + w, y + h)
