"""The YOLO layout: data.yaml and folder detection, label files as objects, bad lines named.

Boxes are checked against Ultralytics' own `xywhn2xyxy` and polygons against its
`polygon2mask` (both transcribed below from ultralytics/utils/ops.py and data/utils.py).
"""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from packer.cli import pack_command
from packer.sources import AnnotationOptions, SourceError, scan
from tests.fixtures.yolo import DETECT, NAMES, SEGMENT, H, W, fill, polygon2mask, write, xywhn2xyxy


def objects_of(result, image: str, size=(W, H)):
    """objects() of the sample of `image`, reading files under the scan's root."""
    sample = next(s for s in result.samples if s.image == image)
    return sample.mask.objects(lambda rel: (result.root / rel).read_bytes(), size)


def test_a_yolo_folder_is_detection_with_names_in_yaml_order(tmp_path):
    result = scan(write(tmp_path, DETECT))
    assert (result.layout, result.task, result.class_names) == ("yolo", "detection", NAMES)
    assert [(s.image, s.split) for s in result.samples] == [
        ("images/train/a.jpg", "train"),
        ("images/train/b.jpg", "train"),
        ("images/train/empty.jpg", "train"),
        ("images/val/c.jpg", "val"),
    ]
    assert {r.path: r.reason for r in result.rejected} == {
        "labels/val/lost.txt": "label file without an image (looked for images/val/lost.*)"
    }
    assert objects_of(result, "images/train/empty.jpg") == ([], [])
    assert objects_of(result, "images/val/c.jpg") == ([], [])
    assert "1 image has no label file: background, no objects" in result.notes
    assert "data.yaml" in result.why and "box labels" in result.task_why


def test_boxes_are_ultralytics_xywhn2xyxy(tmp_path):
    rng = np.random.default_rng(0)
    rows = rng.uniform(0.05, 0.95, (20, 4)).astype(np.float32)
    rows[:, 2:] /= 4
    text = "".join(
        f"{i % 3} " + " ".join(f"{v:.6f}" for v in row) + "\n" for i, row in enumerate(rows)
    )
    result = scan(write(tmp_path, {**DETECT, "labels/train/a.txt": text}))
    objects, problems = objects_of(result, "images/train/a.jpg", (W, H))
    assert problems == []
    written = np.array([line.split()[1:] for line in text.splitlines()], np.float32)
    expected = xywhn2xyxy(written, W, H)
    np.testing.assert_array_equal(np.array([o.box for o in objects], np.float32), expected)
    assert [o.label for o in objects] == [i % 3 for i in range(20)]
    assert all(o.shape is None and not o.crowd for o in objects)


def test_names_as_a_dict_and_the_roboflow_export(tmp_path):
    files = {
        "data.yaml": "train: ../train/images\nval: ../valid/images\nnc: 3\n"
        "names: {2: cat, 0: zebra, 1: ant}\n",
        "train/images/a.jpg": None,
        "train/labels/a.txt": "2 0.5 0.5 0.5 0.5\n",
        "valid/images/b.png": None,
        "valid/labels/b.txt": "0 0.5 0.5 0.5 0.5\n",
    }
    result = scan(write(tmp_path, files))
    assert (result.layout, result.class_names) == ("yolo", NAMES)
    assert [(s.image, s.split) for s in result.samples] == [
        ("train/images/a.jpg", "train"),
        ("valid/images/b.png", "val"),
    ]
    assert objects_of(result, "train/images/a.jpg")[0][0].label == 2


def test_without_a_yaml_splits_come_from_folders_and_names_from_classes_txt(tmp_path):
    files = {k: v for k, v in DETECT.items() if k != "data.yaml"}
    src = write(tmp_path / "src", {**files, "classes.txt": "zebra\nant\ncat\n"})
    result = scan(src)
    assert (result.layout, result.class_names, result.split_source) == ("yolo", NAMES, "folders")
    (src / "classes.txt").unlink()
    with pytest.raises(SourceError, match=r"no class names: add a data\.yaml"):
        scan(src)
    (tmp_path / "n.names").write_text("a\nb\nc\n")
    named = scan(src, annotations=AnnotationOptions.given(None, classes=tmp_path / "n.names"))
    assert named.class_names == ["a", "b", "c"] and named.table.source == "n.names"


def test_a_yolo_folder_never_packs_as_classes(tmp_path):
    """Issue 28: images/ + labels/ packed as the classes `images` and `labels`."""
    files = {k: v for k, v in DETECT.items() if k != "data.yaml"}
    src = write(tmp_path, {**files, "obj.names": "zebra\nant\ncat\n"})
    for source in (src, write(tmp_path / "with_yaml", DETECT)):
        result = scan(source)
        assert result.layout == "yolo" and result.task == "detection"
        assert "images" not in (result.class_names or []) and "labels" not in result.class_names


