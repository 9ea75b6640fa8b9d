"""COCO annotations as objects (`--task detection|instances`): boxes, classes and shapes.

As torchvision's detection reference (`ConvertCocoPolysToMask`) reads them: `bbox` [x, y, w, h]
becomes x1, y1, x2, y2 = x, y, x + w, y + h; categories sorted by id become labels 0..K-1
(no background); crowd annotations are left out unless `--crowd class` keeps them, flagged
`iscrowd`; boxes of no width or height are removed. Each removal is a problem line (file,
annotation id, reason) the pack records while the image and its other objects are kept.

Keypoints (`--task keypoints`, person_keypoints JSONs): each annotation's `keypoints`
[x, y, v] x K, K and the points' names and skeleton from the category that names them. COCO's
keypoint coordinates are pixel indices (integers in 0..W-1, where its polygons and boxes are
continuous, 0..W), as Detectron2 reads them (`load_coco_json` adds 0.5): a labelled point
becomes x + 0.5, y + 0.5 in the continuous coordinates the pack's boxes and points share; a
visibility other than 0, 1 or 2, or a list of another length, leaves its annotation out.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import LabelError, SourceError
from ..fields.keypoints import Skeleton, flip_order_of
from .coco_files import JsonFile, annotations_by_image, class_table, image_files
from .model import AnnotationOptions, Found, Tree
from .objects import ObjectsRecipe, SourceObject
from .recipes import Reader, digest_of

# One annotation: (annotation id, class index, crowd, (x1, y1, x2, y2), shape or None), and
# under the keypoints task its keypoints (flat x, y, v in continuous pixels) after them.
Annotation = tuple


def _box(annotation: dict) -> tuple[float, float, float, float] | str:
    """COCO's [x, y, w, h] as corners, or why it cannot be one."""
    bbox = annotation.get("bbox")
    try:
        x, y, w, h = (float(v) for v in bbox)  # type: ignore[union-attr]
    except (TypeError, ValueError):
        return f"bbox {bbox!r} is not four numbers"
    if w <= 0 or h <= 0:
        return f"a box of {'negative' if min(w, h) < 0 else 'zero'} size ({w:g}x{h:g})"
    return (x, y, x + w, y + h)


def _shape(annotation: dict) -> tuple | str | None:
    """The annotation's segmentation as an objects Shape, None for none, or why it is bad."""
    segmentation = annotation.get("segmentation")
    if isinstance(segmentation, list) and segmentation:
        polygons = []
        for polygon in segmentation:
            if not isinstance(polygon, list) or len(polygon) < 6 or len(polygon) % 2:
                points = len(polygon) // 2 if isinstance(polygon, list) else 0
                return f"a polygon of {points} points (3 or more)"
            try:
                polygons.append(tuple(float(v) for v in polygon))
            except (TypeError, ValueError):
                return "a polygon with a value that is not a number"
        return ("polygons", tuple(polygons))
    if isinstance(segmentation, dict) and "counts" in segmentation and "size" in segmentation:
        counts = segmentation["counts"]
        size = [int(v) for v in segmentation["size"]]
        return (
            "rle",
            {"size": size, "counts": counts if isinstance(counts, str) else list(counts)},
        )
    return None


def _points(annotation: dict, count: int) -> tuple[float, ...] | str:
    """An annotation's `keypoints` as x, y (pixel index + 0.5), v flat, or why it cannot be
    (none at all: every point not labelled)."""
    given = annotation.get("keypoints")
    if given is None:
        return (0.0,) * count * 3
    try:
        rows = [float(v) for v in given]
    except (TypeError, ValueError):
        return "keypoints hold a value that is not a number"
    if len(rows) != count * 3:
        return f"{len(rows)} keypoint values; the category's {count} points need {count * 3}"
    flat = []
    for k in range(count):
        x, y, v = rows[3 * k : 3 * k + 3]
        if v not in (0, 1, 2):
            return f"keypoint {k} has visibility {v:g}, not 0, 1 or 2"
        flat += [x + 0.5, y + 0.5, v] if v else [0.0, 0.0, 0.0]
    return tuple(flat)


def annotations_of(
    mine: list[dict],
    classes: dict[int, int],
    crowd: str,
    file: JsonFile,
    instances: bool,
    points: int = 0,
) -> tuple[tuple[Annotation, ...], tuple[str, ...]]:
    """One image's annotations as kept objects, and a problem line per annotation left out;
    with `points` (K), each object's keypoints."""
    kept, problems = [], []
    for a in mine:
        aid = a.get("id")
        where = f"{file.shown}#annotation {aid}"
        category = a.get("category_id")
        is_crowd = bool(a.get("iscrowd", 0))
        if category not in classes:
            problems.append(f"{where}: category {category} is not in categories")
            continue
        if is_crowd and crowd == "ignore":
            continue  # torchvision's detection reference leaves crowds out; not a problem
        box = _box(a)
        shape = _shape(a) if instances else None
        kept_points = _points(a, points) if points else None
        reason = next((r for r in (box, shape, kept_points) if isinstance(r, str)), None)
        if reason is None and instances and shape is None:
            reason = "no segmentation to draw its mask (boxes only: --task detection packs it)"
        if reason is not None:
            problems.append(f"{where}: {reason}")
            continue
        number = int(aid) if aid is not None else -1
        points_part = () if kept_points is None else (kept_points,)
        kept.append((number, classes[category], is_crowd, box, shape, *points_part))
    return tuple(kept), tuple(problems)


