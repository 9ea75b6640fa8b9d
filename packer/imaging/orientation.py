"""EXIF orientation: crop and resize happen in the stored orientation, and only the small
result is rotated or flipped, so these map sizes and boxes to stored coordinates and back.
"""

from __future__ import annotations

import numpy as np

from .geometry import Placement

# EXIF orientation -> (transpose, flip left-right, flip top-bottom), applied in that order.
ORIENTATIONS = {
    1: (False, False, False),
    2: (False, True, False),
    3: (False, True, True),
    4: (False, False, True),
    5: (True, False, False),
    6: (True, True, False),
    7: (True, True, True),
    8: (True, False, True),
}


def oriented_size(stored: tuple[int, int], orientation: int) -> tuple[int, int]:
    """(W, H) as displayed: orientations 5..8 swap the stored width and height."""
    return (stored[1], stored[0]) if ORIENTATIONS[orientation][0] else stored


def stored_region(
    placement: Placement, oriented: tuple[int, int], orientation: int
) -> tuple[tuple[int, int, int, int], tuple[int, int]]:
    """The placement's crop box and scaled size in stored (not yet oriented) coordinates;
    `oriented` is the source size as displayed."""
    transpose, flip_x, flip_y = ORIENTATIONS[orientation]
    x0, y0, x1, y1 = placement.crop
    if flip_x:
        x0, x1 = oriented[0] - x1, oriented[0] - x0
    if flip_y:
        y0, y1 = oriented[1] - y1, oriented[1] - y0
    if transpose:
        return (y0, x0, y1, x1), (placement.scaled[1], placement.scaled[0])
    return (x0, y0, x1, y1), placement.scaled


def orient(array: np.ndarray, orientation: int) -> np.ndarray:
    """Stored-orientation array as displayed (a view; callers make it contiguous)."""
    transpose, flip_x, flip_y = ORIENTATIONS[orientation]
    if transpose:
        array = array.swapaxes(0, 1)
    if flip_x:
        array = array[:, ::-1]
    if flip_y:
        array = array[::-1]
    return array
