"""COCO masks as recipes: one image's instance annotations, or its panoptic PNG with segments.

Instances are drawn with pycocotools exactly as `COCO.annToMask` draws each one (polygons
through `frPyObjects` + `merge`, uncompressed RLE through `frPyObjects`, compressed RLE as it
is), then combined as torchvision's segmentation reference does (`ConvertCocoPolysToMask`):
each pixel takes the class of the instance covering it; pixels covered by two or more
instances become the ignore index. `overlap="last"` lets the later annotation (in the
file's order) win instead; crowd regions become the ignore index, or with `crowd="class"`
count as instances of their category (torchvision's own behaviour). In full, with `masks`
the non-crowd instances' 0/1 planes and `cats` their classes 1..K:
`target = (masks * cats).max(0)`, `target[masks.sum(0) > 1] = ignore`,
`target[union of crowds] = ignore`. An annotation whose segmentation is an empty list draws
nothing, as torchvision's `convert_coco_poly_to_mask` makes it an empty plane.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import cv2
import numpy as np

from ..errors import LabelError
from ..imaging import decode_mask
from .recipes import MaskRecipe, Reader

# One instance: (annotation id, class id, crowd, segmentation), the segmentation as
# ("poly", (float64 coordinates as bytes, ...)) or ("rle", (height, width), counts), counts
# a list of run lengths (uncompressed) or COCO's compressed string.
Shape = tuple[int, int, bool, tuple]


def shape_of(annotation: dict, class_id: int, height: int, width: int) -> Shape:
    """An annotation as a compact Shape; LabelError naming what cannot be drawn."""
    aid, crowd, seg = annotation.get("id"), bool(annotation.get("iscrowd", 0)), None
    segmentation = annotation.get("segmentation")
    if isinstance(segmentation, list) and segmentation:
        polygons = []
        for polygon in segmentation:
            if not isinstance(polygon, list) or len(polygon) < 6 or len(polygon) % 2:
                points = len(polygon) // 2 if isinstance(polygon, list) else 0
                raise LabelError(f"annotation {aid}: a polygon of {points} points (3 or more)")
            polygons.append(np.asarray(polygon, np.float64).tobytes())
        seg = ("poly", tuple(polygons))
    elif isinstance(segmentation, dict) and "counts" in segmentation and "size" in segmentation:
        size = tuple(int(v) for v in segmentation["size"])
        if size != (height, width):
            raise LabelError(
                f"annotation {aid}: an RLE of {size[1]}x{size[0]} pixels, its image is "
                f"{width}x{height}"
            )
        counts = segmentation["counts"]
        seg = ("rle", size, counts if isinstance(counts, str) else tuple(int(c) for c in counts))
    if seg is None:
        raise LabelError(f"annotation {aid}: no polygon or RLE segmentation")
    return (int(aid) if aid is not None else -1, class_id, crowd, seg)


def instance_rles(shapes: tuple[Shape, ...], height: int, width: int) -> list[dict]:
    """Each instance as a pycocotools RLE, made as `COCO.annToRLE` makes it."""
    from pycocotools import mask as coco_mask  # loaded where masks are drawn: the workers

    rles = []
    for _, _, _, seg in shapes:
        if seg[0] == "poly":
            polygons = [np.frombuffer(p, np.float64).tolist() for p in seg[1]]
            rles.append(coco_mask.merge(coco_mask.frPyObjects(polygons, height, width)))
        elif isinstance(seg[2], str):
            rles.append({"size": list(seg[1]), "counts": seg[2].encode()})
        else:
            uncompressed = {"size": list(seg[1]), "counts": list(seg[2])}
            rles.append(coco_mask.frPyObjects(uncompressed, height, width))
    return rles


def decoded(rles: list[dict]) -> np.ndarray:
    """RLEs as (N, W, H) uint8 0/1 planes in C order: pycocotools decodes column by column,
    so its (H, W, N) Fortran-ordered result is that, each plane contiguous."""
    from pycocotools import mask as coco_mask

    with warnings.catch_warnings():  # pycocotools' decode under NumPy 2 warns of a copy
        warnings.simplefilter("ignore", DeprecationWarning)
        return coco_mask.decode(rles).transpose(2, 1, 0)


def class_planes(shapes: tuple[Shape, ...], rles: list[dict], crowd: str) -> tuple[list, list]:
    """torchvision's rule in run-length form: one RLE per class present (the union of its
    instances) and one of the pixels to ignore (covered twice or more, or a crowd), so that
    only those are decoded, not every instance."""
    from pycocotools import mask as coco_mask

    union = overlap = None
    by_class: dict[int, list] = {}
    ignored = []
    for (_, class_id, is_crowd, _), rle in zip(shapes, rles, strict=True):
        if is_crowd and crowd == "ignore":
            ignored.append(rle)
            continue
        if union is not None:
            twice = coco_mask.merge([union, rle], intersect=True)
            overlap = twice if overlap is None else coco_mask.merge([overlap, twice])
        union = rle if union is None else coco_mask.merge([union, rle])
        by_class.setdefault(class_id, []).append(rle)
    ignored += [overlap] if overlap is not None else []
    planes = [coco_mask.merge(v) for v in by_class.values()]
    return list(by_class), planes + ([coco_mask.merge(ignored)] if ignored else [])


@dataclass(frozen=True)
class CocoInstances(MaskRecipe):
    """An image's instance annotations, drawn into class ids (0: background)."""

    source: str
    image_id: int
    height: int
    width: int
    shapes: tuple[Shape, ...]
    digest: str
    overlap: str = "ignore"
    crowd: str = "ignore"
    files: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.source}#{self.image_id}"

    def pixels(self, read: Reader, size: tuple[int, int], ignore_index: int) -> np.ndarray:
        if size != (self.width, self.height):
            raise LabelError(
                f"its images entry says {self.width}x{self.height} pixels, the image file is "
                f"{size[0]}x{size[1]}"
            )
        dtype = np.uint8 if ignore_index <= 255 else np.uint16
        if not self.shapes:
            return np.zeros((self.height, self.width), dtype)
        rles = instance_rles(self.shapes, self.height, self.width)
        if self.overlap == "last":
            target = self._last_wins(rles, dtype, ignore_index)
        else:
            classes, planes = class_planes(self.shapes, rles, self.crowd)
            masks = decoded(planes)  # (classes [+ ignored], W, H)
            values = np.array(classes, dtype)[:, None, None]
            target = (masks[: len(classes)] * values).max(axis=0, initial=0)
            if len(planes) > len(classes):
                target[masks[-1].astype(bool)] = ignore_index
        return cv2.transpose(target)  # (W, H) -> (H, W), C order

    def _last_wins(self, rles: list[dict], dtype: type, ignore_index: int) -> np.ndarray:
        """Each pixel takes the class of the last instance (in file order) covering it."""
        masks = decoded(rles)
        classes = np.array([s[1] for s in self.shapes], dtype)
        crowds = np.array([s[2] for s in self.shapes]) & (self.crowd == "ignore")
        drawn = masks[~crowds]
        order = np.arange(1, len(drawn) + 1, dtype=np.uint16)[:, None, None]
        last = (drawn * order).max(axis=0, initial=0)
        target = np.concatenate([[0], classes[~crowds]]).astype(dtype)[last]
        if crowds.any():
            target[masks[crowds].any(axis=0)] = ignore_index
        return target


