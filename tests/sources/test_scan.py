"""Tests for packer.sources: layout detection, pairing, splits and rejections from file names."""

from __future__ import annotations

import os
import random
from collections import Counter
from pathlib import Path

import pytest

from packer.sources import (
    IMAGE_EXTENSIONS,
    LAYOUTS,
    Rejection,
    Sample,
    SourceError,
    assign_split,
    parse_split_spec,
    scan,
)
from tests.fixtures.packs import SHARED_DATA


def make(root: Path, *names: str) -> Path:
    """Create empty files (this module only reads names) and return root."""
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    return root


def reasons(result) -> dict[str, str]:
    """Rejections as path -> reason, for compact assertions."""
    return {r.path: r.reason for r in result.rejected}


def test_public_constants():
    assert ".jpeg" in IMAGE_EXTENSIONS and ".tiff" in IMAGE_EXTENSIONS
    assert LAYOUTS == (
        "auto",
        "coco",
        "coco-cvat",
        "coco-roboflow",
        "coco-labelstudio",
        "coco-panoptic",
        "cityscapes",
        "ade20k",
        "yolo",
        "voc",
        "hf-datasets",
        "mask-folders",
        "class-folders",
        "list",
    )


class TestClassFolders:
    def test_flat_class_folders(self, tmp_path):
        make(tmp_path, "dog/b.png", "cat/a.jpg", "cat/c.JPG", "class_dict.csv", "README", "a.lst")
        result = scan(tmp_path)
        assert (result.layout, result.task, result.split_source) == (
            "class-folders",
            "classification",
            "single",
        )
        assert result.root == tmp_path.resolve()
        assert result.class_names == ["cat", "dog"]
        assert result.samples == [
            Sample("cat/a.jpg", "train", label=0),
            Sample("cat/c.JPG", "train", label=0),
            Sample("dog/b.png", "train", label=1),
        ]
        assert result.rejected == []
        assert result.notes == [
            "SRC also holds a.lst; pass a list file as SRC to pack from it instead"
        ]

    def test_split_folders_keep_their_names_and_share_class_indices(self, tmp_path):
        make(tmp_path, "train/cat/1.jpg", "train/dog/2.jpg", "Val/dog/3.gif", "Val/bird/4.png")
        result = scan(tmp_path)
        assert result.split_source == "folders"
        assert result.class_names == ["bird", "cat", "dog"]
        assert [(s.split, s.image, s.label) for s in result.samples] == [
            ("Val", "Val/bird/4.png", 0),
            ("Val", "Val/dog/3.gif", 2),
            ("train", "train/cat/1.jpg", 1),
            ("train", "train/dog/2.jpg", 2),
        ]
        assert any("Val/ has no images of classes cat" in n for n in result.notes)

    def test_wrong_depth_and_non_images_are_rejected_hidden_ignored(self, tmp_path):
        make(
            tmp_path,
            "train/cat/1.jpg",
            "train/cat/notes.txt",
            "train/cat/noext",
            "train/loose.jpg",
            "train/labels.csv",
            "stray.png",
            "extra/cat/5.jpg",
            "train/cat/.DS_Store",
            "train/.cache/cat/9.jpg",
            ".git/x.png",
        )
        result = scan(tmp_path)
        assert [s.image for s in result.samples] == ["train/cat/1.jpg"]
        assert reasons(result) == {
            "extra/cat/5.jpg": "outside the split folders (train/)",
            "stray.png": "image outside any class folder",
            "train/cat/noext": "not an image file type (no extension)",
            "train/cat/notes.txt": "not an image file type (.txt)",
            "train/loose.jpg": "image outside any class folder",
        }

    def test_nested_images_inside_a_class_folder_count_like_keras(self, tmp_path):
        make(tmp_path, "cat/sub/a.jpg", "dog/b.jpg")
        result = scan(tmp_path)
        assert [(s.image, s.label) for s in result.samples] == [
            ("cat/sub/a.jpg", 0),
            ("dog/b.jpg", 1),
        ]

    def test_empty_class_folder_keeps_its_index(self, tmp_path):
        make(tmp_path, "a/1.jpg", "c/2.jpg")
        (tmp_path / "b").mkdir()
        result = scan(tmp_path)
        assert result.class_names == ["a", "b", "c"]
        assert [s.label for s in result.samples] == [0, 2]
        assert "class folders without images (indices stay reserved): b" in result.notes

    def test_split_argument_contradicts_split_folders(self, tmp_path):
        make(tmp_path, "train/cat/1.jpg", "val/cat/2.jpg")
        with pytest.raises(SourceError, match=r"drop split=\.\.\."):
            scan(tmp_path, split={"train": 0.5, "val": 0.5})


