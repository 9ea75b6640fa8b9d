"""The Pascal VOC detection layout: boxes as Detectron2's pascal_voc.py reads them, splits,
classes (sorted, or a names file), bad XML named, and the VOC segmentation layout unchanged."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from PIL import Image

from packer.cli import pack_command
from packer.sources import AnnotationOptions, SourceError, scan
from tests.fixtures.voc import XMLS, annotation, detectron2_instances, voc


def objects_of(result, image: str):
    sample = next(s for s in result.samples if s.image == image)
    return sample.mask.objects(lambda rel: (result.root / rel).read_bytes(), (50, 40))


def test_boxes_are_detectron2s_and_classes_sorted(tmp_path):
    result = scan(voc(tmp_path))
    names = ["aeroplane", "cat", "dog", "person"]
    assert (result.layout, result.task, result.class_names) == ("voc", "detection", names)
    assert len(result.samples) == 4 and result.rejected == []
    for key, text in XMLS.items():
        objects, problems = objects_of(result, f"JPEGImages/{key}.jpg")
        expected = detectron2_instances(text, names)
        assert problems == []
        assert [(o.label, list(o.box)) for o in objects] == [
            (e["category_id"], e["bbox"]) for e in expected
        ]
    objects, _ = objects_of(result, "JPEGImages/2008_000001.jpg")
    assert objects[0].box == (0.0, 0.0, 50.0, 40.0)  # the whole 50x40 image
    assert [o.difficult for o in objects] == [False, True]


def test_splits_from_image_sets_main(tmp_path):
    splits = {
        "train": ["2008_000001", "2008_000002"],
        "val": ["2008_000003"],
        "trainval": ["2008_000001", "2008_000002", "2008_000003"],
        "dog_train": ["2008_000001  1"],
    }
    result = scan(voc(tmp_path, splits=splits))
    assert [(s.image[-15:], s.split) for s in result.samples] == [
        ("2008_000001.jpg", "train"),
        ("2008_000002.jpg", "train"),
        ("2008_000003.jpg", "val"),
    ]
    assert any("(1 per-class lists there" in n for n in result.notes)
    assert (
        "trainval.txt is train.txt + val.txt: packed as train and val, not again as trainval"
        in (result.notes)
    )
    assert any("1 images in JPEGImages/ are in no ImageSets/Main split" in n for n in result.notes)


def test_classes_from_a_names_file_in_its_order(tmp_path):
    names = tmp_path / "voc.names"
    names.write_text("person\ndog\ncat\n")
    options = AnnotationOptions.given(None, classes=names)
    result = scan(voc(tmp_path / "src"), annotations=options)
    assert result.class_names == ["person", "dog", "cat"] and result.table.source == "voc.names"
    objects, problems = objects_of(result, "JPEGImages/2008_000002.jpg")
    assert [o.label for o in objects] == [0, 1]
    _, problems = objects_of(result, "JPEGImages/2008_000003.jpg")
    assert problems == [
        "Annotations/2008_000003.xml object 1 (aeroplane): class 'aeroplane' is not in voc.names"
    ]


def test_bad_xml_and_objects_are_named(tmp_path):
    no_box = annotation(("dog", 0, (1, 1, 5, 5)), ("cat", 0, (2, 2, 4, 4)))
    no_box = no_box.replace("<bndbox><xmin>1</xmin><ymin>1</ymin><xmax>5</xmax><ymax>5</ymax>", "")
    no_box = no_box.replace("</bndbox></object><object>", "</object><object>", 1)
    xmls = {
        "a": no_box,
        "b": annotation(
            ("dog", 0, ("x", 1, 5, 5)), ("dog", 0, (9, 9, 3, 12)), ("", 0, (1, 1, 2, 2))
        ),
        "c": "<annotation><object>",
        "d": annotation(("dog", 0, (1, 1, 2, 2))),
    }
    src = voc(tmp_path, xmls, images=["a", "b", "c", "e"])
    result = scan(src)
    assert {r.path: r.reason for r in result.rejected} == {
        "Annotations/c.xml": "does not parse as XML (its image JPEGImages/c.jpg is not packed): "
        "no element found: line 1, column 20",
        "Annotations/d.xml": "no image for it (looked for JPEGImages/d.*)",
        "JPEGImages/e.jpg": "no annotation (looked for Annotations/e.xml)",
    }
    objects, problems = objects_of(result, "JPEGImages/a.jpg")
    assert [o.box for o in objects] == [(1.0, 1.0, 4.0, 4.0)]
    assert problems == ["Annotations/a.xml object 1 (dog): no <bndbox>"]
    objects, problems = objects_of(result, "JPEGImages/b.jpg")
    assert objects == [] and problems == [
        "Annotations/b.xml object 1 (dog): <xmin> 'x' is not a number",
        "Annotations/b.xml object 2 (dog): an inverted box (9.0, 9.0, 3.0, 12.0)",
        "Annotations/b.xml object 3 (?): no <name>",
    ]
    assert any("4 objects will be left out" in n for n in result.notes)


def test_voc_segmentation_stays_mask_folders_unless_detection_is_asked(tmp_path):
    src = voc(tmp_path)
    (src / "SegmentationClass").mkdir()
    for key in XMLS:
        Image.new("P", (50, 40)).save(src / "SegmentationClass" / f"{key}.png")
    result = scan(src)
    assert (result.layout, result.task) == (
        "mask-folders (JPEGImages/ + SegmentationClass/)",
        "segmentation",
    )
    assert "--task detection" in result.task_why or "task='detection'" in result.task_why
    boxes = scan(src, annotations=AnnotationOptions(task="detection"))
    assert (boxes.layout, boxes.task, len(boxes.samples)) == ("voc", "detection", 4)


def test_instances_and_segmentation_are_refused_in_one_line(tmp_path):
    src = voc(tmp_path)
    for task in ("instances", "segmentation", "classification"):
        with pytest.raises(SourceError, match=f"Pascal VOC gives detection, not {task}"):
            scan(src, annotations=AnnotationOptions(task=task))


def test_two_years_side_by_side(tmp_path):
    voc(
        tmp_path / "VOCdevkit/VOC2007",
        {"000005": XMLS["2008_000001"]},
        {"trainval": ["x"], "test": ["000005"]},
    )
    voc(
        tmp_path / "VOCdevkit/VOC2012",
        {"2008_000002": XMLS["2008_000002"]},
        {"train": ["2008_000002"]},
    )
    result = scan(tmp_path)
    assert [(s.image, s.split) for s in result.samples] == [
        ("VOCdevkit/VOC2007/JPEGImages/000005.jpg", "test"),
        ("VOCdevkit/VOC2012/JPEGImages/2008_000002.jpg", "train"),
    ]
    assert result.class_names == ["cat", "dog", "person"]


def test_dry_run_says_layout_why_and_task(tmp_path):
    result = CliRunner().invoke(pack_command, [str(voc(tmp_path / "v")), "--dry-run"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[1:4] == [
        "layout:  voc (detection)",
        "found:   Pascal VOC: Annotations/ (4 XML) beside JPEGImages/; 4 classes",
        "task:    detection: auto: Annotations/ XML hold boxes only (VOC's SegmentationObject/ "
        "masks are not read)",
    ]
