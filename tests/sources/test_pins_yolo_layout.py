"""How a YOLO folder is found and read (Ultralytics' `img2label_paths` pairing and its split
folders): labels beside their images, Roboflow's `valid`, names files among the labels, files
that are no images, background images counted, and the label files sampled to choose the task.
Scanning reads names and label text only, so the images here are empty files."""

from __future__ import annotations

from pathlib import Path

import pytest

from packer.sources import AnnotationOptions, SourceError, scan
from packer.sources.model import AnnotationOptions as Options
from packer.sources.yolo import detect


def files(root: Path, tree: dict[str, str]) -> Path:
    for rel, text in tree.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


BOX = "0 0.5 0.5 0.2 0.2\n"
POLYGON = "0 0.1 0.1 0.5 0.1 0.3 0.4\n"


def test_labels_beside_their_images_with_a_data_yaml(tmp_path):
    src = files(
        tmp_path,
        {
            "data.yaml": "train: train\nval: Valid\nnames: [a, b]\n",
            "train/x.jpg": "",
            "train/x.txt": "1 0.5 0.5 0.2 0.2\n",
            "train/y.jpg": "",
            "Valid/z.png": "",
            "Valid/z.txt": BOX,
            "Valid/readme.md": "",
        },
    )
    result = scan(src)
    assert result.layout == "yolo"
    assert [(s.image, s.split) for s in result.samples] == [
        ("train/x.jpg", "train"),
        ("train/y.jpg", "train"),
        ("Valid/z.png", "val"),
    ]
    assert [r.path for r in result.rejected] == ["Valid/readme.md"]
    assert "1 image has no label file: background, no objects" in result.notes
    labels = {
        s.image: s.mask.objects(lambda r: (src / r).read_bytes(), (10, 10))[0]
        for s in result.samples
    }
    assert [o.label for o in labels["train/x.jpg"]] == [1] and labels["train/y.jpg"] == []


def test_detect_says_why_and_needs_labels_beside_images_or_a_labels_folder(tmp_path):
    beside = files(
        tmp_path / "beside", {"data.yaml": "names: [a]\n", "d/x.jpg": "", "d/x.txt": BOX}
    )
    tree = scan_tree(beside)
    assert detect(tree, Options()) == "YOLO: data.yaml, .txt labels beside the images in d/"
    assert detect(tree, Options(coco=(("", "x.json"),))) is None
    lone = files(tmp_path / "lone", {"data.yaml": "names: [a]\n", "d/x.jpg": "", "d/y.txt": BOX})
    assert detect(scan_tree(lone), Options()) is None
    pairs = files(
        tmp_path / "pairs",
        {"images/t/x.jpg": "", "labels/t/x.txt": BOX, "v/images/y.jpg": "", "v/labels/y.txt": BOX},
    )
    assert detect(scan_tree(pairs), Options()) == "YOLO: images/ + labels/, v/images/ + v/labels/"
    empty_labels = files(tmp_path / "none", {"images/x.jpg": "", "labels/readme.md": ""})
    assert detect(scan_tree(empty_labels), Options()) is None


def scan_tree(root: Path):
    from packer.sources.walk import walk

    return walk(root, [""], [])


def test_images_and_labels_folders_without_a_yaml_take_splits_from_folders(tmp_path):
    src = files(
        tmp_path,
        {
            "classes.txt": "a\n\n b \n",
            "images/train/x.jpg": "",
            "labels/train/x.txt": BOX,
            "images/valid/y.jpg": "",
            "labels/valid/y.txt": BOX,
            "images/train/notes.txt": "",
            "images/train/x.json": "",
            "labels/train/lost.txt": BOX,
            "stray.jpg": "",
        },
    )
    result = scan(src)
    assert result.class_names == ["a", "b"] and result.table.source == "classes.txt"
    assert [(s.image, s.split) for s in result.samples] == [
        ("images/train/x.jpg", "train"),
        ("images/valid/y.jpg", "val"),
    ]
    assert {r.path: r.reason[:30] for r in result.rejected} == {
        "images/train/notes.txt": "not an image file type (.txt)",
        "images/train/x.json": "not an image file type (.json)",
        "labels/train/lost.txt": "label file without an image (l",
        "stray.jpg": "outside the YOLO image folders",
    }