class TestMaskFolders:
    def test_camvid_style_with_rejections(self, tmp_path):
        make(
            tmp_path,
            "train/a.png",
            "train/b.png",
            "trainannot/a.png",
            "trainannot/orphan.png",
            "val/c.png",
            "valannot/c.png",
            "class_dict.csv",
        )
        result = scan(tmp_path)
        assert (result.layout, result.task, result.split_source) == (
            "mask-folders (X/ + Xannot/)",
            "segmentation",
            "folders",
        )
        assert result.class_names is None
        assert result.samples == [
            Sample("train/a.png", "train", mask="trainannot/a.png"),
            Sample("val/c.png", "val", mask="valannot/c.png"),
        ]
        assert reasons(result) == {
            "train/b.png": "no mask found for this image (looked for trainannot/b.png)",
            "trainannot/orphan.png": "no image found for this mask (looked for train/orphan.*)",
        }

    @pytest.mark.parametrize(
        "mask_dir", ["train_labels", "train_label", "trainlabels", "train_masks"]
    )
    def test_other_mask_folder_suffixes(self, tmp_path, mask_dir):
        make(tmp_path, "train/a.jpg", f"{mask_dir}/a.png")
        result = scan(tmp_path)
        assert result.layout == f"mask-folders (X/ + X{mask_dir[5:]}/)"
        assert result.samples == [Sample("train/a.jpg", "train", mask=f"{mask_dir}/a.png")]

    def test_detects_mask_suffix(self, tmp_path):
        make(
            tmp_path,
            "train/0001TP_006690.png",
            "train/0001TP_006720.png",
            "train_labels/0001TP_006690_L.png",
            "train_labels/0001TP_006720_L.png",
            "train_labels/0001TP_009999_L.png",
        )
        result = scan(tmp_path)
        assert [s.mask for s in result.samples] == [
            "train_labels/0001TP_006690_L.png",
            "train_labels/0001TP_006720_L.png",
        ]
        assert any("'_L'" in n for n in result.notes)
        assert reasons(result) == {
            "train_labels/0001TP_009999_L.png": (
                "no image found for this mask (looked for train/0001TP_009999.*)"
            )
        }

    def test_two_candidate_mask_folders_are_refused(self, tmp_path):
        make(tmp_path, "train/a.jpg", "trainannot/a.png", "train_labels/a.png")
        with pytest.raises(SourceError, match="several candidate mask folders"):
            scan(tmp_path)
        assert len(scan(tmp_path, masks=tmp_path / "trainannot").samples) == 1

    def test_explicit_mask_suffix(self, tmp_path):
        make(tmp_path, "images/x.jpg", "masks/x_mask.png", "masks/y.png")
        result = scan(tmp_path, mask_suffix="_mask")
        assert result.samples == [Sample("images/x.jpg", "train", mask="masks/x_mask.png")]
        assert "does not end with the mask suffix '_mask'" in reasons(result)["masks/y.png"]

    def test_image_mask_pairs_at_any_depth_with_spaces(self, tmp_path):
        make(
            tmp_path,
            "Tile 1/images/image_part_001.jpg",
            "Tile 1/masks/image_part_001.png",
            "Tile 2/images/image_part_001.jpg",
            "Tile 2/masks/image_part_001.png",
            "deep/er/Imgs/p (1).jpg",
            "deep/er/Masks/p (1).png",
            "class_dict.csv",
            "classes.json",
        )
        result = scan(tmp_path)
        assert result.layout == "mask-folders (images/ + masks/, imgs/ + masks/)"
        assert [s.mask for s in result.samples] == [
            "Tile 1/masks/image_part_001.png",
            "Tile 2/masks/image_part_001.png",
            "deep/er/Masks/p (1).png",
        ]
        assert result.split_source == "single" and result.rejected == []

    def test_split_folder_above_images_masks(self, tmp_path):
        make(tmp_path, "train/images/a.jpg", "train/masks/a.png", "train/preview.jpg")
        make(tmp_path, "val/images/b.jpg", "val/masks/b.png")
        result = scan(tmp_path)
        assert [(s.split, s.image) for s in result.samples] == [
            ("train", "train/images/a.jpg"),
            ("val", "val/images/b.jpg"),
        ]
        assert "not inside an image/mask folder pair" in reasons(result)["train/preview.jpg"]

    def test_non_image_and_same_stem_files_in_pair_folders(self, tmp_path):
        make(tmp_path, "images/a.jpg", "images/a.png", "images/notes.txt", "masks/a.png")
        result = scan(tmp_path)
        assert result.samples == [Sample("images/a.jpg", "train", mask="masks/a.png")]
        assert set(reasons(result)) == {"images/a.png", "images/notes.txt"}

    def test_voc_notes_and_image_sets(self, tmp_path):
        make(tmp_path, *(f"VOC/JPEGImages/{i}.jpg" for i in range(6)))
        make(tmp_path, *(f"VOC/SegmentationClass/{i}.png" for i in (0, 1, 2)))
        make(tmp_path, "VOC/SegmentationObject/0.png", "VOC/Annotations/0.xml")
        result = scan(tmp_path / "VOC")
        assert result.layout == "mask-folders (JPEGImages/ + SegmentationClass/)"
        assert len(result.samples) == 3 and result.rejected == []
        assert result.split_source == "single"
        assert "3 images in JPEGImages/ have no mask and are not part of the segmentation set" in (
            result.notes
        )
        assert any("SegmentationObject/ (1 images)" in n for n in result.notes)
        sets = tmp_path / "VOC/ImageSets/Segmentation"
        sets.mkdir(parents=True)
        (sets / "train.txt").write_text("0\n1\n")
        (sets / "val.txt").write_text("2\n")
        (sets / "trainval.txt").write_text("0\n1\n2\n")
        result = scan(tmp_path / "VOC")
        assert result.split_source == "folders"
        assert [(s.split, s.image) for s in result.samples] == [
            ("train", "JPEGImages/0.jpg"),
            ("train", "JPEGImages/1.jpg"),
            ("val", "JPEGImages/2.jpg"),
        ]
        assert any("trainval.txt" in n for n in result.notes)

    def test_voc_aug_masks_only_without_segmentation_class(self, tmp_path):
        make(tmp_path, "JPEGImages/a.jpg", "JPEGImages/b.jpg", "SegmentationClassAug/a.png")
        assert scan(tmp_path).layout == "mask-folders (JPEGImages/ + SegmentationClassAug/)"
        make(tmp_path, "SegmentationClass/b.png")
        assert [s.mask for s in scan(tmp_path).samples] == ["SegmentationClass/b.png"]

    def test_explicit_masks_inside_and_beside_src(self, tmp_path):
        make(tmp_path, "data/train/a.jpg", "data/gt/train/a.png", "data/readme.txt")
        result = scan(tmp_path / "data", masks=tmp_path / "data/gt")
        assert result.layout == "mask-folders (--masks)"
        assert result.samples == [Sample("train/a.jpg", "train", mask="gt/train/a.png")]
        assert result.rejected == []
        make(tmp_path, "pics/b.jpg", "labels/b.png")
        result = scan(tmp_path / "pics", masks=tmp_path / "labels")
        assert result.root == tmp_path.resolve()
        assert result.samples == [Sample("pics/b.jpg", "train", mask="labels/b.png")]


