"""YOLO labels and data.yaml at their edges, against Ultralytics' definitions (its label
format: a class index 0..nc-1 and coordinates that are fractions 0..1 of the image, both ends
included; `xywhn2xyxy`; `polygon2mask`, which truncates points to int32; `check_det_dataset`'s
names/nc, kpt_shape [K, 2 or 3], and split entries that are a folder, a list of folders or a
.txt list whose `./` lines are relative to the list's own folder)."""

from __future__ import annotations

import numpy as np
import pytest

from packer.packing.objects import filled
from packer.sources import AnnotationOptions, SourceError, scan
from packer.sources.yolo import _label_of
from packer.sources.yolo_labels import YoloObjects, line_kind, text_kinds
from packer.sources.yolo_yaml import keypoint_fields
from packer.yaml_names import yaml_names
from tests.fixtures.yolo import DETECT, NAMES, H, W, polygon2mask, write, xywhn2xyxy


def read_lines(text: str, classes: int = 3, task: str = "detection", keypoints: int = 0,
               size=(W, H)):  # fmt: skip
    recipe = YoloObjects("l.txt", classes, task, "", ("l.txt",), keypoints)
    return recipe.objects(lambda _: text.encode(), size)


def objects_of(result, image: str, size=(W, H)):
    sample = next(s for s in result.samples if s.image == image)
    return sample.mask.objects(lambda rel: (result.root / rel).read_bytes(), size)


def test_a_class_index_equal_to_the_number_of_names_is_left_out():
    objects, problems = read_lines("2 0.5 0.5 0.2 0.2\n3 0.5 0.5 0.2 0.2\n2.0 0.4 0.4 0.1 0.1\n"
                                   "-1 0.5 0.5 0.2 0.2\n0 0.5 0.5 0.3 0.3\n")  # fmt: skip
    assert [o.label for o in objects] == [2, 2, 0]  # "2.0" is class 2, as float() reads it
    assert problems == [
        "l.txt line 2: class 3 is not one of the 3 names (0..2)",
        "l.txt line 4: class -1 is not one of the 3 names (0..2)",
    ]


def test_a_recipe_made_without_keypoints_reads_plain_boxes():
    recipe = YoloObjects("l.txt", 2, "detection", "", ("l.txt",))
    objects, problems = recipe.objects(lambda _: b"1 0.5 0.5 0.2 0.2\n", (W, H))
    assert problems == [] and [o.label for o in objects] == [1]
    assert YoloObjects("l.txt", 2, "detection", "").objects(lambda _: b"", (W, H)) == ([], [])


def test_coordinates_of_exactly_0_and_1_are_inside_the_image():
    text = "0 0.5 0.5 1 1\n1 1 1 0 0\n2 0 0 0.5 0.5\n0 1.0000001 0.5 0.1 0.1\n1 0.5 0.5 0 -0.0001\n"
    objects, problems = read_lines(text)
    assert problems == [
        "l.txt line 4: 1.0000001 is outside 0..1 (YOLO coordinates are fractions of the image "
        "size)",
        "l.txt line 5: negative size (w 0, h -0.0001)",
    ]
    rows = np.array([[0.5, 0.5, 1, 1], [1, 1, 0, 0], [0, 0, 0.5, 0.5]], np.float32)
    expected = xywhn2xyxy(rows, W, H)
    np.testing.assert_array_equal(np.array([o.box for o in objects], np.float32), expected)
    assert objects[0].box == (0.0, 0.0, float(W), float(H))