@dataclass(frozen=True)
class CocoObjects(ObjectsRecipe):
    """An image's COCO annotations as objects at the size its `images` entry gives."""

    source: str
    image_id: int
    height: int
    width: int
    annotations: tuple[Annotation, ...]
    problems: tuple[str, ...]
    digest: str
    files: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.source}#{self.image_id}"

    def objects(self, read: Reader, size: tuple[int, int]) -> tuple[list[SourceObject], list[str]]:
        if size != (self.width, self.height):
            raise LabelError(
                f"its images entry says {self.width}x{self.height} pixels, the image file is "
                f"{size[0]}x{size[1]}"
            )
        found = [
            SourceObject(a[1], a[3], a[4], a[2], points=a[5] if len(a) > 5 else None)
            for a in self.annotations
        ]
        return found, list(self.problems)


def scan_objects(
    root: Path, loaded: list[tuple[JsonFile, dict, str]], tree: Tree, options: AnnotationOptions
) -> Found:
    """Every image of every JSON (with the folder its `file_name`s are relative to, under SRC)
    as a sample whose mask slot holds its objects."""
    found = Found("coco", options.task, "COCO instances JSON", split_origin="COCO annotation files")
    found.table, classes = class_table([(f, d["categories"]) for f, d, _ in loaded], False)
    found.class_names = list(found.table.names)
    counts, boxes_only, problems_seen = [], 0, []
    instances = options.task == "instances"
    if options.task == "keypoints":
        found.keypoints = skeleton([d["categories"] for _, d, _ in loaded])
    points = len(found.keypoints.names) if found.keypoints else 0
    keys = ("id", "category_id", "iscrowd", "bbox", "segmentation", "keypoints")[: 5 + bool(points)]
    for file, data, folder in loaded:
        images = image_files(root, data, file, tree, folder, found.rejected)
        per_image = annotations_by_image(data, file, found.rejected)
        for image_id, (rel, height, width) in images.items():
            mine = per_image.get(image_id, [])
            kept, problems = annotations_of(mine, classes, options.crowd, file, instances, points)
            boxes_only += sum("no segmentation to draw" in p for p in problems)
            problems_seen += problems
            digest = digest_of(
                [options.task, options.crowd, height, width]
                + [[a.get(k) for k in keys] for a in mine]
            )  # fmt: skip
            recipe = CocoObjects(file.shown, image_id, height, width, kept, problems, digest)
            found.items.append((rel, file.split, recipe, None))
        listed = len(data.get("annotations", []))
        counts.append(f"{file.shown}, {len(images):,} images, {listed:,} annotations")
    found.why = f"COCO instances as {options.task}: " + "; ".join(counts)
    if problems_seen:
        shown = "; ".join(problems_seen[:3]) + ("; ..." if len(problems_seen) > 3 else "")
        found.notes.append(
            f"{len(problems_seen):,} annotations will be left out of their images (listed in the "
            f"manifest's dropped_objects): {shown}"
        )
    if boxes_only:
        found.notes.append(
            f"{boxes_only:,} annotations have boxes but no segmentation: --task instances "
            "cannot draw their masks and leaves them out; --task detection packs their boxes"
        )
    return found


def has_keypoints(categories: list) -> bool:
    """Whether a JSON's categories name keypoints (COCO's person_keypoints files do)."""
    return any(isinstance(c, dict) and c.get("keypoints") for c in categories or [])


def skeleton(per_file: list[list]) -> Skeleton:
    """The points of the first category (by id) naming keypoints: names, skeleton (0-based)
    and the flip order the names' `left_`/`right_` pairs imply; every category naming keypoints
    must name the same ones."""
    named = sorted(
        (c for categories in per_file for c in categories or [] if has_keypoints([c])),
        key=lambda c: c.get("id", 0),
    )
    if not named:
        raise SourceError("--task keypoints: no category of the COCO JSONs names keypoints")
    names = tuple(str(n) for n in named[0]["keypoints"])
    other = next((c for c in named if tuple(map(str, c["keypoints"])) != names), None)
    if other is not None:
        raise SourceError(
            f"categories {named[0].get('name')!r} and {other.get('name')!r} name different "
            "keypoints; a pack holds one set of points"
        )
    edges = []
    for edge in named[0].get("skeleton") or []:
        a, b = (int(v) - 1 for v in edge)
        if not (0 <= a < len(names) and 0 <= b < len(names)):
            raise SourceError(f"skeleton edge {edge} names a point beyond the {len(names)} points")
        edges.append((a, b))
    return Skeleton(names, tuple(edges), flip_order_of(names))


def boxes_only_note(loaded: list[tuple[JsonFile, dict]]) -> list[str]:
    """A note when semantic masks are asked of annotations that are boxes only (they draw
    nothing), offering the task that packs them."""
    total = boxes = 0
    for _, data in loaded:
        for a in data.get("annotations", []):
            total += 1
            boxes += isinstance(a, dict) and a.get("segmentation") in ([], None) and "bbox" in a
    if not boxes:
        return []
    share = "all" if boxes == total else f"{boxes:,} of {total:,}"
    return [
        f"{share} annotations are boxes only (no segmentation): they draw nothing in "
        "semantic masks; --task detection packs their boxes"
    ]
