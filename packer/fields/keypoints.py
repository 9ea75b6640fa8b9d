"""The keypoints field kind: per object K points (x, y, visibility) float32 in the image's pixels.

Coordinates are continuous pixel coordinates, as the packed boxes' (pixel i spans [i, i + 1]);
visibility is COCO's: 0 not labelled, 1 labelled but hidden, 2 labelled and visible. A point
that is not labelled, in the source or once the pack's crop leaves it outside the image, is
stored as COCO stores one, (0, 0, 0). The field may carry a flip order (`Field.flip_order`):
the augmentation's mirrors reorder each row's points by it, so left and right keep their
names. `Skeleton` is what the manifest's `keypoints` entry says of the points.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .counting import shape_text
from .kind import FieldKind

if TYPE_CHECKING:
    from ..imaging import Placement
    from ..labels import ClassTable
    from ..schema import Field
    from .placing import Frame

VISIBILITIES = (0, 1, 2)


@dataclass(frozen=True)
class Skeleton:
    """The K points of a keypoints field: their names, the skeleton's edges (pairs of point
    indices from 0; COCO's JSON counts from 1) and the flip order (empty: none)."""

    names: tuple[str, ...]
    edges: tuple[tuple[int, int], ...] = ()
    flip_order: tuple[int, ...] = ()

    def to_json(self) -> dict:
        """The manifest's `keypoints` entry."""
        return {
            "names": list(self.names),
            "skeleton": [list(e) for e in self.edges],
            **({"flip_idx": list(self.flip_order)} if self.flip_order else {}),
        }


def flip_order_of(names: tuple[str, ...]) -> tuple[int, ...]:
    """The flip order COCO's names imply: `left_<part>` and `right_<part>` swap, every other
    point stays; empty when no name has a partner."""
    index = {name: i for i, name in enumerate(names)}
    swap = {"left_": "right_", "right_": "left_"}
    order = []
    for name in names:
        side = next((s for s in swap if name.startswith(s)), None)
        partner = side and index.get(swap[side] + name[len(side) :])
        order.append(index[name] if partner is None else partner)
    return tuple(order) if order != list(range(len(names))) else ()


def check_flip_order(order, count: int, where: str) -> tuple[int, ...]:
    """`order` (YOLO's flip_idx) as a tuple when it is an order of `count` points; a
    ValueError saying what it is otherwise."""
    if not isinstance(order, (list, tuple)) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in order
    ):
        raise ValueError(f"{where}: flip_idx {order!r} is not a list of point indices")
    if sorted(order) != list(range(count)):
        raise ValueError(
            f"{where}: flip_idx {list(order)} is not a permutation of the {count} points "
            f"(0..{count - 1}, each once)"
        )
    return tuple(order)


class Keypoints(FieldKind):
    """Per object K points (x, y, visibility), float32, in the image's pixels."""

    name = "keypoints"
    ragged = True
    geometry = "points"

    # --- packing: placing a source's value by the pack's geometry

    def place(self, value, field: Field, frame: Frame) -> np.ndarray:
        """Points `[N, K, 3]` moved as the image's pixels; those outside the pasted image or
        not labelled become (0, 0, 0); visibility must be 0, 1 or 2."""
        from .placing import fitted

        array = np.asarray(value, np.float64)
        if array.ndim != 3 or array.shape[1:] != tuple(field.shape):
            raise ValueError(f"rows of shape {array.shape[1:]}, the field's are {field.shape}")
        if frame.placement is None:
            raise ValueError("keypoints need a field of kind image whose pixels they are in")
        bad = ~np.isin(array[..., 2], VISIBILITIES)
        if bad.any():
            raise ValueError(f"visibility {array[..., 2][bad][0]:g} is not 0, 1 or 2")
        return fitted(place_points(array, frame.placement).astype(field.dtype), field.dtype)

    # --- storage: TFRecord and RecordIO
    # TFRecord: `packer/<name>`, each object's K x 3 float32 as one bytes value (exact; the
    # Object Detection API's `image/object/keypoint/x|y` are normalised floats, which would not
    # give the packed pixels back bit for bit). RecordIO: the fields' trailer.

    # --- reading: batches, targets, the workers' hand-off

    # --- augmentation

    # --- statistics, info and preview
    # Counts per point index: labelled (visibility 1 or 2) and visible (2), as `keypoints`
    # in the manifest's stats; `packer info` gives them by the points' names.
    draw_layer = 3

    def count_objects(self, value: np.ndarray) -> Counter:
        """Per point index, how many objects have it labelled and visible."""
        seen = value[..., 2]
        points = value.shape[1] if value.ndim == 3 else 0
        counts: Counter = Counter({f"keypoint_rows_{points}": len(value)})
        for k in range(points):
            counts[f"keypoint_labelled_{k}"] = int((seen[:, k] > 0).sum())
            counts[f"keypoint_visible_{k}"] = int((seen[:, k] == 2).sum())
        return counts

    def stats_entries(self, receipts: list[dict], table: ClassTable) -> dict:
        """`keypoints`: per point index, objects with it labelled and with it visible."""
        counts: Counter = Counter()
        for r in receipts:
            counts.update(r.get("objects", {}))
        sizes = [int(k.rpartition("_")[2]) for k, v in counts.items() if "_rows_" in k and v]
        points = max(sizes, default=0)
        return {
            "keypoints": {
                what: [counts.get(f"keypoint_{what}_{k}", 0) for k in range(points)]
                for what in ("labelled", "visible")
            }
        }

    def info(self, field: Field) -> str:
        """Its name, shape and dtype, and whether mirrors reorder its points."""
        return shape_text(field) + (" (flip order)" if field.flip_order else "")

    def draw(self, tile, value: np.ndarray) -> None:
        """Each object's skeleton (the tile's `skeleton` edges) and its labelled points, in
        the object's class colour; hidden points hollow."""
        draw = tile.draw()
        sx, sy = tile.scale
        edges = tile.skeleton
        for k, points in enumerate(np.asarray(value, np.float64)):
            color = tile.object_color(k)
            xy = points[:, :2] * (sx, sy)
            for a, b in edges:
                if max(a, b) < len(points) and points[a, 2] > 0 and points[b, 2] > 0:
                    draw.line((*xy[a], *xy[b]), fill=color, width=2)
            for (x, y), seen in zip(xy, points[:, 2], strict=True):
                if seen > 0:
                    box = (x - 2, y - 2, x + 2, y + 2)
                    draw.ellipse(box, outline=color, fill=color if seen == 2 else None)


def place_points(points: np.ndarray, placement: Placement) -> np.ndarray:
    """Points `[N, K, 3]` (x, y continuous source pixels, visibility) in output pixels, float64:
    moved as the pixels are; a point outside the pasted image, or not labelled, is (0, 0, 0)."""
    cx0, cy0, cx1, cy1 = placement.crop
    w, h = placement.scaled
    ox, oy = placement.offset
    out = np.array(points, np.float64, copy=True).reshape(-1, *np.shape(points)[1:])
    x = (out[..., 0] - cx0) * (w / (cx1 - cx0)) + ox
    y = (out[..., 1] - cy0) * (h / (cy1 - cy0)) + oy
    inside = (x >= ox) & (x <= ox + w) & (y >= oy) & (y <= oy + h) & (out[..., 2] > 0)
    out[..., 0], out[..., 1] = np.where(inside, x, 0.0), np.where(inside, y, 0.0)
    out[..., 2] = np.where(inside, out[..., 2], 0.0)
    return out