def test_polygon_labels_give_instances_filled_as_polygon2mask(tmp_path):
    result = scan(write(tmp_path, SEGMENT))
    assert result.task == "instances" and "polygon labels" in result.task_why
    objects, problems = objects_of(result, "images/train/a.jpg")
    assert problems == [] and [o.label for o in objects] == [0, 2]
    lines = SEGMENT["labels/train/a.txt"].splitlines()
    for obj, line in zip(objects, lines, strict=True):
        segment = np.array(line.split()[1:], np.float32).reshape(-1, 2)
        segment[..., 0] *= W  # Ultralytics' Instances.denormalize, in float32
        segment[..., 1] *= H
        expected = polygon2mask((H, W), [segment])
        np.testing.assert_array_equal(fill(obj.shape, (W, H)), expected)
        assert obj.box == pytest.approx((*segment.min(0), *segment.max(0)))
        hull = np.array([[*segment.min(0) / (W, H), *(segment.max(0) - segment.min(0)) / (W, H)]])
        hull[:, :2] += hull[:, 2:] / 2  # segments2boxes gives xywh
        np.testing.assert_allclose(obj.box, xywhn2xyxy(hull, W, H)[0], atol=1e-4)
    # 0.29 * 100 is 28.999... in float64 but 29 in Ultralytics' float32: the fill follows it
    top_row = fill(objects[0].shape, (W, H))[6]
    assert (top_row[28], top_row[29]) == (0, 1)


def test_task_asked_for_polygons_and_boxes(tmp_path):
    boxes = write(tmp_path / "boxes", DETECT)
    polygons = write(tmp_path / "polygons", SEGMENT)
    as_boxes = scan(polygons, annotations=AnnotationOptions(task="detection"))
    objects, _ = objects_of(as_boxes, "images/train/a.jpg")
    assert as_boxes.task == "detection" and all(o.shape is None for o in objects)
    with pytest.raises(SourceError, match=r"YOLO gives detection, not instances \(box labels"):
        scan(boxes, annotations=AnnotationOptions(task="instances"))
    for task in ("segmentation", "classification"):
        with pytest.raises(SourceError, match=f"YOLO gives detection or instances, not {task}"):
            scan(polygons, annotations=AnnotationOptions(task=task))


def test_bad_lines_are_named_and_the_rest_kept(tmp_path):
    text = "\n".join(
        [
            "0 0.5 0.5 0.2 0.2",  # 1 good
            "0 0.5 0.5 0.2",  # 2 four fields
            "7 0.5 0.5 0.2 0.2",  # 3 class beyond the names
            "1 0.5 abc 0.2 0.2",  # 4 not a number
            "1 0.5 0.5 -0.2 0.2",  # 5 negative size
            "",  # 6 blank: skipped
            "2 0.5 0.5 0.2 0.2 0.3",  # 7 six fields
            "1.5 0.5 0.5 0.2 0.2",  # 8 a class that is no integer
            "2 nan 0.5 0.2 0.2",  # 9 not a number
            "2 0.1 0.1 0.3 0.3",  # 10 good
            "2 0.1 0.1 0.30 0.3",  # 11 the same numbers as line 10
            "0 12 30 4 8",  # 12 pixels, not fractions
            "1 0.5 1.01 0.1 0.1",  # 13 a centre below the image
        ]
    )
    result = scan(write(tmp_path, {**DETECT, "labels/train/a.txt": text}))
    objects, problems = objects_of(result, "images/train/a.jpg")
    assert [o.label for o in objects] == [0, 2]
    where = "labels/train/a.txt line"
    assert problems == [
        f"{where} 2: 4 fields; a box has 5 (cls cx cy w h), a polygon an odd number of 7 or "
        "more (cls x1 y1 x2 y2 x3 y3 ...)",
        f"{where} 3: class 7 is not one of the 3 names (0..2)",
        f"{where} 4: 'abc' is not a number",
        f"{where} 5: negative size (w -0.2, h 0.2)",
        f"{where} 7: 6 fields; a box has 5 (cls cx cy w h), a polygon an odd number of 7 or "
        "more (cls x1 y1 x2 y2 x3 y3 ...)",
        f"{where} 8: class 1.5 is not one of the 3 names (0..2)",
        f"{where} 9: 'nan' is not a number",
        f"{where} 11: the same as line 10 (Ultralytics drops duplicate labels)",
        f"{where} 12: 12 is outside 0..1 (YOLO coordinates are fractions of the image size)",
        f"{where} 13: 1.01 is outside 0..1 (YOLO coordinates are fractions of the image size)",
    ]
    assert (
        f"10 label lines in the 3 label files read will be left out (packing reads them all), "
        f"e.g. {problems[0]}"
    ) in result.notes  # what the dry run shows


