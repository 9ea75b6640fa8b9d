"""Per-object masks through the pack's geometry, each checked against the plain route: the
object's plane at the source size (pycocotools' `annToMask` for polygons and RLE, OpenCV's
`fillPoly` for "fill" polygons, the box itself without a shape), then the image's own
nearest-neighbour crop and resize (`resample_mask`) and padding with 0 (`pad_to_canvas`).
Objects whose shape cannot be drawn are dropped and named by their index in the source list."""

from __future__ import annotations

import numpy as np
import pytest
from pycocotools import mask as coco_mask

from packer.errors import LabelError
from packer.imaging import Geometry, place
from packer.imaging.geometry import pad_to_canvas, resample_mask
from packer.packing.objects import object_record, rle_of
from packer.sources import SourceObject
from tests.fixtures.yolo import polygon2mask

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
SW, SH = 23, 17  # an odd, non-square source


def polygon(x: float, y: float, r: float) -> tuple[float, ...]:
    angles = np.linspace(0, 2 * np.pi, 7)[:-1]
    return tuple(np.ravel(np.column_stack([x + r * np.cos(angles), y + r * np.sin(angles)])))


def uncompressed(plane: np.ndarray) -> dict:
    """An uncompressed COCO RLE (counts a list, column-major) of a 0/1 plane."""
    flat = plane.T.ravel()
    changes = np.flatnonzero(np.diff(np.concatenate([[0], flat, [1 - flat[-1]]])))
    counts = np.diff(np.concatenate([[0], changes])).tolist()
    return {"size": [SH, SW], "counts": counts}


def objects() -> list[SourceObject]:
    block = np.zeros((SH, SW), np.uint8)
    block[3:9, 14:21] = 1
    compressed = coco_mask.encode(np.asfortranarray(block))
    return [
        SourceObject(0, (2.0, 2.0, 12.0, 12.0), ("polygons", (polygon(7, 7, 5),))),
        SourceObject(1, (14.0, 3.0, 21.0, 9.0), ("rle", uncompressed(block))),
        SourceObject(2, (14.0, 3.0, 21.0, 9.0),
                     ("rle", {"size": [SH, SW], "counts": compressed["counts"].decode()})),
        SourceObject(0, (1.5, 9.0, 10.2, 16.0), ("fill", ((1.5, 9.2, 10.9, 9.8, 6.3, 16.0),))),
        SourceObject(1, (16.4, 10.6, 22.0, 16.5)),  # no shape: its box
        SourceObject(0, (-2.6, -1.4, 3.5, 2.6)),  # no shape, over the top-left corner
        SourceObject(2, (0.0, 0.0, 23.0, 17.0),
                     ("polygons", (polygon(5, 12, 3), polygon(18, 5, 3)))),  # two parts
    ]  # fmt: skip


def plane_of(o: SourceObject) -> np.ndarray:
    """The object's plane at the source size, by the tools' own routes: Ultralytics'
    `polygon2mask` for "fill", the box's rounded pixels (clipped at 0) without a shape."""
    if o.shape is None:
        x1, y1, x2, y2 = (int(np.round(v)) for v in o.box)
        plane = np.zeros((SH, SW), np.uint8)
        plane[max(y1, 0) : y2, max(x1, 0) : x2] = 1
        return plane
    if o.shape[0] == "fill":
        return polygon2mask((SH, SW), [np.asarray(p, np.float64) for p in o.shape[1]])
    kind, data = o.shape
    if kind == "polygons":
        rle = coco_mask.merge(coco_mask.frPyObjects([list(p) for p in data], SH, SW))
    elif isinstance(data["counts"], str):
        rle = {"size": data["size"], "counts": data["counts"].encode()}
    else:
        rle = coco_mask.frPyObjects(data, SH, SW)
    return coco_mask.decode(rle)


@pytest.mark.parametrize(
    "geometry",
    [Geometry((40, 20), "fit"), Geometry((9, 13), "fit"), Geometry((12, 12), "fill"),
     Geometry((31, 11), "none"), Geometry((10, 30), "stretch"), Geometry((SW, SH), "fill")],
    ids=["fit-wide", "fit-odd", "fill", "none", "stretch", "same"],
)  # fmt: skip
def test_each_objects_mask_is_its_plane_moved_as_the_image(geometry):
    source = objects()
    p = place((SW, SH), geometry)
    record, dropped = object_record(source, (SW, SH), p, instances=True)
    kept = [i for i in range(len(source)) if i not in {d for d, _ in dropped}]
    assert record["masks"].shape == (len(kept), geometry.size[1], geometry.size[0])
    assert record["masks"].dtype == np.uint8
    for row, i in enumerate(kept):
        want = pad_to_canvas(resample_mask(plane_of(source[i]), p), p, 0)
        np.testing.assert_array_equal(record["masks"][row], want, err_msg=f"object {i}")
    assert record["labels"].tolist() == [source[i].label for i in kept]
    assert all(len(v) == len(kept) for v in record.values())