def test_a_polygon_at_the_image_corner_and_its_truncated_points():
    """Points at 1.0 are the image's far edge; points become int32 by truncation, as
    `polygon2mask` makes them (29.9 -> 29, never 30)."""
    line = "1 0.299 0.105 0.999 0.105 1 1 0.299 0.999\n"
    objects, problems = read_lines(line, task="instances")
    assert problems == [] and len(objects) == 1
    (obj,) = objects
    values = np.array(line.split()[1:], np.float32).reshape(-1, 2)
    points = values * np.array([W, H], np.float32)
    assert obj.box == tuple(float(v) for v in (*points.min(0), *points.max(0)))
    assert obj.shape[0] == "fill"
    np.testing.assert_array_equal(np.array(obj.shape[1][0], np.float32), points.ravel())
    mine = filled(obj.shape, obj.box, (W, H))
    theirs = polygon2mask((H, W), [points.ravel()])
    np.testing.assert_array_equal(mine, theirs)
    rounded = polygon2mask((H, W), [np.round(points).ravel()])
    assert not np.array_equal(mine, rounded)  # the polygon does tell truncation from rounding


def test_a_box_fills_its_own_pixels_when_there_is_no_polygon():
    plane = filled(None, (-2.4, 1.6, 3.5, 4.4), (6, 5))
    expected = np.zeros((5, 6), np.uint8)
    expected[2:4, 0:4] = 1  # rounded corners (-2, 2, 4, 4), clipped at 0
    np.testing.assert_array_equal(plane, expected)


def test_detection_from_polygons_keeps_their_hull_and_no_shape():
    objects, _ = read_lines("0 0.1 0.2 0.5 0.9 0.3 0.4\n", task="detection")
    assert objects[0].shape is None
    np.testing.assert_allclose(objects[0].box, (0.1 * W, 0.2 * H, 0.5 * W, 0.9 * H), rtol=1e-6)


def test_line_kinds_by_field_count():
    assert [line_kind(n) for n in (4, 5, 6, 7, 8, 9)] == [
        None, "box", None, "polygon", None, "polygon"]  # fmt: skip
    assert [line_kind(n, 6) for n in (5, 7, 11, 12)] == [None, None, "box", None]
    assert text_kinds("0 1 1 1 1\n\n0 1 1 1 1 1 1\n0 1\n") == {"box", "polygon"}
    assert text_kinds("0 1 1 1 1 1 1 1 1 1 1\n", 6) == {"box"}


@pytest.mark.parametrize(
    ("shape", "fields"), [([3, 2], 6), ([2, 3], 6), ([1, 2], 2), ([17, 3], 51)]
)
def test_kpt_shape_with_two_or_three_values_a_point(shape, fields):
    assert keypoint_fields({"kpt_shape": shape}, "data.yaml") == fields
    assert keypoint_fields({}, "data.yaml") == 0


@pytest.mark.parametrize("shape", [[0, 2], [3, 1], [3, 4], [3], [3, 2, 1], "3,2"])
def test_a_kpt_shape_that_is_not_k_by_2_or_3_is_refused(shape):
    with pytest.raises(SourceError, match="kpt_shape must be"):
        keypoint_fields({"kpt_shape": shape}, "data.yaml")


def test_pose_labels_with_two_values_a_keypoint_give_their_boxes(tmp_path):
    """kpt_shape [3, 2]: cls cx cy w h, then x y of three points: 11 fields (which without
    kpt_shape would be a polygon)."""
    pose = {
        **DETECT,
        "data.yaml": DETECT["data.yaml"] + "kpt_shape: [3, 2]\n",
        "labels/train/a.txt": "2 0.5 0.5 0.2 0.4 0.45 0.4 0.55 0.6 0.5 0.5\n"
        "1 0.5 0.5 0.2 0.4 0.45 0.4 2 0.55 0.6 1 0.5 0.5 2\n",
    }
    result = scan(write(tmp_path, pose), annotations=AnnotationOptions(task="detection"))
    assert result.task == "detection"
    objects, problems = objects_of(result, "images/train/a.jpg")
    expected = xywhn2xyxy(np.array([[0.5, 0.5, 0.2, 0.4]], np.float32), W, H)[0]
    assert [o.label for o in objects] == [2] and objects[0].box == tuple(expected.tolist())
    assert problems == [
        "labels/train/a.txt line 2: 14 fields; a pose line has 11 (cls cx cy w h, keypoints)"
    ]