def test_a_names_file_among_the_labels_names_the_classes_and_is_no_label(tmp_path):
    src = files(
        tmp_path,
        {
            "images/x.jpg": "",
            "labels/x.txt": "1 0.5 0.5 0.1 0.1\n",
            "labels/obj.names": "cat\ndog\n",
        },
    )
    result = scan(src)
    assert result.class_names == ["cat", "dog"] and result.table.source == "labels/obj.names"
    assert result.rejected == []


def test_no_names_anywhere_is_an_error(tmp_path):
    src = files(tmp_path, {"images/x.jpg": "", "labels/x.txt": BOX})
    with pytest.raises(SourceError, match="no class names"):
        scan(src)


def test_an_image_listed_in_two_splits_stays_in_the_first(tmp_path):
    src = files(
        tmp_path,
        {
            "data.yaml": "train: images\nval: images/b\nnames: [a]\n",
            "images/a/x.jpg": "",
            "images/b/y.jpg": "",
            "labels/b/y.txt": BOX,
        },
    )
    result = scan(src)
    assert [(s.image, s.split) for s in result.samples] == [
        ("images/a/x.jpg", "train"),
        ("images/b/y.jpg", "train"),
    ]
    assert "2 images have no label file" not in " ".join(result.notes)
    assert "1 image has no label file: background, no objects" in result.notes


def test_backgrounds_are_counted_in_the_plural(tmp_path):
    src = files(
        tmp_path,
        {
            "data.yaml": "train: images\nnames: [a]\n",
            "images/x.jpg": "",
            "images/y.jpg": "",
            "images/z.jpg": "",
            "labels/z.txt": BOX,
        },
    )
    assert "2 images have no label file: background, no objects" in scan(src).notes


def test_the_task_is_chosen_from_a_sample_of_the_label_files(tmp_path):
    """150 label files: the first 100 are read; one polygon in the 101st is found only when
    instances are asked."""
    tree = {"data.yaml": "train: images\nnames: [a]\n"}
    for i in range(150):
        tree[f"images/{i:03}.jpg"] = ""
        tree[f"labels/{i:03}.txt"] = POLYGON if i == 120 else BOX
    src = files(tmp_path, tree)
    auto = scan(src)
    assert auto.task == "detection"
    assert "box labels (cls cx cy w h) only, in the label files read (100 of 150)" in auto.task_why
    asked = scan(src, annotations=AnnotationOptions(task="instances"))
    assert asked.task == "instances"
    assert "polygon labels (cls x1 y1 x2 y2 ...) in the label files read (121 of 150)" in (
        asked.task_why
    )


def test_bad_lines_in_the_files_read_are_counted_in_a_note(tmp_path):
    src = files(
        tmp_path,
        {
            "data.yaml": "train: images\nnames: [a]\n",
            "images/x.jpg": "",
            "labels/x.txt": BOX + "3 0.5 0.5 0.1 0.1\n",
            "images/y.jpg": "",
            "labels/y.txt": BOX,
        },
    )
    result = scan(src)
    assert (
        "1 label line in the 2 label files read will be left out (packing reads them all), "
        "e.g. labels/x.txt line 2: class 3 is not one of the 1 names (0..0)"
    ) in result.notes
    assert result.task_why.startswith("auto: box labels") and "(all 2)" in result.task_why


def test_polygons_give_instances_and_detection_may_be_asked(tmp_path):
    src = files(
        tmp_path,
        {"data.yaml": "train: images\nnames: [a]\n", "images/x.jpg": "", "labels/x.txt": POLYGON},
    )
    assert scan(src).task == "instances"
    asked = scan(src, annotations=AnnotationOptions(task="detection"))
    assert asked.task == "detection" and "packs their hull boxes only" in asked.task_why
    assert not asked.task_why.startswith("auto")