def test_only_pycocotools_shapes_take_the_common_path():
    source = [o for o in objects() if o.shape is not None and o.shape[0] in ("polygons", "rle")]
    p = place((SW, SH), Geometry((15, 15), "fit"))
    record, dropped = object_record(source, (SW, SH), p, instances=True)
    assert dropped == []
    for row, o in enumerate(source):
        want = pad_to_canvas(resample_mask(plane_of(o), p), p, 0)
        np.testing.assert_array_equal(record["masks"][row], want)


def test_an_object_whose_shape_cannot_be_drawn_is_dropped_by_its_source_index():
    source = objects()
    source.insert(1, SourceObject(0, (-9.0, 1.0, -2.0, 5.0)))  # 1: outside the source
    source.insert(
        3, SourceObject(1, (1.0, 1.0, 4.0, 4.0), ("rle", {"size": [5, 5], "counts": [25]}))
    )
    source.append(SourceObject(2, (1.0, 1.0, 4.0, 4.0), ("mesh", ())))  # 9: unknown kind
    source.append(SourceObject(1, (2.0, 18.0, 12.0, 25.0)))  # 10: below the source
    p = place((SW, SH), Geometry((20, 20), "fit"))
    record, dropped = object_record(source, (SW, SH), p, instances=True)
    assert dropped == [
        (1, "outside the frame"),
        (10, "outside the frame"),
        (3, f"an RLE of 5x5 pixels, its image is {SW}x{SH}"),
        (9, "an object shape of unknown kind 'mesh'"),
    ]
    kept = [0, 2, 4, 5, 6, 7, 8]
    assert record["labels"].tolist() == [source[i].label for i in kept]
    for row, i in enumerate(kept):
        want = pad_to_canvas(resample_mask(plane_of(source[i]), p), p, 0)
        np.testing.assert_array_equal(record["masks"][row], want)


def test_a_sample_without_objects_has_empty_fields():
    p = place((SW, SH), Geometry((8, 6), "fit"))
    record, dropped = object_record([], (SW, SH), p, instances=True)
    assert dropped == [] and record["masks"].shape == (0, 6, 8)
    assert record["boxes"].shape == (0, 4) and record["boxes"].dtype == np.float32
    record, _ = object_record([], (SW, SH), p, instances=False)
    assert "masks" not in record and record["labels"].dtype == np.int32


def test_rles_as_pycocotools_reads_them():
    block = np.zeros((SH, SW), np.uint8)
    block[2:5, 3:9] = 1
    rle = rle_of(("rle", uncompressed(block)), (SW, SH))
    np.testing.assert_array_equal(coco_mask.decode(rle), block)
    text = coco_mask.encode(np.asfortranarray(block))["counts"].decode()
    assert rle_of(("rle", {"size": [SH, SW], "counts": text}), (SW, SH)) == {
        "size": [SH, SW], "counts": text.encode()}  # fmt: skip
    with pytest.raises(LabelError, match=f"an RLE of {SH}x{SW} pixels, its image is {SW}x{SH}"):
        rle_of(("rle", {"size": [SW, SH], "counts": text}), (SW, SH))


@pytest.mark.parametrize("size", [(3, 2), (2, 3), (5, 4)])
def test_a_mask_halved_or_kept_takes_every_other_or_every_pixel(size):
    """A 6x4 source stretched to 3x2 samples columns 1, 3, 5 and rows 1, 3 (evenly spaced,
    not one run); kept at 5x4 its rows are one run."""
    block = np.zeros((4, 6), np.uint8)
    block[1:4, 2:5] = 1
    block[0, 0] = 1
    objects = [SourceObject(0, (0.0, 0.0, 6.0, 4.0), ("rle", {"size": [4, 6],
               "counts": uncompressed_of(block)}))]  # fmt: skip
    p = place((6, 4), Geometry(size, "stretch"))
    record, dropped = object_record(objects, (6, 4), p, instances=True)
    assert dropped == []
    np.testing.assert_array_equal(record["masks"][0], resample_mask(block, p))


def uncompressed_of(plane: np.ndarray) -> list[int]:
    flat = plane.T.ravel()
    changes = np.flatnonzero(np.diff(np.concatenate([[0], flat, [1 - flat[-1]]])))
    return np.diff(np.concatenate([[0], changes])).tolist()


def test_pycocotools_deprecation_warnings_do_not_reach_the_user():
    import warnings

    p = place((SW, SH), Geometry((15, 15), "fit"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        object_record(objects(), (SW, SH), p, instances=True)
    assert not [w for w in caught if issubclass(w.category, DeprecationWarning)]