def test_box_lines_among_polygons_are_named_under_instances(tmp_path):
    text = SEGMENT["labels/train/b.txt"] + "0 0.5 0.5 0.2 0.2\n1 0.1 0.1 0.5 -0.01 0.4 0.4\n"
    result = scan(write(tmp_path, {**SEGMENT, "labels/train/b.txt": text}))
    objects, problems = objects_of(result, "images/train/b.jpg")
    assert len(objects) == 1 and problems == [
        "labels/train/b.txt line 2: a box (5 fields) where instances need a polygon "
        "(cls x1 y1 x2 y2 ...)",
        "labels/train/b.txt line 3: -0.01 is outside 0..1 (YOLO coordinates are fractions of "
        "the image size)",
    ]


@pytest.mark.parametrize(
    ("yaml", "message"),
    [
        ("names: [a, b]\nnc: 3\ntrain: images/train\n", "nc is 3 but 2 names are given"),
        ("names: {0: a, 2: b}\ntrain: images/train\n", "needs class indices 0..1"),
        ("names: [a\ntrain: x\n", "cannot read data.yaml"),
        ("names: [a]\ntrain: elsewhere/train\n", "names no image folder that is under"),
    ],
)
def test_a_bad_data_yaml_is_one_line(tmp_path, yaml, message):
    with pytest.raises(SourceError, match=message):
        scan(write(tmp_path, {**DETECT, "data.yaml": yaml}))


def test_dry_run_says_layout_why_and_task(tmp_path):
    result = CliRunner().invoke(pack_command, [str(write(tmp_path / "y", SEGMENT)), "--dry-run"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[1] == "layout:  yolo (instances)"
    assert lines[2].startswith("found:   YOLO: data.yaml, 3 classes (data.yaml names); train")
    assert lines[3].startswith("task:    instances: auto: polygon labels (cls x1 y1 x2 y2 ...)")
    assert "--task detection packs their hull boxes only" in lines[3]
    assert "classes: 3: zebra, ant, cat" in result.output
    assert "labels/val/lost.txt: label file without an image" in result.output


def test_splits_as_image_lists_and_an_absolute_path(tmp_path):
    """Ultralytics' own COCO layout: `train: train2017.txt` listing ./images/train2017/..."""
    src = write(
        tmp_path / "coco",
        {
            "images/train2017/a.jpg": None,
            "images/train2017/b.jpg": None,
            "images/val2017/c.jpg": None,
            "labels/train2017/a.txt": "0 0.5 0.5 0.2 0.2\n",
            "train2017.txt": "./images/train2017/a.jpg\n./images/train2017/gone.jpg\n",
        },
    )
    (src / "data.yaml").write_text(
        f"path: {src}\ntrain: train2017.txt\nval: images/val2017\ntest: test-dev2017.txt\n"
        "names: [zebra]\n"
    )
    result = scan(src)
    assert [(s.image, s.split) for s in result.samples] == [
        ("images/train2017/a.jpg", "train"),
        ("images/val2017/c.jpg", "val"),
    ]
    assert {r.path: r.reason for r in result.rejected} == {
        "images/train2017/gone.jpg": "listed in train2017.txt line 2 but missing",
        "images/train2017/b.jpg": "outside the YOLO image folders (not in any split of "
        "data.yaml or images/ folder)",
    }
    assert any("not under SRC, not packed: test: test-dev2017.txt" in n for n in result.notes)


def test_pose_labels_give_their_boxes(tmp_path):
    """kpt_shape [2, 3]: cls cx cy w h then 2 keypoints of x, y, visibility (11 fields, which
    would otherwise read as a polygon)."""
    pose = {
        **DETECT,
        "data.yaml": DETECT["data.yaml"] + "kpt_shape: [2, 3]\n",
        "labels/train/a.txt": "1 0.5 0.5 0.2 0.4 0.45 0.4 2 0.55 0.6 1\n0 0.5 0.5 0.2 0.4\n",
    }
    result = scan(write(tmp_path, pose), annotations=AnnotationOptions(task="detection"))
    assert result.task == "detection" and "keypoints are not packed" in result.task_why
    objects, problems = objects_of(result, "images/train/a.jpg")
    expected = xywhn2xyxy(np.array([[0.5, 0.5, 0.2, 0.4]], np.float32), W, H)[0]
    assert [o.label for o in objects] == [1] and objects[0].box == tuple(expected.tolist())
    assert problems == [
        "labels/train/a.txt line 2: 5 fields; a pose line has 11 (cls cx cy w h, keypoints)"
    ]
    with pytest.raises(
        SourceError, match=r"YOLO gives keypoints or detection, not instances \(pose labels"
    ):
        scan(tmp_path, annotations=AnnotationOptions(task="instances"))
