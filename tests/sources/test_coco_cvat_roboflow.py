"""COCO as CVAT and Roboflow export it, detected with --dry-run saying which and why; the
Roboflow placeholder category left out, `valid` read as val; --coco JSONs outside SRC find
their images beside them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import packer
from packer.cli import pack_command
from tests.fixtures.detection import make_cvat, make_detection_coco, make_roboflow

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
SIZE = {"size": (40, 30), "resize": "none"}


def targets_by_name(ds, split: str) -> dict[str, dict]:
    part = ds[split]
    return {Path(part.source(i)).name: part[i][1] for i in range(part.count)}


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, dict]:
    """The standard layout's targets: the exports hold the same annotations."""
    root = tmp_path_factory.mktemp("ref")
    src = make_detection_coco(root / "coco")
    return targets_by_name(packer.pack(src, out=root / "p", task="detection", **SIZE), "train")


def same(got: dict[str, dict], want: dict[str, dict]) -> None:
    assert set(got) == set(want)
    for name, target in got.items():
        np.testing.assert_array_equal(target["boxes"], want[name]["boxes"])
        np.testing.assert_array_equal(target["labels"], want[name]["labels"])


def test_cvat_export_is_detected_and_packs_its_objects(tmp_path, reference):
    src = make_cvat(tmp_path / "cvat")
    dry = CliRunner().invoke(pack_command, [str(src), "--dry-run", "--task", "detection"])
    assert dry.exit_code == 0, dry.output
    assert "layout:  coco-cvat (detection)" in dry.output
    assert "CVAT's COCO export: images/ + annotations/instances_default.json" in dry.output
    semantic = CliRunner().invoke(pack_command, [str(src), "--dry-run"])
    assert "layout:  coco-cvat (segmentation)" in semantic.output
    assert "--task detection packs each object's box and label" in semantic.output
    ds = packer.pack(src, out=tmp_path / "p", task="detection", **SIZE)
    assert ds.class_names == ["person", "car", "dog"] and list(ds.splits) == ["train"]
    same(targets_by_name(ds, "train"), reference)


def test_roboflow_export_leaves_the_placeholder_out_and_reads_valid_as_val(tmp_path, reference):
    src = make_roboflow(tmp_path / "rf")
    dry = CliRunner().invoke(pack_command, [str(src), "--dry-run", "--task", "instances"])
    assert dry.exit_code == 0, dry.output
    assert "layout:  coco-roboflow (instances)" in dry.output
    assert "valid/ read as val" in dry.output
    ds = packer.pack(src, out=tmp_path / "p", task="detection", **SIZE)
    assert ds.class_names == ["person", "car", "dog"]  # not the project's placeholder
    assert sorted(ds.splits) == ["train", "val"]
    same(targets_by_name(ds, "train"), reference)
    semantic = packer.pack(src, out=tmp_path / "s", **SIZE)
    assert semantic.class_names == ["background", "person", "car", "dog"]


def test_coco_files_outside_src_find_images_beside_them(tmp_path, reference):
    exported = make_roboflow(tmp_path / "rf")
    empty = tmp_path / "src"
    empty.mkdir()
    ds = packer.pack(
        empty,
        out=tmp_path / "p",
        task="detection",
        coco={
            "train": exported / "train" / "_annotations.coco.json",
            "val": exported / "valid" / "_annotations.coco.json",
        },
        **SIZE,
    )
    assert ds["train"].count == 6 and ds["val"].count == 2
    assert ds["train"].source(0).startswith(str(exported / "train"))
    same(targets_by_name(ds, "train"), reference)
