"""A YOLO label file as an objects recipe: `cls cx cy w h` boxes and `cls x1 y1 x2 y2 ...`
polygons, normalised to the image's width and height, read as Ultralytics reads them.

Coordinates become source pixels in float32 arithmetic, as Ultralytics computes them
(`xywhn2xyxy` for boxes; `segments * (w, h)` for polygons, whose box is their hull, as
`segments2boxes` makes it), so a polygon filled from these pixels (`("fill", ...)`: int32 points
through `cv2.fillPoly`) is Ultralytics' `polygon2mask`. A line that cannot be an object (its
field count, a non-number, a class beyond the names, a negative size, a coordinate outside
0..1, a repeat of an earlier line) is left out and named with its file, line number and
reason; the image and its other objects are kept (where Ultralytics drops all the labels of
an image for one bad line).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .objects import ObjectsRecipe, SourceObject
from .recipes import Reader

BOX_FIELDS = 5  # cls cx cy w h
MIN_POLYGON_FIELDS = 7  # cls and three points


def line_kind(fields: int, keypoints: int = 0) -> str | None:
    """ "box", "polygon", or None for a field count that is neither; with `keypoints` (the
    fields a pose line adds after its box: data.yaml's kpt_shape), pose lines are boxes."""
    if fields == BOX_FIELDS + keypoints:
        return "box"
    if keypoints:
        return None
    if fields >= MIN_POLYGON_FIELDS and fields % 2:
        return "polygon"
    return None


def text_kinds(text: str, keypoints: int = 0) -> set[str]:
    """The kinds of line a label file's text holds ("box", "polygon"), counting fields only."""
    lines = text.splitlines()
    return {kind for line in lines if (kind := line_kind(len(line.split()), keypoints))}


@dataclass(frozen=True)
class YoloObjects(ObjectsRecipe):
    """An image's YOLO label file (`source`; `files` empty when the image has none: a
    background image, no objects), the class count of `data.yaml`, the pack's task and the
    keypoint fields of a pose line (0: no pose labels) and the values a point has (kpt_shape's
    D: 2 or 3); the keypoints are read under the task keypoints only."""

    source: str
    classes: int
    task: str
    digest: str
    files: tuple[str, ...] = ()
    keypoints: int = 0
    point_values: int = 3

    @property
    def key(self) -> str:
        return self.source

    def objects(self, read: Reader, size: tuple[int, int]) -> tuple[list[SourceObject], list[str]]:
        if not self.files:
            return [], []
        try:
            text = read(self.files[0]).decode("utf-8")
        except UnicodeDecodeError as exc:
            return [], [f"{self.source}: not UTF-8 text ({exc.reason}); no objects read"]
        found, problems = [], []
        seen: dict[tuple[float, ...], int] = {}  # a line's numbers -> the line first giving them
        for number, line in enumerate(text.splitlines(), 1):
            fields = line.split()
            if not fields:
                continue
            made = self._object(fields, size)
            if isinstance(made, SourceObject):
                first = seen.setdefault(tuple(map(float, fields)), number)
                if first == number:
                    found.append(made)
                    continue
                made = f"the same as line {first} (Ultralytics drops duplicate labels)"
            problems.append(f"{self.source} line {number}: {made}")
        return found, problems

    def _object(self, fields: list[str], size: tuple[int, int]) -> SourceObject | str:
        """One line as an object at the source size, or why it is none."""
        kind = line_kind(len(fields), self.keypoints)
        if kind is None and self.keypoints:
            wanted = BOX_FIELDS + self.keypoints
            return f"{len(fields)} fields; a pose line has {wanted} (cls cx cy w h, keypoints)"
        if kind is None:
            return (
                f"{len(fields)} fields; a box has 5 (cls cx cy w h), a polygon an odd number "
                "of 7 or more (cls x1 y1 x2 y2 x3 y3 ...)"
            )
        bad = next((f for f in fields if not _is_number(f)), None)
        if bad is not None:
            return f"{bad!r} is not a number"
        points = None
        if self.keypoints:
            fields, points = fields[:BOX_FIELDS], fields[BOX_FIELDS:]
        label = float(fields[0])
        if not label.is_integer() or not 0 <= label < self.classes:
            return (
                f"class {fields[0]} is not one of the {self.classes} names (0..{self.classes - 1})"
            )
        values = np.array(fields[1:], np.float32)
        width, height = size
        if kind == "box" and (values[2] < 0 or values[3] < 0):
            return f"negative size (w {fields[3]}, h {fields[4]})"
        outside = next((f for f in fields[1:] if not 0 <= float(f) <= 1), None)
        if outside is not None:
            return f"{outside} is outside 0..1 (YOLO coordinates are fractions of the image size)"
        if kind == "box":
            if self.task == "instances":
                return "a box (5 fields) where instances need a polygon (cls x1 y1 x2 y2 ...)"
            box = _box_pixels(values, width, height)
            if points is None or self.task != "keypoints":
                return SourceObject(int(label), box)
            made = _points(points, self.point_values, width, height)
            return made if isinstance(made, str) else SourceObject(int(label), box, points=made)
        return _polygon_object(int(label), values, width, height, self.task == "instances")


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def _points(fields: list[str], values: int, width: int, height: int) -> tuple[float, ...] | str:
    """A pose line's points as (x, y, visibility) in source pixels, flat, or why they are not:
    a coordinate outside 0..1, a visibility other than 0, 1 or 2."""
    rows = np.array(fields, np.float64).reshape(-1, values)
    for k, row in enumerate(rows):
        if not (0 <= row[0] <= 1 and 0 <= row[1] <= 1):
            return (
                f"point {k} ({fields[k * values]}, {fields[k * values + 1]}) is outside 0..1 "
                "(YOLO coordinates are fractions of the image size)"
            )
        if values == 3 and row[2] not in (0, 1, 2):
            return f"point {k} has visibility {fields[k * values + 2]}, not 0, 1 or 2"
    xy = rows[:, :2].astype(np.float32) * np.array([width, height], np.float32)
    unlabelled = (rows[:, 0] == 0) & (rows[:, 1] == 0)
    seen = rows[:, 2] if values == 3 else np.where(unlabelled, 0.0, 2.0)
    return tuple(np.column_stack([xy.astype(np.float64), seen]).ravel().tolist())


def _box_pixels(xywhn: np.ndarray, width: int, height: int) -> tuple[float, float, float, float]:
    """Ultralytics' `xywhn2xyxy`, in its float32 arithmetic."""
    cx, cy, w, h = xywhn
    corners = (
        width * (cx - w / 2),
        height * (cy - h / 2),
        width * (cx + w / 2),
        height * (cy + h / 2),
    )
    return tuple(float(np.float32(v)) for v in corners)  # type: ignore[return-value]


def _polygon_object(
    label: int, values: np.ndarray, width: int, height: int, with_shape: bool
) -> SourceObject:
    """A polygon line: its pixels (Ultralytics' `denormalize`, float32), its hull as the box,
    and the polygon to fill when the task has masks."""
    points = values.reshape(-1, 2) * np.array([width, height], np.float32)
    low, high = points.min(axis=0), points.max(axis=0)
    box = (float(low[0]), float(low[1]), float(high[0]), float(high[1]))
    shape = ("fill", (tuple(points.ravel().tolist()),)) if with_shape else None
    return SourceObject(label, box, shape)