class TestSplits:
    def test_parse_split_spec(self):
        assert parse_split_spec("train=0.9, val=0.1") == {"train": 0.9, "val": 0.1}
        for bad in ["train=0.9", "train=1.1,val=-0.1", "train", "1x=1", "a=0.5,a=0.5", "a=x"]:
            with pytest.raises(ValueError):
                parse_split_spec(bad)

    def test_hash_split_is_stable_and_respects_fractions(self, tmp_path):
        fractions = {"train": 0.8, "val": 0.1, "test": 0.1}
        names = [f"img_{i:05d}.jpg" for i in range(2000)]
        counts = Counter(assign_split(name, fractions) for name in names)
        assert abs(counts["train"] - 1600) < 100 and abs(counts["val"] - 200) < 60
        make(tmp_path, *(f"cat/{n}" for n in names[:50]), *(f"dog/{n}" for n in names[:50]))
        before = {s.image: s.split for s in scan(tmp_path, split=fractions).samples}
        make(tmp_path, *(f"cat/{n}" for n in names[50:100]), "bird/x.jpg")
        after = scan(tmp_path, split=fractions)
        assert after.split_source == "hash"
        assert {s.image: s.split for s in after.samples if s.image in before} == before

    def test_mixed_split_and_unsplit_mask_samples(self, tmp_path):
        make(tmp_path, "train/images/a.jpg", "train/masks/a.png", "images/b.jpg", "masks/b.png")
        result = scan(tmp_path)
        assert [s.image for s in result.samples] == ["train/images/a.jpg"]
        assert "not inside a split folder" in reasons(result)["images/b.jpg"]


