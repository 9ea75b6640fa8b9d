"""A sample's objects as a recipe: the boxes, classes and shapes of detection and instances.

Detection (`--task detection`) and instance segmentation (`--task instances`) samples carry an
`ObjectsRecipe` where a segmentation sample carries its mask: in `Sample.mask`, so provenance,
fingerprints and freshness checks treat it as any mask recipe. In a worker the recipe turns
into `SourceObject`s at the source image's own size; the converter then applies the pack's
geometry to boxes and shapes exactly as to pixels.
"""

from __future__ import annotations

from dataclasses import dataclass

from .recipes import MaskRecipe, Reader

# A shape to rasterise at the source size, for instance masks:
#   ("polygons", ((x0, y0, x1, y1, ...), ...))  COCO polygons in source pixels (pycocotools)
#   ("rle", {"size": [h, w], "counts": ...})     COCO RLE, compressed or not (pycocotools)
#   ("fill", ((x0, y0, x1, y1, ...), ...))       polygons filled as Ultralytics' polygon2mask
#   None                                         a box only (no mask can be drawn)
Shape = tuple[str, object] | None

TASKS = ("detection", "instances", "keypoints")  # the tasks whose samples carry objects


@dataclass(frozen=True, slots=True)
class SourceObject:
    """One object at the source image's size, before the pack's geometry.

    `box` is x1, y1, x2, y2 in continuous pixel coordinates (a one-pixel object in column 0
    spans x 0..1), `label` a class index 0..K-1 of the scan's classes (no background);
    `points` (keypoints) its K points flat, x, y (continuous pixels), visibility 0/1/2."""

    label: int
    box: tuple[float, float, float, float]
    shape: Shape = None
    crowd: bool = False
    difficult: bool = False
    points: tuple[float, ...] | None = None


class ObjectsRecipe(MaskRecipe):
    """Base of the object recipes (COCO, YOLO, VOC): frozen dataclasses of plain data, like
    every mask recipe, that read their annotations (or carry them) and list the objects."""

    def objects(self, read: Reader, size: tuple[int, int]) -> tuple[list[SourceObject], list[str]]:
        """The image's objects for an image of `size` (W, H), and one line per object left
        out (file, line or annotation id, reason), which the pack records as a rejection of
        that object while the image and its other objects are kept."""
        raise NotImplementedError

    def pixels(self, read: Reader, size: tuple[int, int], ignore_index: int):
        raise TypeError("an objects recipe has no class-id mask; read its objects()")
