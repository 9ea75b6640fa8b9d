"""The tile each sample of `packer preview` is drawn on: its image's pixels, which each field's
kind draws over (`FieldKind.draw`), at the pack's size (a mask's colours) or at the tile's
(boxes, outlines, points), with the class colours and names the kinds draw in."""

from __future__ import annotations

import cv2
import numpy as np
from PIL import Image, ImageDraw

NO_CLASS = (255, 255, 0)  # points and boxes of samples without class ids: yellow


class Tile:
    """One sample's picture: `pixels` (8-bit RGB at the pack's size) until a kind draws at the
    tile's `size` (W, H), then the OpenCV-resized pixels; a kind adds to `caption` and to the
    classes `shown` in the legend; `skeleton` is the edges keypoints are joined by. A tile
    nothing draws at its size is resized by PIL."""

    def __init__(
        self,
        pixels: np.ndarray,
        size: tuple[int, int],
        colors: np.ndarray,
        names: list[str],
        font,
        caption: str,
        skeleton: tuple[tuple[int, int], ...] = (),
    ) -> None:
        self.pixels = pixels
        self.size = size
        self.colors = colors
        self.names = names
        self.font = font
        self.caption = caption
        self.skeleton = skeleton  # the pack's keypoint edges (the manifest's `keypoints`)
        self.shown: set[int] = set()
        self.object_classes: np.ndarray | None = None  # per object, from a ragged class id field
        self.sample_class: int | None = None  # from a fixed class id field
        self._tile: np.ndarray | Image.Image | None = None
        self._draw: ImageDraw.ImageDraw | None = None

    @property
    def scale(self) -> tuple[float, float]:
        """Tile pixels per pack pixel, (x, y)."""
        height, width = self.pixels.shape[:2]
        return self.size[0] / width, self.size[1] / height

    def array(self) -> np.ndarray:
        """The tile as an array OpenCV draws on in place."""
        if self._tile is None:
            resized = cv2.resize(self.pixels, self.size, interpolation=cv2.INTER_LINEAR)
            self._tile = np.ascontiguousarray(resized)
        elif isinstance(self._tile, Image.Image):
            self._tile, self._draw = np.array(self._tile), None
        return self._tile

    def draw(self) -> ImageDraw.ImageDraw:
        """A PIL drawing over the tile."""
        if self._draw is None:
            self._tile = Image.fromarray(self.array())
            self._draw = ImageDraw.Draw(self._tile)
        return self._draw

    def picture(self) -> Image.Image:
        """The finished tile."""
        if self._tile is None:
            return Image.fromarray(self.pixels).resize(self.size, Image.Resampling.BILINEAR)
        return self._tile if isinstance(self._tile, Image.Image) else Image.fromarray(self._tile)

    def color(self, class_id: int) -> tuple[int, int, int]:
        """The display colour of a class id (yellow for a pack without classes)."""
        if not len(self.colors):
            return NO_CLASS
        return tuple(int(v) for v in self.colors[int(class_id) % len(self.colors)])

    def object_class(self, k: int) -> int | None:
        """The class id of the sample's object `k`, None when the pack has no object classes."""
        known = self.object_classes
        return int(known[k]) if known is not None and k < len(known) else None

    def object_color(self, k: int) -> tuple[int, int, int]:
        """The colour of object `k`'s class (the sample's, without object classes)."""
        label = self.object_class(k)
        return self.sample_color() if label is None else self.color(label)

    def sample_color(self) -> tuple[int, int, int]:
        """The colour of the sample's class (yellow without one)."""
        return NO_CLASS if self.sample_class is None else self.color(self.sample_class)