def test_pose_keypoints_outside_the_image_do_not_drop_the_box():
    """Only the box fields of a pose line are read (Ultralytics keeps keypoints as given)."""
    objects, problems = read_lines("0 0.5 0.5 0.2 0.2 1.5 -0.5\n", keypoints=2)
    assert problems == [] and [o.label for o in objects] == [0]


@pytest.mark.parametrize(
    ("config", "names"),
    [
        ({"nc": 2}, ["class_0", "class_1"]),
        ({"nc": 1}, ["class_0"]),
        ({"names": ["a", "b"], "nc": 2}, ["a", "b"]),
        ({"names": {"1": "b", "0": "a"}}, ["a", "b"]),
        ({"names": ["only"]}, ["only"]),
    ],
)
def test_names_and_nc(config, names):
    assert yaml_names(config, "data.yaml") == names


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"nc": 0}, "no names and no class count nc"),
        ({"nc": -1}, "no names and no class count nc"),
        ({"nc": "2"}, "no names and no class count nc"),
        ({"names": [], "nc": 0}, "names must be a list or a mapping"),
        ({"names": ["a"], "nc": 0}, "nc is 0 but 1 names are given"),
        ({"names": {"x": "a"}}, "names' keys must be class indices"),
        ({"names": {1: "a", 2: "b"}}, r"needs class indices 0\.\.1, found \[1, 2\]"),
        ({"names": "a b"}, "names must be a list or a mapping"),
    ],
)
def test_names_and_nc_that_name_no_classes_are_refused(config, message):
    with pytest.raises(SourceError, match=message):
        yaml_names(config, "data.yaml")


def test_nc_0_in_a_data_yaml_is_refused(tmp_path):
    with pytest.raises(SourceError, match="no names and no class count nc"):
        scan(write(tmp_path, {**DETECT, "data.yaml": "train: images/train\nnc: 0\n"}))


def test_a_split_given_as_a_list_of_folders(tmp_path):
    files = {
        "data.yaml": "train: [images/a, images/b]\nval: [images/c]\nnames: [zebra, ant, cat]\n",
        "images/a/1.jpg": None,
        "images/b/2.jpg": None,
        "images/c/3.jpg": None,
        "images/d/4.jpg": None,  # in no split
        "labels/a/1.txt": "0 0.5 0.5 0.2 0.2\n",
        "labels/b/2.txt": "1 0.5 0.5 0.2 0.2\n",
        "labels/c/3.txt": "2 0.5 0.5 0.2 0.2\n",
    }
    result = scan(write(tmp_path, files))
    assert [(s.image, s.split) for s in result.samples] == [
        ("images/a/1.jpg", "train"),
        ("images/b/2.jpg", "train"),
        ("images/c/3.jpg", "val"),
    ]
    assert [objects_of(result, s.image)[0][0].label for s in result.samples] == [0, 1, 2]
    assert [r.path for r in result.rejected] == ["images/d/4.jpg"]
    assert result.class_names == NAMES


def test_a_list_file_in_a_sub_folder_names_images_relative_to_its_own_folder(tmp_path):
    src = write(
        tmp_path / "src",
        {
            "images/train/a.jpg": None,
            "images/train/b.jpg": None,
            "images/val/c.jpg": None,
            "labels/train/a.txt": "0 0.5 0.5 0.2 0.2\n",
            "labels/train/b.txt": "1 0.5 0.5 0.2 0.2\n",
            "lists/train.txt": "./../images/train/a.jpg\n\n  ./../images/train/b.jpg  \n"
            "./../../outside.jpg\n./notes.md\n./../images/train/gone.jpg\n",
            "data.yaml": "train: lists/train.txt\nval: images/val\nnames: [zebra, ant, cat]\n",
        },
    )
    result = scan(src)
    assert [(s.image, s.split) for s in result.samples] == [
        ("images/train/a.jpg", "train"),
        ("images/train/b.jpg", "train"),
        ("images/val/c.jpg", "val"),
    ]
    assert {r.path: r.reason for r in result.rejected} == {
        "lists/train.txt line 4": "not an image under SRC: ./../../outside.jpg",
        "lists/train.txt line 5": "not an image under SRC: ./notes.md",
        "images/train/gone.jpg": "listed in lists/train.txt line 6 but missing",
    }


