"""The placement's integer arithmetic, derived independently in exact fractions over a grid of
sizes that includes ties and odd margins: fit keeps the aspect ratio and rounds halves up,
fill crops the largest centred window of the output's aspect ratio, none crops the centre,
offsets centre with the floor of an odd margin; and boxes move through it as pixels do,
clipped to the pasted area of a letterbox, not to the canvas."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from packer.imaging import Geometry, place
from packer.imaging.geometry import identity, nearest_indices, pad_to_canvas, resample_mask
from packer.packing.objects import object_record, place_boxes
from packer.sources import SourceObject

SIZES = [1, 2, 3, 4, 5, 7, 8, 10, 13, 16, 21]


def half_up(value: Fraction) -> int:
    return math.floor(value + Fraction(1, 2))


def fit_oracle(sw, sh, w, h):
    scale = min(Fraction(w, sw), Fraction(h, sh))
    if Fraction(w, sw) <= Fraction(h, sh):  # width binds (a tie: both do)
        scaled = (w, max(1, half_up(sh * scale)))
    else:
        scaled = (max(1, half_up(sw * scale)), h)
    return scaled, ((w - scaled[0]) // 2, (h - scaled[1]) // 2)


def fill_oracle(sw, sh, w, h):
    if Fraction(w, h) >= Fraction(sw, sh):  # output wider: keep the source's width
        cw, ch = sw, max(1, min(sh, half_up(Fraction(sw * h, w))))
    else:
        cw, ch = max(1, min(sw, half_up(Fraction(sh * w, h)))), sh
    x0, y0 = (sw - cw) // 2, (sh - ch) // 2
    return (x0, y0, x0 + cw, y0 + ch)


def grid():
    for sw in SIZES:
        for sh in SIZES:
            for w, h in [(7, 4), (5, 5), (4, 9), (21, 8), (3, 2), (1, 6)]:
                yield sw, sh, w, h


def test_fit_scales_to_the_binding_side_and_centres_with_floor_margins():
    odd_margins = 0
    for sw, sh, w, h in grid():
        p = place((sw, sh), Geometry((w, h), "fit"))
        scaled, offset = fit_oracle(sw, sh, w, h)
        assert (p.crop, p.scaled, p.offset, p.size) == ((0, 0, sw, sh), scaled, offset, (w, h)), (
            sw, sh, w, h)  # fmt: skip
        odd_margins += (w - scaled[0]) % 2 + (h - scaled[1]) % 2
    assert odd_margins > 20  # the grid does exercise the floor


def test_fill_crops_the_largest_centred_window_of_the_outputs_aspect():
    for sw, sh, w, h in grid():
        p = place((sw, sh), Geometry((w, h), "fill"))
        assert (p.crop, p.scaled, p.offset) == (fill_oracle(sw, sh, w, h), (w, h), (0, 0)), (
            sw, sh, w, h)  # fmt: skip


def test_none_crops_the_centre_and_pads_the_rest():
    for sw, sh, w, h in grid():
        p = place((sw, sh), Geometry((w, h), "none"))
        cw, ch = min(sw, w), min(sh, h)
        x0, y0 = (sw - cw) // 2, (sh - ch) // 2
        assert p.crop == (x0, y0, x0 + cw, y0 + ch)
        assert (p.scaled, p.offset) == ((cw, ch), ((w - cw) // 2, (h - ch) // 2))


def test_stretch_and_identity():
    p = place((13, 4), Geometry((5, 9), "stretch"))
    assert (p.crop, p.scaled, p.offset, p.size) == ((0, 0, 13, 4), (5, 9), (0, 0), (5, 9))
    q = identity((6, 3))
    assert (q.crop, q.scaled, q.offset, q.size) == ((0, 0, 6, 3), (6, 3), (0, 0), (6, 3))


@pytest.mark.parametrize("size", [(0, 4), (4, 0)])
def test_a_source_of_no_pixels_is_refused(size):
    with pytest.raises(ValueError, match="source size must be positive"):
        place(size, Geometry((4, 4), "fit"))


@pytest.mark.parametrize(
    "kwargs",
    [dict(size=(0, 4)), dict(size=(4,)), dict(size=(4, 4.0)), dict(size=(4, 4), mode="crop"),
     dict(size=(4, 4), interpolation="bilinear"), dict(size=(4, 4), pad_value=256),
     dict(size=(4, 4), pad_value=-1)],
)  # fmt: skip
def test_a_geometry_out_of_range_is_refused(kwargs):
    with pytest.raises(ValueError):
        Geometry(**kwargs)


def test_a_geometry_at_its_limits_is_accepted():
    assert Geometry((1, 1), pad_value=0).size == (1, 1)
    for size in ((np.int64(3), 2), [3, 2]):
        given = Geometry(size, pad_value=255).size
        assert given == (3, 2) and all(type(v) is int for v in given)


def test_a_geometry_fills_with_auto_interpolation_and_pads_with_0_by_default():
    g = Geometry((4, 3))
    assert (g.mode, g.interpolation, g.pad_value) == ("fill", "auto", 0)


def test_an_image_is_padded_on_every_channel():
    p = place((10, 20), Geometry((12, 6), "fit"))
    image = np.arange(6 * 3 * 3, dtype=np.uint8).reshape(6, 3, 3)
    canvas = pad_to_canvas(image, p, 9)
    assert canvas.shape == (6, 12, 3) and canvas.dtype == np.uint8
    np.testing.assert_array_equal(canvas[:, 4:7], image)
    assert (canvas[:, :4] == 9).all() and (canvas[:, 7:] == 9).all()


def test_a_box_is_clipped_to_the_pasted_area_of_a_wide_letterbox():
    """A tall 10x20 source fit into 40x20 lands at x 15..25: its boxes are clipped there, not
    to the canvas, and y is scaled by its own factor."""
    p = place((10, 20), Geometry((40, 20), "fit"))
    assert (p.scaled, p.offset) == ((10, 20), (15, 0))
    boxes = np.array([[-3.0, -3.0, 4.0, 25.0], [2.0, 4.0, 12.0, 8.0]])
    np.testing.assert_array_equal(place_boxes(boxes, p), [[15, 0, 19, 20], [17, 4, 25, 8]])
    # a wide source in a tall canvas: offset in y only, x and y scaled alike (x2)
    q = place((20, 10), Geometry((40, 41), "fit"))
    assert (q.scaled, q.offset) == ((40, 20), (0, 10))
    np.testing.assert_array_equal(place_boxes(np.array([[1.0, 2.0, 3.0, 12.0]]), q),
                                  [[2, 14, 6, 30]])  # fmt: skip


def test_a_box_moves_as_the_fill_crop_moves_pixels():
    """Source 30x10 filled into 6x4: a crop 15 wide from x (30 - 15) // 2 = 7, scaled by
    6/15 and 4/10."""
    p = place((30, 10), Geometry((6, 4), "fill"))
    assert p.crop == (7, 0, 22, 10)
    box = np.array([[7.0, 0.0, 22.0, 10.0], [12.0, 5.0, 17.0, 7.5], [0.0, 0.0, 9.0, 1.0]])
    np.testing.assert_allclose(
        place_boxes(box, p), [[0, 0, 6, 4], [2, 2, 4, 3], [0, 0, 0.8, 0.4]], rtol=1e-12
    )


def test_a_box_moves_as_a_tall_fill_crop_moves_pixels():
    """Source 10x30 filled into 4x6: a crop 15 high from y (30 - 15) // 2 = 7, scaled 0.4."""
    p = place((10, 30), Geometry((4, 6), "fill"))
    assert p.crop == (0, 7, 10, 22)
    box = np.array([[0.0, 7.0, 10.0, 22.0], [5.0, 12.0, 10.0, 17.0], [0.0, 0.0, 1.0, 9.0]])
    np.testing.assert_allclose(
        place_boxes(box, p), [[0, 0, 4, 6], [2, 2, 4, 4], [0, 0, 0.4, 0.8]], rtol=1e-12
    )