def test_detect_needs_both_folders_and_reads_dotted_names(tmp_path):
    only_labels = files(tmp_path / "only", {"labels/x.txt": BOX, "x.jpg": ""})
    assert detect(scan_tree(only_labels), Options()) is None
    dotted = files(tmp_path / "dotted", {"data.yaml": "names: [a]\n", "d/x.y.jpg": "",
                                         "d/x.y.txt": BOX})  # fmt: skip
    assert detect(scan_tree(dotted), Options()) is not None
    pairs = {f"s{k}/images/x.jpg": "" for k in range(5)}
    pairs |= {f"s{k}/labels/x.txt": BOX for k in range(5)}
    many = files(tmp_path / "many", pairs)
    assert detect(scan_tree(many), Options()) == (
        "YOLO: s0/images/ + s0/labels/, s1/images/ + s1/labels/, s2/images/ + s2/labels/, "
        "s3/images/ + s3/labels/"
    )


def test_a_data_yaml_without_splits_or_names_leaves_them_to_the_folders(tmp_path):
    src = files(tmp_path, {"data.yaml": "kpt_shape: [1, 2]\n", "classes.txt": "a\nb\n",
                           "images/train/x.jpg": "",
                           "labels/train/x.txt": "1 0.5 0.5 0.2 0.2 0.5 0.5\n"})  # fmt: skip
    result = scan(src)
    assert result.class_names == ["a", "b"]
    assert [(s.image, s.split) for s in result.samples] == [("images/train/x.jpg", "train")]
    (sample,) = result.samples
    objects, problems = sample.mask.objects(lambda r: (src / r).read_bytes(), (10, 10))
    assert problems == [] and [o.label for o in objects] == [1]


def test_without_a_data_yaml_lines_are_plain_boxes_and_backgrounds_keep_their_label_path(tmp_path):
    src = files(tmp_path, {"classes.txt": "a\n", "images/train/x.jpg": "",
                           "labels/train/x.txt": BOX, "images/train/y.jpg": ""})  # fmt: skip
    result = scan(src)
    x, y = result.samples
    objects, problems = x.mask.objects(lambda r: (src / r).read_bytes(), (10, 10))
    assert problems == [] and len(objects) == 1
    assert (x.mask.key, y.mask.key) == ("labels/train/x.txt", "labels/train/y.txt")
    assert y.mask.objects(lambda r: b"", (10, 10)) == ([], [])
    assert result.why == "YOLO: no data.yaml, 1 classes (classes.txt); images/ + labels/"


def test_a_split_asked_of_a_yolo_folder_with_splits_names_where_they_come_from(tmp_path):
    tree = {"images/train/x.jpg": "", "labels/train/x.txt": BOX, "classes.txt": "a\n"}
    folders_only = files(tmp_path / "folders", tree)
    with pytest.raises(SourceError, match=r"splits \(train\) from its YOLO split folders; drop"):
        scan(folders_only, split={"train": 0.5, "val": 0.5})
    with_yaml = files(tmp_path / "yaml", {**tree, "data.yaml": "train: images/train\nnames: [a]\n"})
    with pytest.raises(SourceError, match=r"splits \(train\) from its data.yaml splits; drop"):
        scan(with_yaml, split={"train": 0.5, "val": 0.5})


def test_a_lone_label_names_the_image_it_looked_for_under_nested_labels_folders(tmp_path):
    base = "x/labels/set"
    src = files(tmp_path, {"classes.txt": "a\n", f"{base}/images/train/a.jpg": "",
                           f"{base}/labels/train/a.txt": BOX,
                           f"{base}/labels/train/lost.txt": BOX})  # fmt: skip
    result = scan(src)
    assert [s.image for s in result.samples] == [f"{base}/images/train/a.jpg"]
    assert {r.path: r.reason for r in result.rejected} == {
        f"{base}/labels/train/lost.txt": "label file without an image (looked for "
        f"{base}/images/train/lost.*)"
    }
