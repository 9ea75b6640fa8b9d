"""YOLO and Pascal VOC sources packed end to end: boxes and masks read back from every format
match each format's own definition (Ultralytics, Detectron2), moved by the pack's resize.

Needs the converter that writes objects (packer/packing/objects.py); skipped without it."""

from __future__ import annotations

import numpy as np
import pytest

import packer
from tests.fixtures.voc import XMLS, detectron2_instances, voc
from tests.fixtures.yolo import DETECT, SEGMENT, H, W, polygon2mask, write, xywhn2xyxy

pytest.importorskip("packer.packing.objects", reason="the converter for objects is not here")

FORMATS = ("npy", "tfrecord", "recordio")


def by_image(ds, split: str, names: list[str]) -> dict[str, dict]:
    """The target of each named image (a path relative to SRC) of a split."""
    part = ds[split]
    sources = {str(part.source(i)): i for i in range(part.count)}
    return {
        name: part[next(i for s, i in sources.items() if s.endswith("/" + name))][1]
        for name in names
    }


@pytest.mark.parametrize("fmt", FORMATS)
def test_yolo_boxes_packed_twice_the_size(tmp_path, fmt):
    src = write(tmp_path / "src", DETECT)
    ds = packer.pack(src, out=tmp_path / fmt, format=fmt, size=(2 * W, 2 * H), workers=1)
    assert ds.manifest["task"] == "detection" and [c["name"] for c in ds.manifest["classes"]] == [
        "zebra",
        "ant",
        "cat",
    ]
    names = ["images/train/a.jpg", "images/train/b.jpg", "images/train/empty.jpg"]
    got = by_image(ds, "train", names)
    for name in names[:2]:
        rows = [
            line.split()
            for line in DETECT[name.replace("images", "labels")[:-4] + ".txt"].splitlines()
        ]
        expected = xywhn2xyxy(np.array([r[1:] for r in rows], np.float32), W, H) * 2
        np.testing.assert_allclose(got[name]["boxes"], expected, atol=1e-3)
        assert got[name]["labels"].tolist() == [int(r[0]) for r in rows]
    assert got["images/train/empty.jpg"]["boxes"].shape == (0, 4)  # a background image


def test_yolo_polygons_packed_as_polygon2mask(tmp_path):
    src = write(tmp_path / "src", SEGMENT)
    ds = packer.pack(src, out=tmp_path / "out", size=(W, H), workers=1)
    assert ds.manifest["task"] == "instances"
    got = by_image(ds, "train", ["images/train/a.jpg"])["images/train/a.jpg"]
    for mask, line in zip(got["masks"], SEGMENT["labels/train/a.txt"].splitlines(), strict=True):
        segment = np.array(line.split()[1:], np.float32).reshape(-1, 2)
        segment[..., 0] *= W
        segment[..., 1] *= H
        np.testing.assert_array_equal(mask, polygon2mask((H, W), [segment]))


def test_yolo_bad_lines_are_left_out_and_named(tmp_path):
    bad = {**DETECT, "labels/train/b.txt": "1 0.9 0.9 0.2 0.2\n7 0.5 0.5 0.1 0.1\n"}
    ds = packer.pack(write(tmp_path / "src", bad), out=tmp_path / "out", workers=1)
    target = by_image(ds, "train", ["images/train/b.jpg"])["images/train/b.jpg"]
    assert target["labels"].tolist() == [1]
    assert "labels/train/b.txt line 2" in str(ds.manifest)
    assert "class 7 is not one of the 3 names (0..2)" in str(ds.manifest)


def test_voc_boxes_packed_are_detectron2s(tmp_path):
    ds = packer.pack(voc(tmp_path / "voc"), out=tmp_path / "out", size=(50, 40), workers=1)
    names = ["aeroplane", "cat", "dog", "person"]
    assert ds.manifest["task"] == "detection"
    got = by_image(ds, "train", [f"JPEGImages/{key}.jpg" for key in XMLS])
    for key, text in XMLS.items():
        expected = detectron2_instances(text, names)
        target = got[f"JPEGImages/{key}.jpg"]
        assert target["boxes"].reshape(-1, 4).tolist() == [e["bbox"] for e in expected]
        assert target["labels"].tolist() == [e["category_id"] for e in expected]
    assert got["JPEGImages/2008_000001.jpg"]["difficult"].tolist() == [0, 1]