class TestLists:
    def test_lst_with_float_labels_and_missing_files(self, tmp_path):
        make(tmp_path, "imgs/a.jpg", "imgs/b b.jpg")
        lst = tmp_path / "data.lst"
        lst.write_text(
            "0\t1.000000\timgs/a.jpg\n1\t3.000000\timgs/b b.jpg\n2\t0.0\timgs/gone.jpg\n"
        )
        result = scan(lst)
        assert (result.layout, result.task, result.root) == (
            "list (.lst)",
            "classification",
            tmp_path,
        )
        assert result.class_names == ["0", "1", "2", "3"]
        assert [(s.image, s.label) for s in result.samples] == [
            ("imgs/a.jpg", 1),
            ("imgs/b b.jpg", 3),
        ]
        assert result.rejected == [
            Rejection("imgs/gone.jpg", "listed in data.lst line 3 but missing")
        ]

    @pytest.mark.parametrize(
        ("line", "message"), [("0\t1\t2\ta.jpg", "multi-label"), ("0\ta.jpg", "im2rec")]
    )
    def test_lst_format_errors(self, tmp_path, line, message):
        (tmp_path / "x.lst").write_text(line + "\n")
        with pytest.raises(SourceError, match=message):
            scan(tmp_path / "x.lst")

    def test_csv_with_class_names_and_header(self, tmp_path):
        make(tmp_path, "x/1.jpg", "x/2.jpg", "x/3.jpg")
        (tmp_path / "list.csv").write_text(
            "filename,label\nx/1.jpg,zebra\nx/2.jpg,ant\nx/3.jpg,zebra\nx/1.jpg,ant\nx/n.txt,ant\n"
        )
        result = scan(tmp_path / "list.csv", split={"train": 0.5, "val": 0.5})
        assert result.layout == "list (.csv)" and result.split_source == "hash"
        assert result.class_names == ["ant", "zebra"]
        assert sorted((s.image, s.label) for s in result.samples) == [
            ("x/1.jpg", 1),
            ("x/2.jpg", 0),
            ("x/3.jpg", 1),
        ]
        assert set(reasons(result)) == {"x/1.jpg", "x/n.txt"}

    def test_csv_with_integer_labels_without_header(self, tmp_path):
        make(tmp_path, "a.jpg", "b.jpg")
        (tmp_path / "l.csv").write_text("a.jpg,0\nb.jpg,2\n../c.jpg,1\n")
        result = scan(tmp_path / "l.csv", layout="list")
        assert result.class_names == ["0", "1", "2"]
        assert [s.label for s in result.samples] == [0, 2]
        assert "leaves the list file's folder" in reasons(result)["../c.jpg"]

    def test_csv_image_mask_list(self, tmp_path):
        make(tmp_path, "i/a.jpg", "m/a.png", "i/b.jpg")
        (tmp_path / "seg.csv").write_text("image,mask\ni/a.jpg,m/a.png\ni/b.jpg,m/b.png\n")
        result = scan(tmp_path / "seg.csv")
        assert result.task == "segmentation" and result.class_names is None
        assert result.samples == [Sample("i/a.jpg", "train", mask="m/a.png")]
        assert "m/b.png" in reasons(result)["i/b.jpg"]

    def test_list_options_contradict(self, tmp_path):
        make(tmp_path, "a.jpg")
        (tmp_path / "l.csv").write_text("a.jpg,0\n")
        with pytest.raises(SourceError):
            scan(tmp_path / "l.csv", layout="class-folders")
        with pytest.raises(SourceError):
            scan(tmp_path / "l.csv", masks=tmp_path)
        with pytest.raises(SourceError, match="file itself as SRC"):
            scan(tmp_path, layout="list")