def test_dropped_objects_are_reported_by_their_index_among_the_samples_objects():
    """Objects wholly outside the pasted area have no box left: dropped, each named by its
    place in the source's list (not among the kept ones), the others kept in order."""
    p = place((10, 20), Geometry((40, 20), "fit"))
    objects = [
        SourceObject(0, (1.0, 1.0, 5.0, 5.0)),
        SourceObject(1, (-9.0, 1.0, -2.0, 5.0)),  # left of the source
        SourceObject(2, (2.0, 2.0, 8.0, 9.0), difficult=True),
        SourceObject(3, (12.0, 1.0, 19.0, 5.0)),  # right of it: in the canvas, not the paste
        SourceObject(4, (3.0, 3.0, 4.0, 6.0), crowd=True),
    ]
    record, dropped = object_record(objects, (10, 20), p, instances=False)
    assert [i for i, _ in dropped] == [1, 3]
    assert all(reason == "outside the frame" for _, reason in dropped)
    assert record["labels"].tolist() == [0, 2, 4]
    assert record["difficult"].tolist() == [0, 1, 0] and record["iscrowd"].tolist() == [0, 0, 1]
    np.testing.assert_array_equal(record["boxes"][1], [17, 2, 23, 9])


def test_nearest_indices_sample_the_pixel_under_each_centre():
    for start, stop, count in [(0, 10, 4), (3, 8, 5), (2, 5, 7), (0, 13, 13), (1, 2, 3)]:
        want = [start + math.floor((j + Fraction(1, 2)) * (stop - start) / count)
                for j in range(count)]  # fmt: skip
        assert nearest_indices(start, stop, count).tolist() == want


def test_resample_and_pad_put_a_mask_where_the_image_goes():
    values = np.arange(20 * 10).reshape(20, 10)  # 10 wide, 20 high
    p = place((10, 20), Geometry((12, 6), "fit"))  # scaled 3x6 at x offset 4 (odd margin 9)
    assert (p.scaled, p.offset) == ((3, 6), (4, 0))
    small = resample_mask(values, p)
    rows, cols = nearest_indices(0, 20, 6), nearest_indices(0, 10, 3)
    np.testing.assert_array_equal(small, values[np.ix_(rows, cols)])
    canvas = pad_to_canvas(small, p, -7)
    assert canvas.shape == (6, 12)
    np.testing.assert_array_equal(canvas[:, 4:7], small)
    assert (canvas[:, :4] == -7).all() and (canvas[:, 7:] == -7).all()
    crop = place((10, 20), Geometry((4, 6), "none"))
    view = resample_mask(values, crop)
    assert np.shares_memory(view, values)
    np.testing.assert_array_equal(view, values[7:13, 3:7])
    assert pad_to_canvas(view, crop, 0) is view
    with pytest.raises(ValueError, match="outside it"):
        resample_mask(values[:5], crop)
    with pytest.raises(ValueError, match="expected 4x6"):
        pad_to_canvas(values, crop, 0)
