"""One protocol for every layout: the registry, detection as a loop over it, the task check,
and the help that lists each layout's line."""

from __future__ import annotations

import inspect
import json
import types
from pathlib import Path

import pytest
from click.testing import CliRunner

from packer.cli import pack_command
from packer.sources import LAYOUTS, AnnotationOptions, SourceError, scan
from packer.sources import detect as detection
from packer.sources.model import Found
from packer.sources.walk import walk

# One tiny tree per layout that names itself by its files (empty files: detection reads names).
TREES = {
    "coco": ["annotations/instances_train.json", "train/a.jpg"],
    "coco-panoptic": [
        "annotations/panoptic_val.json",
        "annotations/panoptic_val/a.png",
        "val/a.jpg",
    ],
    "cityscapes": [
        "leftImg8bit/train/aachen/a_leftImg8bit.png",
        "gtFine/train/aachen/a_gtFine_labelIds.png",
    ],
    "ade20k": ["images/training/a.jpg", "annotations/training/a.png"],
    "yolo": ["images/train/a.jpg", "labels/train/a.txt", "data.yaml"],
    "voc": ["JPEGImages/a.jpg", "Annotations/a.xml"],
    "mask-folders": ["train/a.png", "trainannot/a.png"],
    "class-folders": ["cat/a.jpg", "dog/b.jpg"],
}
GENERIC = ("mask-folders", "class-folders", "list")


def make(root: Path, names: list[str]) -> Path:
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).touch()
    return root


def test_every_layout_speaks_the_protocol():
    assert ("auto", *(layout.NAME for layout in detection.REGISTRY)) == LAYOUTS
    assert len(set(LAYOUTS)) == len(LAYOUTS)
    for layout in detection.REGISTRY:
        assert isinstance(layout.NAME, str) and isinstance(layout.LOOKED_FOR, str)
        assert list(inspect.signature(layout.detect).parameters) == ["tree", "annotations"]
        assert list(inspect.signature(layout.scan).parameters) == ["root", "tree", "annotations"]
        assert detection.describe(layout) and "\n" not in detection.describe(layout)


@pytest.mark.parametrize("name", list(TREES))
def test_each_tree_is_claimed_by_its_own_layout_alone(tmp_path, name):
    tree = walk(make(tmp_path, TREES[name]), [""], [])
    claimed = [
        layout.NAME
        for layout in detection.REGISTRY
        if layout.NAME not in GENERIC and layout.detect(tree, AnnotationOptions()) is not None
    ]
    assert claimed == ([] if name in GENERIC else [name])
    first = next(
        layout.NAME
        for layout in detection.REGISTRY
        if layout.detect(tree, AnnotationOptions()) is not None
    )
    assert first == name


def test_a_new_layout_is_a_module_and_a_registry_line(tmp_path, monkeypatch):
    toy = types.ModuleType("toy")
    toy.NAME, toy.LOOKED_FOR, toy.DESCRIPTION = "toy", "a toy.marker file", "toys"

    def toy_detect(tree, annotations):
        return "a toy.marker" if "toy.marker" in tree[""].files else None

    def toy_scan(root, tree, annotations):
        found = Found("toy", "classification", toy.LOOKED_FOR, class_names=["one"])
        found.items = [(n, "train", None, 0) for n in tree["cat"].files]
        return found

    toy.detect, toy.scan = toy_detect, toy_scan
    src = make(tmp_path, [*TREES["class-folders"], "toy.marker"])
    assert scan(src).layout == "class-folders"
    registry = (toy, *detection.REGISTRY)
    monkeypatch.setattr(detection, "REGISTRY", registry)
    monkeypatch.setattr(detection, "BY_NAME", {m.NAME: m for m in registry})
    monkeypatch.setattr(detection, "LAYOUTS", ("auto", *detection.BY_NAME))
    result = scan(src)
    assert (result.layout, result.why, len(result.samples)) == ("toy", "a toy.marker", 1)
    assert scan(src, layout="toy").why == "layout='toy' as asked"
    assert "toy: toys" in detection.layouts_help()


def test_a_yolo_folder_with_labels_beside_its_images(tmp_path):
    src = make(tmp_path, ["train/a.jpg", "train/a.txt", "val/b.jpg"])
    (src / "data.yaml").write_text("train: train\nval: val\nnames: [thing]\n")
    result = scan(src)
    assert (result.layout, result.task) == ("yolo", "detection")
    assert [(s.image, s.split, s.mask.files) for s in result.samples] == [
        ("train/a.jpg", "train", ("train/a.txt",)),
        ("val/b.jpg", "val", ()),
    ]
    (src / "data.yaml").unlink()  # without it, .txt files beside images are no sign of YOLO
    with pytest.raises(SourceError, match="cannot recognise the layout"):
        scan(src)


def test_a_layout_that_cannot_give_the_task_asked_says_so(tmp_path):
    src = make(tmp_path, TREES["class-folders"])
    for task in ("detection", "segmentation"):
        with pytest.raises(
            SourceError, match=f"the class-folders layout gives classification, not {task}"
        ):
            scan(src, annotations=AnnotationOptions(task=task))
    assert scan(src, annotations=AnnotationOptions(task="classification")).task == "classification"
    masks = make(tmp_path / "m", TREES["mask-folders"])
    with pytest.raises(SourceError, match="layout gives segmentation, not instances"):
        scan(masks, annotations=AnnotationOptions(task="instances"))


def test_coco_json_beside_yolo_labels_is_not_yolo_when_coco_is_named(tmp_path):
    src = make(tmp_path, TREES["yolo"])
    (src / "data.yaml").write_text("names: [a]\ntrain: images/train\n")
    coco = {"images": [], "annotations": [], "categories": [{"id": 1, "name": "a"}]}
    (src / "c.json").write_text(json.dumps(coco))
    assert scan(src).layout == "yolo"
    options = AnnotationOptions.given(str(src / "c.json"))
    with pytest.raises(SourceError, match="no samples"):  # COCO, as asked, lists no image
        scan(src, annotations=options)


def test_help_lists_every_layout_with_its_line():
    result = CliRunner().invoke(pack_command, ["--help"], terminal_width=400)
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    for layout in detection.REGISTRY:
        assert f"{layout.NAME}: {detection.describe(layout)}" in text