class TestRobustness:
    def test_symlink_loop_terminates(self, tmp_path):
        make(tmp_path, "cat/a.jpg", "dog/b.jpg")
        os.symlink(tmp_path, tmp_path / "cat" / "loop")
        os.symlink("self", tmp_path / "dog" / "self")
        result = scan(tmp_path)
        assert [s.image for s in result.samples] == ["cat/a.jpg", "dog/b.jpg"]
        assert "symlink loop" in reasons(result)["cat/loop"]
        assert "broken or looping" in reasons(result)["dog/self"]

    def test_symlinked_folder_is_followed(self, tmp_path):
        make(tmp_path, "elsewhere/a.jpg", "src/dog/b.jpg")
        os.symlink(tmp_path / "elsewhere", tmp_path / "src" / "cat")
        assert [s.image for s in scan(tmp_path / "src").samples] == ["cat/a.jpg", "dog/b.jpg"]

    @pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads anything")
    def test_unreadable_folder_is_rejected(self, tmp_path):
        make(tmp_path, "cat/a.jpg", "dog/b.jpg")
        (tmp_path / "dog").chmod(0)
        try:
            result = scan(tmp_path)
        finally:
            (tmp_path / "dog").chmod(0o755)
        assert "cannot read this folder" in reasons(result)["dog"]

    def test_unicode_spaces_and_parentheses(self, tmp_path):
        make(
            tmp_path,
            "Größe ü/bild (1).jpg",
            "日本/写真 2.png",
            "images/é (2).jpg",
            "masks/é (2).png",
        )
        result = scan(tmp_path, layout="class-folders")
        assert result.class_names == ["Größe ü", "images", "masks", "日本"]
        assert "Größe ü/bild (1).jpg" in {s.image for s in result.samples}
        result = scan(tmp_path, layout="mask-folders")
        assert result.samples == [Sample("images/é (2).jpg", "train", mask="masks/é (2).png")]

    def test_order_is_deterministic(self, tmp_path):
        names = [f"{c}/{i}.jpg" for c in ("b", "a", "c") for i in range(30)]
        orders = []
        for run in range(2):
            random.Random(run).shuffle(names)
            orders.append(scan(make(tmp_path / str(run), *names)).samples)
        assert orders[0] == orders[1]
        assert orders[0] == sorted(orders[0], key=lambda s: (s.split, s.image))