def test_entries_are_found_relative_to_path_or_the_yaml_folder(tmp_path):
    """`path: sub` makes `images/train` mean `sub/images/train`; Roboflow's `../x` is read as
    `x` when `../x` is not under SRC."""
    src = write(
        tmp_path / "src",
        {
            "sub/images/train/a.jpg": None,
            "sub/labels/train/a.txt": "0 0.5 0.5 0.2 0.2\n",
            "valid/images/b.jpg": None,
            "valid/labels/b.txt": "0 0.5 0.5 0.2 0.2\n",
            "data.yaml": "path: sub\ntrain: images/train\nval: ../valid/images\nnames: [z]\n",
        },
    )
    result = scan(src)
    assert [(s.image, s.split) for s in result.samples] == [
        ("sub/images/train/a.jpg", "train"),
        ("valid/images/b.jpg", "val"),
    ]


@pytest.mark.parametrize(
    ("image", "label"),
    [
        ("images/train/a.jpg", "labels/train/a.txt"),
        ("train/images/a.b.jpg", "train/labels/a.b.txt"),
        ("images/x/images/a.png", "images/x/labels/a.txt"),  # the last images/ only
        ("pics/a.jpg", "pics/a.txt"),  # no images/ folder: beside the image
        ("myimages/a.jpg", "myimages/a.txt"),
    ],
)
def test_label_paths_are_ultralytics_img2label_paths(image, label):
    assert _label_of(image) == label


def test_a_task_given_overrides_the_label_kinds(tmp_path):
    result = scan(write(tmp_path, DETECT), annotations=AnnotationOptions(task="detection"))
    assert result.task == "detection" and not result.task_why.startswith("auto")


def test_an_absolute_path_and_an_absolute_entry_under_src(tmp_path):
    src = write(
        tmp_path / "src",
        {
            "sub/images/train/a.jpg": None,
            "sub/labels/train/a.txt": "0 0.5 0.5 0.2 0.2\n",
            "val/b.jpg": None,
            "val/b.txt": "0 0.5 0.5 0.2 0.2\n",
        },
    )
    (src / "data.yaml").write_text(
        f"path: {src / 'sub'}\ntrain: images/train\nval: {src / 'val'}\nnames: [zebra]\n"
    )
    result = scan(src)
    assert [(s.image, s.split) for s in result.samples] == [
        ("sub/images/train/a.jpg", "train"),
        ("val/b.jpg", "val"),
    ]
    assert not [n for n in result.notes if "not under SRC" in n]


def test_an_entry_of_dot_is_the_yaml_folder_itself(tmp_path):
    files = {
        "data.yaml": "train: .\nnames: [zebra]\n",
        "c.jpg": None,
        "c.txt": "0 0.5 0.5 0.2 0.2\n",
    }
    result = scan(write(tmp_path, files))
    assert [(s.image, s.split) for s in result.samples] == [("c.jpg", "train")]
    assert "c.txt" not in [r.path for r in result.rejected]  # a label beside its image


@pytest.mark.parametrize("path", ["null", "3", "''"])
def test_a_path_that_names_no_folder_leaves_entries_relative_to_the_yaml(tmp_path, path):
    yaml = f"path: {path}\ntrain: images/train\nnames: [zebra, ant, cat]\n"
    result = scan(write(tmp_path, {**DETECT, "data.yaml": yaml}))
    assert [s.image for s in result.samples][:2] == ["images/train/a.jpg", "images/train/b.jpg"]


def test_an_entry_naming_a_missing_list_in_a_folder_that_is_there_is_noted(tmp_path):
    yaml = "train: images/train\ntest: images/missing.txt\nnames: [zebra, ant, cat]\n"
    result = scan(write(tmp_path, {**DETECT, "data.yaml": yaml}))
    assert "data.yaml: not under SRC, not packed: test: images/missing.txt" in result.notes
