"""The boxes field kind: per object x1, y1, x2, y2 float32 in the image's pixels."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import numpy as np

from .counting import shape_text
from .kind import FieldKind

if TYPE_CHECKING:
    from ..labels import ClassTable
    from ..schema import Field


class Boxes(FieldKind):
    """Per object x1, y1, x2, y2 float32 in the image's pixels."""

    name = "boxes"
    ragged = True
    geometry = "boxes"

    # --- packing: placing a source's value by the pack's geometry

    # --- storage: TFRecord and RecordIO

    # --- reading: batches, targets, the workers' hand-off

    # --- augmentation

    # --- statistics, info and preview
    draw_layer = 2

    def count_objects(self, value: np.ndarray) -> Counter:
        """Images by object count, objects by COCO's area ranges (small under 32^2 px, medium
        under 96^2, large), measured on the packed boxes."""
        area = (value[:, 2] - value[:, 0]) * (value[:, 3] - value[:, 1])
        return Counter(
            {
                f"images_with_{len(value)}": 1,
                "small": int((area < 32**2).sum()),
                "medium": int(((area >= 32**2) & (area < 96**2)).sum()),
                "large": int((area >= 96**2).sum()),
            }
        )

    def stats_entries(self, receipts: list[dict], table: ClassTable) -> dict:
        """Objects per image (image count by object count), COCO's area ranges, and the
        objects dropped by why (the receipts' `objects`)."""
        counts: Counter = Counter()
        for r in receipts:
            counts.update(r.get("objects", {}))
        per_image = {
            int(k.rpartition("_")[2]): v for k, v in counts.items() if k.startswith("images_with_")
        }
        return {
            "objects": {
                "images_by_count": {str(k): v for k, v in sorted(per_image.items())},
                "sizes": {k: counts.get(k, 0) for k in ("small", "medium", "large")},
                "dropped": {
                    k.removeprefix("dropped: "): v
                    for k, v in sorted(counts.items())
                    if k.startswith("dropped: ")
                },
            }
        }

    def info(self, field: Field) -> str:
        """Its name, shape and dtype (a built-in kind's field needs no more words)."""
        return shape_text(field)

    def draw(self, tile, value: np.ndarray) -> None:
        """Each box in its class colour, with the class's name above it."""
        draw = tile.draw()
        sx, sy = tile.scale
        for k, (x1, y1, x2, y2) in enumerate(value):
            color = tile.object_color(k)
            box = (x1 * sx, y1 * sy, max(x1 * sx, x2 * sx - 1), max(y1 * sy, y2 * sy - 1))
            draw.rectangle(box, outline=color, width=2)
            label = tile.object_class(k)
            if label is None:
                continue
            text = tile.names[label] if 0 <= label < len(tile.names) else str(label)
            left, top = box[0], max(0, box[1] - 11)
            draw.rectangle(draw.textbbox((left, top), text, font=tile.font), fill=color)
            draw.text(
                (left, top), text, fill="black" if sum(color) > 382 else "white", font=tile.font
            )