class TestErrors:
    def test_class_folders_beside_mask_folders_is_ambiguous(self, tmp_path):
        make(tmp_path, "cats/1.jpg", "dogs/2.jpg", "images/3.jpg", "masks/3.png")
        with pytest.raises(SourceError, match=r"layout='mask-folders' or layout='class-folders'"):
            scan(tmp_path)
        assert scan(tmp_path, layout="class-folders").class_names == [
            "cats",
            "dogs",
            "images",
            "masks",
        ]
        result = scan(tmp_path, layout="mask-folders")
        assert [s.image for s in result.samples] == ["images/3.jpg"]
        assert set(reasons(result)) == {"cats/1.jpg", "dogs/2.jpg"}

    def test_unknown_image_mask_folder_names_are_not_taken_for_classes(self, tmp_path):
        make(tmp_path, *(f"{d}/{i}.png" for d in ("rgb", "gt") for i in range(5)))
        with pytest.raises(SourceError, match=r"pass masks='gt' "):
            scan(tmp_path)
        assert scan(tmp_path, masks="gt").samples[0] == Sample(
            "rgb/0.png", "train", mask="gt/0.png"
        )

    def test_nothing_recognisable(self, tmp_path):
        make(tmp_path, "a.jpg", "b.jpg")
        with pytest.raises(SourceError, match=r"cannot recognise the layout.*2 images"):
            scan(tmp_path)

    def test_empty_results(self, tmp_path):
        make(tmp_path, "cat/readme.txt")
        with pytest.raises(SourceError, match="cannot recognise"):
            scan(tmp_path)
        with pytest.raises(SourceError, match=r"no samples.*not an image file type"):
            scan(tmp_path, layout="class-folders")
        make(tmp_path, "images/a.jpg", "masks/b.png")
        with pytest.raises(SourceError, match=r"no samples.*images/ \+ masks/"):
            scan(tmp_path, layout="mask-folders")

    def test_bad_options(self, tmp_path):
        make(tmp_path, "cat/a.jpg")
        with pytest.raises(SourceError, match="no such file"):
            scan(tmp_path / "missing")
        with pytest.raises(SourceError, match="unknown layout"):
            scan(tmp_path, layout="darknet")
        with pytest.raises(SourceError, match="has no YOLO layout"):
            scan(tmp_path, layout="yolo")
        with pytest.raises(SourceError, match="contradict"):
            scan(tmp_path, layout="class-folders", masks="x")
        with pytest.raises(SourceError, match="no image/mask folder pairs"):
            scan(tmp_path, layout="mask-folders")
        with pytest.raises(SourceError, match="sum to"):
            scan(tmp_path, split={"train": 0.5})
        with pytest.raises(SourceError, match="no such folder"):
            scan(tmp_path, masks="nowhere")


@pytest.mark.shared_data
@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="real datasets in ../shared/data are absent")
class TestSharedData:
    def test_camvid(self):
        result = scan(SHARED_DATA / "camvid")
        assert (result.layout, result.task) == ("mask-folders (X/ + Xannot/)", "segmentation")
        assert Counter(s.split for s in result.samples) == {"train": 150, "val": 50}
        assert result.split_source == "folders" and result.rejected == []

    def test_aerial(self):
        result = scan(SHARED_DATA / "aerial_dubai")
        assert (result.layout, result.task) == ("mask-folders (images/ + masks/)", "segmentation")
        assert len(result.samples) == 72 and result.split_source == "single"
        assert result.rejected == []

    def test_hymenoptera(self):
        root = SHARED_DATA / "hymenoptera"
        result = scan(root)
        assert (result.layout, result.task) == ("class-folders", "classification")
        assert result.class_names == ["ants", "bees"] and result.split_source == "folders"
        expected = Counter(
            (split.name, cls.name)
            for split in root.iterdir()
            for cls in split.iterdir()
            for f in cls.iterdir()
            if f.suffix.lower() in IMAGE_EXTENSIONS
        )
        got = Counter((s.split, result.class_names[s.label]) for s in result.samples)
        assert got == expected and sum(got.values()) == 398
        assert "train/ants/imageNotFound.gif" in {s.image for s in result.samples}

    def test_voc_sample(self):
        result = scan(SHARED_DATA / "voc_sample")
        assert result.layout == "mask-folders (JPEGImages/ + SegmentationClass/)"
        assert result.task == "segmentation" and len(result.samples) == 3
