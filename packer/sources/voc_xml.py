"""A Pascal VOC annotation XML: its objects read at scan time, carried by an objects recipe.

Each `<object>` gives its `<name>`, `<difficult>` flag and `<bndbox>` (xmin, ymin, xmax, ymax:
1-based inclusive pixel indices), converted as Detectron2's `pascal_voc.py` does to continuous
pixel coordinates (x1 = xmin - 1, y1 = ymin - 1, x2 = xmax, y2 = ymax). An object that cannot be
one (no name, no bndbox, a coordinate that is no number, an inverted box, a class not in the
names file) is named with the file, the object's number and the reason, and left out; the
image and its other objects are kept. An XML that does not parse rejects its image.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from .. import storage
from .model import Rejection
from .objects import ObjectsRecipe, SourceObject
from .recipes import Reader, digest_of

CORNERS = ("xmin", "ymin", "xmax", "ymax")


@dataclass(frozen=True)
class XmlObject:
    """One `<object>` as written: its name, Detectron2's box (None with a `problem`)."""

    number: int  # 1-based, in the file's order
    name: str
    box: tuple[float, float, float, float] | None
    difficult: bool
    problem: str | None = None


def read_xml(root: Path, xml: str, image: str, rejected: list[Rejection]) -> list[XmlObject] | None:
    """The objects of one annotation file; None (and a rejection) when it does not parse."""
    try:
        document = ET.fromstring(storage.read_bytes(root / xml))
    except OSError as exc:
        rejected.append(Rejection(xml, f"cannot read it (its image is not packed): {exc}"))
        return None
    except ET.ParseError as exc:
        reason = f"does not parse as XML (its image {image} is not packed): {exc}"
        rejected.append(Rejection(xml, reason))
        return None
    return [_object(number, node) for number, node in enumerate(document.iter("object"), 1)]


def _object(number: int, node: ET.Element) -> XmlObject:
    name = (node.findtext("name") or "").strip()
    difficult = (node.findtext("difficult") or "0").strip() not in ("0", "")
    if not name:
        return XmlObject(number, name, None, difficult, "no <name>")
    bndbox = node.find("bndbox")
    if bndbox is None:
        return XmlObject(number, name, None, difficult, "no <bndbox>")
    values = []
    for corner in CORNERS:
        text = (bndbox.findtext(corner) or "").strip()
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            return XmlObject(number, name, None, difficult, f"<{corner}> {text!r} is not a number")
        values.append(value)
    xmin, ymin, xmax, ymax = values
    if xmax < xmin or ymax < ymin:
        return XmlObject(number, name, None, difficult, f"an inverted box {tuple(values)}")
    return XmlObject(number, name, (xmin - 1.0, ymin - 1.0, xmax, ymax), difficult)


@dataclass(frozen=True)
class VocObjects(ObjectsRecipe):
    """An image's VOC objects, read from `source` at scan time: (label, x1, y1, x2, y2,
    difficult) each, and the objects left out, one line each."""

    source: str
    boxes: tuple[tuple[int, float, float, float, float, bool], ...]
    problems: tuple[str, ...]
    digest: str
    files: tuple[str, ...] = ()

    @classmethod
    def made(cls, xml: str, objects: list[XmlObject], index: dict[str, int], names_from: str):
        """The recipe of one XML's objects, class names mapped through `index`."""
        boxes, problems = [], []
        for o in objects:
            problem = o.problem
            if problem is None and o.name not in index:
                problem = f"class {o.name!r} is not in {names_from}"
            if problem is not None:
                problems.append(f"{xml} object {o.number} ({o.name or '?'}): {problem}")
            else:
                boxes.append((index[o.name], *o.box, o.difficult))  # type: ignore[misc]
        return cls(xml, tuple(boxes), tuple(problems), digest_of([boxes, problems]))

    @property
    def key(self) -> str:
        return self.source

    def objects(self, read: Reader, size: tuple[int, int]) -> tuple[list[SourceObject], list[str]]:
        found = [SourceObject(b[0], b[1:5], difficult=b[5]) for b in self.boxes]
        return found, list(self.problems)
