"""Label Studio's COCO export (`result.json` beside `images/`, `file_name`s like
`images/<name>.jpg`): detected, packed as its objects under auto (detection for boxes only,
instances when annotations have segmentations), every image and box exact against the JSON;
a COCO-like JSON no layout knows is still refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import packer
from packer.cli import pack_command
from packer.errors import SourceError
from tests.fixtures.coco import write_images
from tests.fixtures.detection import detection_annotations, detection_json

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
EXACT = {"size": (40, 30), "resize": "none"}


def make_label_studio(root: Path, boxes_only: bool) -> dict:
    """A Label Studio COCO export of 6 images (no crowds: Label Studio writes none); its JSON."""
    per_image = [[(c, s, 0) for c, s, _ in anns] for anns in detection_annotations()]
    names = write_images(root / "images", len(per_image))
    data = detection_json([f"images/{n}" for n in names], per_image)
    if boxes_only:
        for a in data["annotations"]:
            a["segmentation"] = []
    (root / "result.json").write_text(json.dumps(data))
    return data


def expected(data: dict) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per image name, its boxes (x, y, x + w, y + h) and labels (categories by id) as the
    JSON says them."""
    labels = {c["id"]: k for k, c in enumerate(sorted(data["categories"], key=lambda c: c["id"]))}
    want = {}
    for image in data["images"]:
        mine = [a for a in data["annotations"] if a["image_id"] == image["id"]]
        boxes = [[x, y, x + w, y + h] for x, y, w, h in (a["bbox"] for a in mine)]
        want[Path(image["file_name"]).name] = (
            np.array(boxes, np.float32).reshape(-1, 4),
            np.array([labels[a["category_id"]] for a in mine], np.int32),
        )
    return want


def packed(ds) -> dict[str, dict]:
    part = ds["train"]
    return {Path(part.source(i)).name: part[i][1] for i in range(part.count)}


@pytest.mark.parametrize("boxes_only", [True, False])
def test_label_studio_export_packs_its_objects_exactly(tmp_path, boxes_only):
    src = tmp_path / "export"
    data = make_label_studio(src, boxes_only)
    task = "detection" if boxes_only else "instances"
    dry = CliRunner().invoke(pack_command, [str(src), "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert f"layout:  coco-labelstudio ({task})" in dry.output
    assert "Label Studio's COCO export: result.json beside images/" in dry.output
    assert (
        "boxes only (no segmentation): detection"
        if boxes_only
        else "have a segmentation: instances"
    ) in dry.output
    ds = packer.pack(src, out=tmp_path / "p", **EXACT)
    assert ds.task == task and list(ds.splits) == ["train"]
    assert ds.class_names == ["person", "car", "dog"] and ds.manifest["rejected"] == []
    got, want = packed(ds), expected(data)
    assert set(got) == set(want) and len(got) == 6
    for name, (boxes, labels) in want.items():
        np.testing.assert_array_equal(got[name]["boxes"], boxes, name)
        np.testing.assert_array_equal(got[name]["labels"], labels, name)
        if not boxes_only:
            assert got[name]["masks"].shape == (len(labels), 30, 40)


def test_label_studio_export_takes_another_task_and_split_fractions(tmp_path):
    src = tmp_path / "export"
    make_label_studio(src, boxes_only=False)
    det = packer.pack(src, out=tmp_path / "det", task="detection", **EXACT)
    assert det.task == "detection"
    split = packer.pack(src, out=tmp_path / "split", split={"train": 0.5, "val": 0.5}, **EXACT)
    assert sum(split[s].count for s in split.splits) == 6


def test_a_coco_json_that_no_layout_knows_is_still_refused(tmp_path):
    """Another tool's COCO JSON beside image folders: one line naming it and --coco."""
    src = tmp_path / "export"
    names = write_images(src / "pictures", 2)
    data = detection_json([f"pictures/{n}" for n in names], detection_annotations()[:2])
    (src / "export.json").write_text(json.dumps(data))
    with pytest.raises(SourceError) as info:
        packer.pack(src, out=tmp_path / "out")
    message = str(info.value)
    assert "export.json" in message and "coco='export.json'" in message and "\n" not in message
