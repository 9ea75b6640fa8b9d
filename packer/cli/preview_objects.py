"""`packer preview` of a detection or instances pack: each object's box in its class colour
with its class name, and each per-object mask's outline."""

from __future__ import annotations

import cv2
import numpy as np
from PIL import Image, ImageDraw


def draw_objects(
    image: np.ndarray,
    target: dict[str, np.ndarray],
    tile: tuple[int, int],
    colors: np.ndarray,
    names: list[str],
    font,
) -> Image.Image:
    """The image resized to `tile` (W, H) with its objects drawn over it."""
    height, width = image.shape[:2]
    sx, sy = tile[0] / width, tile[1] / height
    picture = np.ascontiguousarray(cv2.resize(image, tile, interpolation=cv2.INTER_LINEAR))
    for plane, label in zip(target.get("masks", ()), target["labels"], strict=False):
        big = cv2.resize(plane, tile, interpolation=cv2.INTER_NEAREST)
        contours, _ = cv2.findContours(big, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
        cv2.drawContours(picture, contours, -1, _color(colors, label), 1)
    out = Image.fromarray(picture)
    draw = ImageDraw.Draw(out)
    for (x1, y1, x2, y2), label in zip(target["boxes"], target["labels"], strict=True):
        color = _color(colors, label)
        box = (x1 * sx, y1 * sy, max(x1 * sx, x2 * sx - 1), max(y1 * sy, y2 * sy - 1))
        draw.rectangle(box, outline=color, width=2)
        text = names[int(label)] if 0 <= int(label) < len(names) else str(int(label))
        left, top = box[0], max(0, box[1] - 11)
        draw.rectangle(draw.textbbox((left, top), text, font=font), fill=color)
        draw.text((left, top), text, fill="black" if sum(color) > 382 else "white", font=font)
    return out


def _color(colors: np.ndarray, label) -> tuple[int, int, int]:
    return tuple(int(v) for v in colors[int(label) % len(colors)])
