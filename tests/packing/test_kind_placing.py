"""The packing hook of field kinds (`FieldKind.place`): a value of any kind placed by the pack's
geometry through its kind's `geometry`, as today's images, masks and boxes are placed."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from packer import fields
from packer.fields.placing import Frame
from packer.imaging import Geometry, place, resample_mask
from packer.packing.objects import place_boxes
from packer.schema import Field

SOURCE = (12, 8)  # W, H


def frame_for(size, mode, ignore=255):
    geometry = Geometry(size, mode, pad_value=7)
    return Frame(SOURCE, place(SOURCE, geometry), geometry, ignore)


@pytest.mark.parametrize("size, mode", [((6, 4), "stretch"), ((10, 10), "fit"), ((5, 5), "fill")])
def test_labels_by_nearest_neighbour_padded_with_ignore(size, mode):
    ids = np.arange(96, dtype=np.uint16).reshape(8, 12)
    frame = frame_for(size, mode, ignore=999)
    field = Field("parts", (size[1], size[0]), "<u2", kind="mask")
    placed = fields.get("mask").place(ids, field, frame)
    expected = np.full((size[1], size[0]), 999, np.uint16)
    (x, y), (w, h) = frame.placement.offset, frame.placement.scaled
    expected[y : y + h, x : x + w] = resample_mask(ids, frame.placement)
    np.testing.assert_array_equal(placed, expected)


@pytest.mark.parametrize("size, mode", [((6, 4), "stretch"), ((10, 10), "fit"), ((5, 5), "fill")])
def test_boxes_as_packed_boxes_and_points_as_their_corners(size, mode):
    boxes = np.array([[1.5, 2.0, 9.0, 7.25], [0, 0, 12, 8]], np.float32)
    frame = frame_for(size, mode)
    field = Field("boxes", (4,), "<f4", ragged=True, kind="boxes")
    expected = place_boxes(boxes, frame.placement).astype(np.float32)
    np.testing.assert_array_equal(fields.get("boxes").place(boxes, field, frame), expected)

    class Corners(fields.FieldKind):
        name = "test_corners"
        geometry = "points"
        ragged = True

    rows = np.concatenate([boxes[:, :2], boxes[:, 2:]])
    moved = Corners().place(rows, Field("c", (2,), "<f4", True, kind="test_corners"), frame)
    (x0, y0, x1, y1), (w, h) = frame.placement.crop, frame.placement.scaled
    scale = np.array([w / (x1 - x0), h / (y1 - y0)])
    unclipped = (rows - np.array([x0, y0])) * scale + np.array(frame.placement.offset)
    np.testing.assert_array_equal(moved, unclipped.astype(np.float32))  # points are not clipped
    inside = np.concatenate([expected[:, :2], expected[:, 2:]])
    if mode != "fill":  # nothing was cropped: the corners are the boxes' exactly
        np.testing.assert_array_equal(moved, inside)


def test_pixels_resized_as_opencv_and_padded_with_the_pad_value():
    plane = np.random.default_rng(0).random((8, 12), np.float32)
    frame = frame_for((6, 6), "fit")
    field = Field("heat", (6, 6), "<f4", kind="pixels")

    class Heat(fields.FieldKind):
        name = "test_heat_placing"
        geometry = "pixels"

    placed = Heat().place(plane, field, frame)
    expected = np.full((6, 6), 7, np.float32)
    expected[1:5] = cv2.resize(plane, (6, 4), interpolation=cv2.INTER_LINEAR)
    np.testing.assert_array_equal(placed, expected)


def test_a_16_bit_picture_from_bytes_kept_exact():
    depth = np.random.default_rng(1).integers(0, 65536, (8, 12), np.uint16)
    data = cv2.imencode(".png", depth)[1].tobytes()
    geometry = Geometry(SOURCE)
    frame = Frame(SOURCE, place(SOURCE, geometry), geometry)
    field = Field("depth", (8, 12, 1), "<u2", kind="image")
    np.testing.assert_array_equal(fields.get("image").place(data, field, frame)[..., 0], depth)


def test_a_value_of_another_size_than_the_image_is_refused():
    with pytest.raises(ValueError, match="6x8 pixels, the image is 12x8"):
        fields.get("mask").place(
            np.zeros((8, 6), np.uint8), Field("m", (8, 12), "|u1"), frame_for(SOURCE, "fill")
        )


@pytest.mark.parametrize(
    "value, dtype, why",
    [
        (300, "|u1", "values 300..300 do not fit uint8"),
        (-1, "<u2", "values -1..-1 do not fit uint16"),
        (1.5, "<i4", "not whole numbers"),
        (1e40, "<f4", "beyond the range of float32"),
        ("x", "<f4", "a <U1 value"),
    ],
)
def test_numbers_fit_their_dtype_or_are_refused_never_wrapped(value, dtype, why):
    with pytest.raises(ValueError, match=why):
        fields.get("array").place(
            value, Field("n", (), dtype, kind="array"), frame_for(SOURCE, "fill")
        )


def test_numbers_that_fit_are_kept():
    kind, frame = fields.get("array"), frame_for(SOURCE, "fill")
    assert kind.place(255, Field("n", (), "|u1", kind="array"), frame) == 255
    kept = kind.place([0.1, 2.0], Field("v", (2,), "<f4", kind="array"), frame)
    np.testing.assert_array_equal(kept, np.float32([0.1, 2.0]))
