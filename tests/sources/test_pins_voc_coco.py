"""Pascal VOC and COCO annotations at their edges, against Detectron2's `pascal_voc.py` (1-based
inclusive corners: x1 = xmin - 1, y1 = ymin - 1, x2 = xmax, y2 = ymax) and torchvision's
detection reference / pycocotools (bbox [x, y, w, h] -> x, y, x + w, y + h; `iscrowd` 0 when
absent; boxes of no width or height removed; crowds left out unless kept)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from packer.errors import LabelError, SourceError
from packer.imaging.geometry import identity
from packer.packing.objects import object_record
from packer.sources import AnnotationOptions, scan
from packer.sources.coco import _given_files
from packer.sources.coco_files import JsonFile
from packer.sources.coco_objects import CocoObjects, annotations_of, boxes_only_note
from packer.sources.voc_xml import VocObjects, read_xml
from tests.fixtures.voc import annotation, detectron2_instances, voc

# ---------------------------------------------------------------- Pascal VOC


def read(tmp_path: Path, text: str):
    (tmp_path / "a.xml").write_text(text)
    rejected: list = []
    return read_xml(tmp_path, "a.xml", "a.jpg", rejected), rejected


def test_a_one_pixel_voc_box_is_one_pixel_wide_and_high_and_packs(tmp_path):
    text = annotation(("dog", 0, (5, 3, 5, 3)), ("cat", 0, (1, 1, 1, 40)))
    objects, _ = read(tmp_path, text)
    assert [o.box for o in objects] == [(4.0, 2.0, 5.0, 3.0), (0.0, 0.0, 1.0, 40.0)]
    assert [o.problem for o in objects] == [None, None]
    expected = detectron2_instances(text, ["cat", "dog"])
    assert [list(o.box) for o in objects] == [e["bbox"] for e in expected]
    recipe = VocObjects.made("a.xml", objects, {"cat": 0, "dog": 1}, "names")
    found, problems = recipe.objects(lambda _: b"", (50, 40))
    record, dropped = object_record(found, (50, 40), identity((50, 40)), instances=False)
    assert dropped == [] and problems == []
    np.testing.assert_array_equal(record["boxes"], [[4, 2, 5, 3], [0, 0, 1, 40]])
    assert record["labels"].tolist() == [1, 0]


def test_a_name_with_surrounding_whitespace_is_the_name(tmp_path):
    text = annotation(("  dog\n", 0, (2, 2, 9, 9)), ("\tcat ", 0, (2, 2, 9, 9)))
    objects, _ = read(tmp_path, text)
    assert [o.name for o in objects] == ["dog", "cat"]
    recipe = VocObjects.made("a.xml", objects, {"cat": 0, "dog": 1}, "names")
    assert [b[0] for b in recipe.boxes] == [1, 0] and recipe.problems == ()


def test_classes_found_in_a_voc_folder_are_stripped_and_sorted(tmp_path):
    xmls = {"a": annotation((" zebra ", 0, (2, 2, 9, 9)), ("ant", 0, (2, 2, 9, 9)))}
    result = scan(voc(tmp_path, xmls))
    assert result.class_names == ["ant", "zebra"]


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "", "1e999", "3px"])
def test_a_coordinate_that_is_no_finite_number_leaves_its_object_out(tmp_path, value):
    text = annotation(("dog", 0, (2, 2, 9, 9)), ("cat", 0, (2, 2, value, 9)))
    objects, rejected = read(tmp_path, text)
    assert rejected == [] and objects[0].problem is None
    assert objects[1].box is None
    assert objects[1].problem == f"<xmax> {value!r} is not a number"
    recipe = VocObjects.made("a.xml", objects, {"cat": 0, "dog": 1}, "names")
    assert recipe.problems == (f"a.xml object 2 (cat): <xmax> {value!r} is not a number",)
    assert [b[0] for b in recipe.boxes] == [1]


def test_inverted_boxes_and_missing_parts_are_named(tmp_path):
    text = (
        "<annotation>"
        "<object><name>dog</name><bndbox><xmin>5</xmin><ymin>3</ymin><xmax>4</xmax>"
        "<ymax>9</ymax></bndbox></object>"
        "<object><name>dog</name><bndbox><xmin>5</xmin><ymin>3</ymin><xmax>9</xmax>"
        "<ymax>2.5</ymax></bndbox></object>"
        "<object><name> </name><bndbox/></object>"
        "<object><name>dog</name><difficult> 1 </difficult></object>"
        "<object><name>dog</name><difficult></difficult><bndbox><xmin>5</xmin><ymin>3</ymin>"
        "<xmax>5</xmax><ymax>3</ymax></bndbox></object>"
        "</annotation>"
    )
    objects, _ = read(tmp_path, text)
    assert [o.problem for o in objects] == [
        "an inverted box (5.0, 3.0, 4.0, 9.0)",
        "an inverted box (5.0, 3.0, 9.0, 2.5)",
        "no <name>",
        "no <bndbox>",
        None,
    ]
    assert [o.difficult for o in objects] == [False, False, False, True, False]
    recipe = VocObjects.made("a.xml", objects, {"dog": 0}, "names")
    assert recipe.problems[2] == "a.xml object 3 (?): no <name>"


def test_difficult_is_kept_as_a_flag(tmp_path):
    text = annotation(("dog", 1, (2, 2, 9, 9)), ("dog", 0, (2, 2, 9, 9)))
    objects, _ = read(tmp_path, text)
    recipe = VocObjects.made("a.xml", objects, {"dog": 0}, "names")
    found, _ = recipe.objects(lambda _: b"", (50, 40))
    assert [(o.difficult, o.crowd) for o in found] == [(True, False), (False, False)]


def test_an_unreadable_xml_rejects_its_image(tmp_path):
    objects, rejected = read(tmp_path, "<annotation><object>")
    assert objects is None
    assert rejected[0].path == "a.xml" and "does not parse as XML (its image a.jpg" in (
        rejected[0].reason
    )


# ---------------------------------------------------------------- COCO


FILE = JsonFile(Path("instances_train.json"), "instances_train.json", "train", "train")
CLASSES = {1: 0, 7: 1}


def kept_and_problems(annotations, crowd="ignore", instances=False):
    return annotations_of(annotations, CLASSES, crowd, FILE, instances)


def test_an_annotation_without_iscrowd_is_no_crowd_and_is_kept():
    """pycocotools and torchvision read a missing iscrowd as 0."""
    plain = {"id": 5, "category_id": 7, "bbox": [1, 2, 3, 4]}
    for crowd in ("ignore", "class"):
        kept, problems = kept_and_problems([plain], crowd)
        assert problems == () and kept == ((5, 1, False, (1.0, 2.0, 4.0, 6.0), None),)


def test_crowds_are_left_out_silently_unless_kept_flagged():
    crowd = {"id": 6, "category_id": 1, "bbox": [0, 0, 2, 2], "iscrowd": 1}
    assert kept_and_problems([crowd], "ignore") == ((), ())
    kept, problems = kept_and_problems([crowd], "class")
    assert problems == () and kept == ((6, 0, True, (0.0, 0.0, 2.0, 2.0), None),)


@pytest.mark.parametrize(
    ("bbox", "reason"),
    [
        ([1, 2, 0, 4], "a box of zero size (0x4)"),
        ([1, 2, 3, 0], "a box of zero size (3x0)"),
        ([1, 2, -1, 4], "a box of negative size (-1x4)"),
        ([1, 2, 3, -0.5], "a box of negative size (3x-0.5)"),
        ([1, 2, 3], "bbox [1, 2, 3] is not four numbers"),
        (None, "bbox None is not four numbers"),
        ([1, 2, "w", 4], "bbox [1, 2, 'w', 4] is not four numbers"),
    ],
)
def test_boxes_of_no_area_or_no_numbers_are_named(bbox, reason):
    kept, problems = kept_and_problems([{"id": 3, "category_id": 1, "bbox": bbox}])
    assert kept == () and problems == (f"instances_train.json#annotation 3: {reason}",)


def test_a_box_of_a_tiny_positive_size_is_kept():
    kept, _ = kept_and_problems([{"id": 3, "category_id": 1, "bbox": [1, 2, 0.01, 0.01]}])
    assert kept[0][3] == (1.0, 2.0, 1.01, 2.01)


def test_an_unknown_category_and_a_missing_id_are_named():
    kept, problems = kept_and_problems(
        [
            {"id": 3, "category_id": 2, "bbox": [0, 0, 1, 1]},
            {"category_id": 1, "bbox": [0, 0, 1, 1]},
        ]
    )
    assert problems == ("instances_train.json#annotation 3: category 2 is not in categories",)
    assert kept == ((-1, 0, False, (0.0, 0.0, 1.0, 1.0), None),)


@pytest.mark.parametrize(
    ("segmentation", "outcome"),
    [
        ([[0, 0, 4, 0, 4, 4]], ("polygons", ((0.0, 0.0, 4.0, 0.0, 4.0, 4.0),))),
        ([[0, 0, 4, 0, 4, 4, 0, 4]], ("polygons", ((0.0, 0.0, 4.0, 0.0, 4.0, 4.0, 0.0, 4.0),))),
        ([[0, 0, 4, 0]], "a polygon of 2 points (3 or more)"),
        ([[0, 0, 4, 0, 4, 4, 1]], "a polygon of 3 points (3 or more)"),
        ([[0, 0, 4, 0, 4, 4], "x"], "a polygon of 0 points (3 or more)"),
        ([[0, 0, 4, 0, 4, "y"]], "a polygon with a value that is not a number"),
        ({"size": [4, 6], "counts": "abc"}, ("rle", {"size": [4, 6], "counts": "abc"})),
        ({"size": ["4", 6], "counts": (3, 21)}, ("rle", {"size": [4, 6], "counts": [3, 21]})),
        ([], "no segmentation to draw its mask (boxes only: --task detection packs it)"),
        (None, "no segmentation to draw its mask (boxes only: --task detection packs it)"),
        ({"counts": "abc"}, "no segmentation to draw its mask (boxes only: --task detection "
                            "packs it)"),
    ],
)  # fmt: skip
def test_segmentations_as_instance_shapes(segmentation, outcome):
    a = {"id": 9, "category_id": 1, "bbox": [0, 0, 4, 4], "segmentation": segmentation}
    kept, problems = kept_and_problems([a], instances=True)
    if isinstance(outcome, str):
        assert kept == () and problems == (f"instances_train.json#annotation 9: {outcome}",)
    else:
        assert problems == () and kept[0][4] == outcome
    # detection never reads the segmentation
    kept, problems = kept_and_problems([a], instances=False)
    assert problems == () and kept[0][4] is None


def test_coco_objects_are_read_only_at_the_size_the_json_gives():
    recipe = CocoObjects("f.json", 4, 30, 40, ((1, 0, True, (0.0, 0.0, 2.0, 2.0), None),), (), "")
    assert recipe.key == "f.json#4"
    found, problems = recipe.objects(lambda _: b"", (40, 30))
    assert problems == [] and [(o.label, o.crowd, o.box) for o in found] == [
        (0, True, (0.0, 0.0, 2.0, 2.0))
    ]
    with pytest.raises(LabelError, match="says 40x30 pixels, the image file is 30x40"):
        recipe.objects(lambda _: b"", (30, 40))


def test_the_boxes_only_note_counts_annotations_without_segmentation():
    polygon = [[0, 0, 1, 0, 1, 1]]
    data = {"annotations": [{"bbox": [0, 0, 1, 1], "segmentation": []},
                            {"bbox": [0, 0, 1, 1]},
                            {"bbox": [0, 0, 1, 1], "segmentation": polygon}]}  # fmt: skip
    (note,) = boxes_only_note([(FILE, data)])
    assert note.startswith("2 of 3 annotations are boxes only")
    data["annotations"].pop()
    assert boxes_only_note([(FILE, data)])[0].startswith("all annotations are boxes only")
    assert boxes_only_note([(FILE, {"annotations": []})]) == []


def test_coco_files_given_are_named_by_their_split(tmp_path):
    paths = [tmp_path / "instances_val2017.json", tmp_path / "mine.json"]
    files = _given_files(AnnotationOptions(coco=(("", str(paths[0])), ("", str(paths[1])))))
    assert [(f.split, f.stem) for f in files] == [("val", "val2017"), ("train", "mine")]
    named = _given_files(AnnotationOptions(coco=(("test", str(paths[1])),)))
    assert named[0].split == "test"
    with pytest.raises(SourceError, match="files for split 'train': name each split"):
        _given_files(AnnotationOptions(coco=(("", str(paths[1])), ("train", str(paths[0])))))


def coco_layout(root: Path, annotations: list[dict]) -> Path:
    import json

    (root / "train").mkdir(parents=True)
    (root / "annotations").mkdir()
    for name in ("a.jpg", "b.jpg"):
        (root / "train" / name).write_bytes(b"")
    data = {
        "images": [{"id": 1, "file_name": "a.jpg", "width": 8, "height": 6},
                   {"id": 2, "file_name": "b.jpg", "width": 8, "height": 6}],
        "annotations": annotations,
        "categories": [{"id": 4, "name": "cat"}, {"id": 2, "name": "dog"}],
    }  # fmt: skip
    (root / "annotations/instances_train.json").write_text(json.dumps(data))
    return root


def test_a_semantic_mask_annotation_of_an_unknown_category_rejects_its_image(tmp_path):
    polygon = [[1, 1, 5, 1, 5, 4]]
    src = coco_layout(tmp_path, [
        {"id": 7, "image_id": 1, "category_id": 99, "segmentation": polygon, "bbox": [1, 1, 4, 3]},
        {"id": 8, "image_id": 2, "category_id": 4, "segmentation": polygon, "bbox": [1, 1, 4, 3]},
    ])  # fmt: skip
    result = scan(src)
    assert result.task == "segmentation"
    assert list(result.table.names) == ["background", "dog", "cat"]  # ranked by id
    assert [s.image for s in result.samples] == ["train/b.jpg"]
    assert {r.path: r.reason for r in result.rejected} == {
        "train/a.jpg": "annotation 7: category 99 is not in categories"
    }
    detection = scan(src, annotations=AnnotationOptions(task="detection"))
    assert detection.class_names == ["dog", "cat"]
    assert [s.image for s in detection.samples] == ["train/a.jpg", "train/b.jpg"]


def test_coco_instances_give_no_other_task(tmp_path):
    src = coco_layout(tmp_path, [])
    with pytest.raises(SourceError, match="COCO instances give segmentation, detection or"):
        scan(src, annotations=AnnotationOptions(task="classification"))


def test_voc_split_files_name_what_is_missing_and_what_no_split_reads(tmp_path):
    xmls = {k: annotation(("dog", 0, (2, 2, 9, 9))) for k in ("a", "b", "c", "d")}
    xmls["b"] = annotation(("dog", 0, (2, 2, 9, 9)), ("", 0, (1, 1, 2, 2)))
    splits = {"train": ["a", "b", "ghost"], "val": ["b  1", "c"], "dog_val": ["d  1"]}
    src = voc(tmp_path, xmls, splits, images=["a", "b", "c", "e"])
    result = scan(src)
    assert [(s.image, s.split) for s in result.samples] == [
        ("JPEGImages/a.jpg", "train"),
        ("JPEGImages/b.jpg", "train"),  # listed in train and val: in both, said in a note
        ("JPEGImages/b.jpg", "val"),
        ("JPEGImages/c.jpg", "val"),
    ]
    assert "1 ids are in more than one split list, packed in each (e.g. b: train, val)" in (
        result.notes
    )
    assert {r.path: r.reason for r in result.rejected} == {
        "ImageSets/Main/train.txt": "no image for it (looked for JPEGImages/ghost.*)"
    }
    assert "1 images in JPEGImages/ are in no ImageSets/Main split" in result.notes
    assert "1 XML in Annotations/ are in no ImageSets/Main split" in result.notes
    assert any(n.startswith("splits from ImageSets/Main/:") and "(1 per-class lists there" in n
               for n in result.notes)  # fmt: skip
    left_out = (
        "2 objects will be left out (the rest of their images kept), e.g. "
        "Annotations/b.xml object 2 (?): no <name>"
    )
    assert left_out in result.notes
    assert result.why.endswith("; 1 classes")


def test_an_xml_that_cannot_be_read_rejects_its_image(tmp_path):
    (tmp_path / "a.xml").mkdir()  # a folder where the file should be
    rejected: list = []
    assert read_xml(tmp_path, "a.xml", "a.jpg", rejected) is None
    assert rejected[0].path == "a.xml"
    assert rejected[0].reason.startswith("cannot read it (its image is not packed): ")


def test_voc_split_files_that_list_every_image_leave_no_note_of_unused_ones(tmp_path):
    xmls = {k: annotation(("dog", 0, (2, 2, 9, 9))) for k in ("a", "b")}
    result = scan(voc(tmp_path, xmls, {"train": ["a"], "val": ["b"]}))
    assert [(s.image, s.split) for s in result.samples] == [
        ("JPEGImages/a.jpg", "train"),
        ("JPEGImages/b.jpg", "val"),
    ]
    assert not [n for n in result.notes if "in no ImageSets/Main split" in n]
    assert result.rejected == []


@pytest.mark.parametrize("bad", [2, 3, 4])
def test_coco_objects_left_out_are_noted_with_the_first_three(tmp_path, bad):
    polygon = [[1, 1, 5, 1, 5, 4]]
    annotations = [
        {"id": 10 + k, "image_id": 1, "category_id": 4, "segmentation": polygon,
         "bbox": [1, 1, 0, 3]}
        for k in range(bad)
    ] + [
        {"id": 30, "image_id": 2, "category_id": 2, "bbox": [1, 1, 4, 3]},  # boxes only
        {"id": 31, "image_id": 2, "category_id": 4, "segmentation": polygon, "bbox": [1, 1, 4, 3]},
    ]  # fmt: skip
    src = coco_layout(tmp_path, annotations)
    result = scan(src, annotations=AnnotationOptions(task="instances"))
    assert result.why == (
        "COCO instances as instances: annotations/instances_train.json, 2 images, "
        f"{bad + 2} annotations"
    )
    where = "annotations/instances_train.json#annotation"
    problems = [f"{where} {10 + k}: a box of zero size (0x3)" for k in range(bad)]
    problems.append(f"{where} 30: no segmentation to draw its mask (boxes only: --task "
                    "detection packs it)")  # fmt: skip
    shown = "; ".join(problems[:3]) + ("; ..." if len(problems) > 3 else "")
    assert (
        f"{len(problems):,} annotations will be left out of their images (listed in the "
        f"manifest's dropped_objects): {shown}"
    ) in result.notes
    assert (
        "1 annotations have boxes but no segmentation: --task instances cannot draw their "
        "masks and leaves them out; --task detection packs their boxes"
    ) in result.notes
    detection = scan(src, annotations=AnnotationOptions(task="detection"))
    assert not [n for n in detection.notes if "no segmentation" in n]
    assert any(n.startswith(f"{bad:,} annotations will be left out") for n in detection.notes)


def test_the_coco_layout_says_what_it_found_and_what_it_left(tmp_path):
    polygon = [[1, 1, 5, 1, 5, 4]]
    src = coco_layout(tmp_path, [
        {"id": 1, "image_id": 1, "category_id": 4, "segmentation": polygon, "bbox": [1, 1, 4, 3]},
        {"id": 2, "image_id": 2, "category_id": 2, "segmentation": [], "bbox": [1, 1, 4, 3]},
    ])  # fmt: skip
    (src / "annotations/instances_val.json").write_text(
        (src / "annotations/instances_train.json").read_text()
    )
    (src / "annotations/panoptic_train.json").write_text("{}")
    result = scan(src)
    assert (result.layout, result.task) == ("coco", "segmentation")
    assert result.why == (
        "COCO instances: annotations/instances_train.json, 2 images, 2 annotations "
        "(panoptic JSONs too: --layout coco-panoptic packs those)"
    )
    assert (
        "annotations/instances_val.json: no val/ image folder beside annotations/, not packed"
        in result.notes
    )
    assert any(n.startswith("1 of 2 annotations are boxes only") for n in result.notes)
    assert any(n.startswith("semantic masks by default; --task detection") for n in result.notes)
    asked = scan(src, annotations=AnnotationOptions(task="segmentation"))
    assert not any(n.startswith("semantic masks by default") for n in asked.notes)
    detection = scan(src, annotations=AnnotationOptions(task="detection"))
    assert detection.layout == "coco" and detection.why.endswith(
        "(panoptic JSONs too: --layout coco-panoptic packs those)"
    )
    assert any(
        n.startswith("annotations/instances_val.json: no val/ image folder")
        for n in detection.notes
    )