@dataclass(frozen=True)
class CocoPanoptic(MaskRecipe):
    """An image's panoptic PNG (segment id = R + 256 G + 256^2 B) and its segments' classes:
    ((segment id, class id or -1 for the ignore index), ...), sorted by segment id."""

    source: str
    image_id: int
    segments: tuple[tuple[int, int], ...]
    digest: str
    files: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.source}#{self.image_id}"

    def pixels(self, read: Reader, size: tuple[int, int], ignore_index: int) -> np.ndarray:
        mask = decode_mask(read(self.files[0]))
        if mask.kind != "color":
            raise LabelError(f"{self.files[0]}: a panoptic PNG holds RGB segment ids")
        rgb = mask.values.astype(np.int64)
        ids = rgb[..., 0] + 256 * rgb[..., 1] + 65536 * rgb[..., 2]
        dtype = np.uint8 if ignore_index <= 255 else np.uint16
        if not self.segments:
            return np.full(ids.shape, ignore_index, dtype)
        known = np.array([s for s, _ in self.segments], np.int64)
        classes = np.array([c if c >= 0 else ignore_index for _, c in self.segments], dtype)
        at = np.searchsorted(known, ids).clip(0, len(known) - 1)
        return np.where(known[at] == ids, classes[at], dtype(ignore_index))  # 0 = VOID too
