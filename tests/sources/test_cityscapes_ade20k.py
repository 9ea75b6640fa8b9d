"""Cityscapes and ADE20K beyond the common case: the official table's facts, gtFine/gtCoarse
per split, every kind of rejection with its reason, objectInfo150 in its published forms,
clear errors for a layout named but absent, and class maps over the ADE20K table."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
from click.testing import CliRunner

import packer
from packer.cli import pack_command
from packer.labels import IGNORED
from packer.sources import SourceError, scan
from packer.sources.ade20k_names import ADE20K_NAMES
from packer.sources.cityscapes_labels import LABELS, train_table
from tests.fixtures.cityscapes import TRAIN_IDS, to_train_ids
from tests.fixtures.packs import manifest_hashes

W, H = 24, 16
TRAIN_NAMES = (
    ("road", (128, 64, 128)),
    ("sidewalk", (244, 35, 232)),
    ("building", (70, 70, 70)),
    ("wall", (102, 102, 156)),
    ("fence", (190, 153, 153)),
    ("pole", (153, 153, 153)),
    ("traffic light", (250, 170, 30)),
    ("traffic sign", (220, 220, 0)),
    ("vegetation", (107, 142, 35)),
    ("terrain", (152, 251, 152)),
    ("sky", (70, 130, 180)),
    ("person", (220, 20, 60)),
    ("rider", (255, 0, 0)),
    ("car", (0, 0, 142)),
    ("truck", (0, 0, 70)),
    ("bus", (0, 60, 100)),
    ("train", (0, 80, 100)),
    ("motorcycle", (0, 0, 230)),
    ("bicycle", (119, 11, 32)),
)
CITY_IDS = (0, 1, 3, 7, 8, 9, 10, 11, 14, 18, 23, 24, 26, 29, 30, 33)  # ignored ones among them


def touch(root: Path, *names: str) -> Path:
    """Empty files: a scan reads names only."""
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).touch()
    return root


def write(path: Path, array: np.ndarray) -> None:
    """cv2.imwrite into a folder made first (it fails silently otherwise)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    assert cv2.imwrite(str(path), array), path


def stripes(rng: np.random.Generator, values) -> np.ndarray:
    """A (H, W) uint8 mask of random values from `values`, in 2x2 blocks."""
    blocks = rng.choice(np.asarray(values), (H // 2, W // 2))
    return np.kron(blocks, np.ones((2, 2), np.int64)).astype(np.uint8)


def read_back(out: Path) -> dict[str, np.ndarray]:
    """Source image name -> packed mask, every split."""
    ds = packer.open(out)
    return {Path(ds[s].source(i)).name: ds[s][i][1] for s in ds.splits for i in range(ds[s].count)}


# -- Cityscapes ------------------------------------------------------------------------------


def test_the_official_table_holds_its_key_facts():
    assert len(LABELS) == 35
    assert [label.id for label in LABELS] == [*range(34), -1]
    assert LABELS[-1].name == "license plate" and LABELS[-1].train_id == -1
    assert {label.category for label in LABELS} == {
        "void", "flat", "construction", "object", "nature", "sky", "human", "vehicle"
    }  # fmt: skip
    assert LABELS[9][:2] == ("parking", 9) and LABELS[9].color == (250, 170, 160)
    assert LABELS[14].name == "guard rail" and LABELS[14].color == (180, 165, 180)
    assert LABELS[18].name == "polegroup" and LABELS[18].train_id == 255
    table = train_table()
    assert [(c.index, c.name, c.color) for c in table.classes] == [
        (i, name, color) for i, (name, color) in enumerate(TRAIN_NAMES)
    ]
    assert dict(table.value_map) == {i: TRAIN_IDS.get(i, IGNORED) for i in range(34)}


@pytest.fixture(scope="module")
def city(tmp_path_factory) -> tuple[Path, dict[str, np.ndarray]]:
    """train/val/test in gtFine (test masks all zeros, as released), train_extra in gtCoarse
    only, a gtCoarse/train/ that gtFine/train/ outranks, distractors beside every mask, and
    one of each thing that cannot pair."""
    root = tmp_path_factory.mktemp("city") / "cityscapes"
    rng = np.random.default_rng(7)
    label_ids = {}
    plan = (("train", "gtFine", "aachen", 2), ("val", "gtFine", "lindau", 1))
    plan += (("test", "gtFine", "berlin", 1), ("train_extra", "gtCoarse", "erlangen", 1))
    for split, gt, city_name, count in plan:
        for frame in range(count):
            base = f"{city_name}_000000_{frame:06d}"
            images, masks = root / "leftImg8bit" / split / city_name, root / gt / split / city_name
            picture = rng.integers(0, 255, (H, W, 3), np.uint8)
            write(images / f"{base}_leftImg8bit.png", picture)
            ids = np.zeros((H, W), np.uint8) if split == "test" else stripes(rng, CITY_IDS)
            if split == "train_extra":
                ids[0, :2] = 34  # not in the table: reported, becomes the ignore index
            write(masks / f"{base}_{gt}_labelIds.png", ids)
            label_ids[f"{base}_leftImg8bit.png"] = ids
            write(masks / f"{base}_{gt}_color.png", np.full((H, W, 3), 200, np.uint8))
            write(masks / f"{base}_{gt}_labelTrainIds.png", np.full((H, W), 3, np.uint8))
            instances = np.full((H, W), 26001, np.uint16)
            write(masks / f"{base}_{gt}_instanceIds.png", instances)
            (masks / f"{base}_{gt}_polygons.json").write_text(json.dumps({"objects": []}))
    write(root / "gtCoarse/train/aachen/aachen_000000_000000_gtCoarse_labelIds.png", ids)
    blank = np.zeros((H, W), np.uint8)
    write(root / "leftImg8bit/train/aachen/aachen_000000_000099_leftImg8bit.png", blank)
    write(root / "gtFine/val/lindau/lindau_000000_000050_gtFine_labelIds.png", blank)
    write(root / "leftImg8bit/train/aachen/snapshot.png", blank)
    write(root / "rightImg8bit/train/aachen/aachen_000000_000000_rightImg8bit.png", blank)
    return root, label_ids


def test_cityscapes_is_found_with_its_reason_and_every_leftover_rejected(city):
    root, _ = city
    found = scan(root)
    assert (found.layout, found.task) == ("cityscapes", "segmentation")
    assert found.why == (
        "Cityscapes: leftImg8bit/ + gtFine/, gtCoarse/ for train_extra (labelIds), "
        "3 train + 1 val + 1 test + 1 train_extra images"
    )
    masks = {Path(s.image).name: (s.split, s.mask) for s in found.samples}
    assert masks["erlangen_000000_000000_leftImg8bit.png"] == (
        "train_extra",
        "gtCoarse/train_extra/erlangen/erlangen_000000_000000_gtCoarse_labelIds.png",
    )
    assert masks["aachen_000000_000000_leftImg8bit.png"][1].startswith("gtFine/train/")
    assert all(mask.endswith("_labelIds.png") for _, mask in masks.values())
    assert {r.path: r.reason for r in found.rejected} == {
        "leftImg8bit/train/aachen/aachen_000000_000099_leftImg8bit.png": (
            "no mask gtFine/train/aachen/aachen_000000_000099_gtFine_labelIds.png"
        ),
        "leftImg8bit/train/aachen/snapshot.png": (
            "not a Cityscapes image name (<city>_<seq>_<frame>_leftImg8bit.png)"
        ),
        "gtFine/val/lindau/lindau_000000_000050_gtFine_labelIds.png": (
            "no image leftImg8bit/val/lindau/lindau_000000_000050_leftImg8bit.png for this mask"
        ),
    }
    assert "not read: gtCoarse/train/ (gtFine/train/ is preferred)" in found.notes
    assert "not read by the Cityscapes layout: rightImg8bit/" in found.notes


def test_cityscapes_packs_every_split_pixel_for_pixel(city, tmp_path):
    root, label_ids = city
    ds = packer.pack(root, tmp_path / "out", size=(W, H), resize="none", workers=1)
    assert {n: s.count for n, s in ds.splits.items()} == {
        "train": 2, "val": 1, "test": 1, "train_extra": 1
    }  # fmt: skip
    assert [(c["name"], tuple(c["color"])) for c in ds.classes] == list(TRAIN_NAMES)
    got = read_back(tmp_path / "out")
    assert got.keys() == label_ids.keys()
    for name, ids in label_ids.items():
        np.testing.assert_array_equal(got[name], to_train_ids(ids), name)
    assert (got["berlin_000000_000000_leftImg8bit.png"] == 255).all()  # test: all unlabeled
    (unknown,) = ds.manifest["unknown_labels"]
    assert unknown["path"].endswith("erlangen_000000_000000_gtCoarse_labelIds.png")
    assert unknown["values"] == {"index 34": 2}


def test_coarse_only_sources_and_splits_without_annotations(tmp_path):
    root = touch(
        tmp_path / "coarse",
        "leftImg8bit/train/ulm/ulm_000000_000001_leftImg8bit.png",
        "gtCoarse/train/ulm/ulm_000000_000001_gtCoarse_labelIds.png",
        "leftImg8bit/demo/ulm/ulm_000000_000002_leftImg8bit.png",
        "leftImg8bit/ulm_000000_000003_leftImg8bit.png",
    )
    found = scan(root)
    assert found.why == "Cityscapes: leftImg8bit/ + gtCoarse/ (labelIds), 1 train images"
    assert [s.mask for s in found.samples] == [
        "gtCoarse/train/ulm/ulm_000000_000001_gtCoarse_labelIds.png"
    ]
    assert {r.path: r.reason for r in found.rejected} == {
        "leftImg8bit/demo/ulm/ulm_000000_000002_leftImg8bit.png": (
            "no gtFine/demo/ or gtCoarse/demo/"
        ),
        "leftImg8bit/ulm_000000_000003_leftImg8bit.png": (
            "not inside a split folder (leftImg8bit/<split>/<city>/)"
        ),
    }


# -- ADE20K ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ade(tmp_path_factory) -> tuple[Path, dict[str, np.ndarray]]:
    """A parent folder holding ADEChallengeData2016/ (every mask value 0..150 appears) and a
    release_test/ the layout does not read."""
    parent = tmp_path_factory.mktemp("ade")
    root = parent / "ADEChallengeData2016"
    rng = np.random.default_rng(5)
    values = {}
    for folder, prefix, count in (("training", "ADE_train", 4), ("validation", "ADE_val", 2)):
        (root / "images" / folder).mkdir(parents=True)
        (root / "annotations" / folder).mkdir(parents=True)
        for i in range(1, count + 1):
            name = f"{prefix}_{i:08d}"
            picture = rng.integers(0, 255, (H, W, 3), np.uint8)
            write(root / "images" / folder / f"{name}.jpg", picture)
            mask = rng.permutation(np.resize(np.arange(151, dtype=np.uint8), H * W)).reshape(H, W)
            write(root / "annotations" / folder / f"{name}.png", mask)
            values[f"{name}.jpg"] = mask
    touch(parent, "release_test/testing/ADE_test_00000001.jpg")
    return parent, values


def test_ade20k_is_found_from_its_parent_or_itself(ade):
    parent, _ = ade
    found = scan(parent)
    assert (found.layout, found.task) == ("ade20k", "segmentation")
    assert found.why == (
        "ADE20K SceneParsing: ADEChallengeData2016/images/ + annotations/, 4 train + 2 val images"
    )
    assert "not read by the ADE20K layout: release_test/" in found.notes
    assert found.table.source == "ADE20K objectInfo150 (built in)"
    assert found.table.names == list(ADE20K_NAMES)
    assert found.table.value_map == ((0, IGNORED), *((k, k - 1) for k in range(1, 151)))
    itself = scan(parent / "ADEChallengeData2016")
    assert itself.why == "ADE20K SceneParsing: images/ + annotations/, 4 train + 2 val images"
    first = itself.samples[0]
    assert (first.image, first.split, first.mask) == (
        "images/training/ADE_train_00000001.jpg",
        "train",
        "annotations/training/ADE_train_00000001.png",
    )
    dry = CliRunner().invoke(pack_command, [str(parent), "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "classes: 150: wall, building, sky" in dry.output


def test_ade20k_rejects_what_does_not_pair(tmp_path):
    root = touch(
        tmp_path / "ADEChallengeData2016",
        "images/training/ADE_train_00000001.jpg",
        "annotations/training/ADE_train_00000001.png",
        "images/training/ADE_train_00000002.jpg",
        "annotations/validation/ADE_val_00000009.png",
        "annotations/validation/ADE_val_00000009.txt",
        "images/testing/ADE_test_00000001.jpg",
        "images/stray.jpg",
    )
    found = scan(root)
    assert found.layout == "ade20k" and len(found.samples) == 1
    assert {r.path: r.reason for r in found.rejected} == {
        "images/training/ADE_train_00000002.jpg": (
            "no mask annotations/training/ADE_train_00000002.png"
        ),
        "annotations/validation/ADE_val_00000009.png": (
            "no image ADE_val_00000009.* in images/validation/"
        ),
        "annotations/validation/ADE_val_00000009.txt": (
            "not a PNG mask (ADE20K annotations are .png)"
        ),
        "images/testing/ADE_test_00000001.jpg": "not inside images/training/ or validation/",
        "images/stray.jpg": "not inside images/training/ or validation/",
    }


# rows of objectInfo150.txt as CSAILVision/sceneparsing publishes it (Idx: Name), spot by spot
PUBLISHED = {
    1: "wall",
    2: "building, edifice",
    4: "floor, flooring",
    8: "bed ",
    9: "windowpane, window ",
    13: "person, individual, someone, somebody, mortal, soul",
    21: "car, auto, automobile, machine, motorcar",
    29: "rug, carpet, carpeting",
    45: "chest of drawers, chest, bureau, dresser",
    50: "fireplace, hearth, open fireplace",
    56: "case, display case, showcase, vitrine",
    57: "pool table, billiard table, snooker table",
    66: "toilet, can, commode, crapper, pot, potty, stool, throne",
    72: "stove, kitchen stove, range, kitchen range, cooking stove",
    81: "bus, autobus, coach, charabanc, double-decker, jitney, motorbus, motorcoach, omnibus, "
    "passenger vehicle",
    90: "television, television receiver, television set, tv, tv set, idiot box, boob tube, "
    "telly, goggle box",
    96: "bannister, banister, balustrade, balusters, handrail",
    100: "buffet, counter, sideboard",
    106: "conveyer belt, conveyor belt, conveyer, conveyor, transporter",
    110: "swimming pool, swimming bath, natatorium",
    124: "trade name, brand name, brand, marque",
    128: "bicycle, bike, wheel, cycle ",
    131: "screen, silver screen, projection screen",
    137: "traffic light, traffic signal, stoplight",
    139: "ashcan, trash can, garbage can, wastebin, ash bin, ash-bin, ashbin, dustbin, "
    "trash barrel, trash bin",
    142: "crt screen",
    145: "bulletin board, notice board",
    150: "flag",
}


def test_built_in_names_are_object_info_150s_first_names(tmp_path):
    """The built-in table names mask value k as objectInfo150's row k does: its first name,
    the name a pack of a folder holding the published file gives it."""
    assert len(ADE20K_NAMES) == 150 and len(set(ADE20K_NAMES)) == 150
    for idx, row in PUBLISHED.items():
        assert ADE20K_NAMES[idx - 1] == row.split(",")[0].strip(), idx
    root = touch(
        tmp_path / "ADEChallengeData2016",
        "images/validation/ADE_val_00000001.jpg",
        "annotations/validation/ADE_val_00000001.png",
    )
    rows = [f"{k}\t0.1\t1\t1\t{PUBLISHED.get(k, n)}" for k, n in enumerate(ADE20K_NAMES, 1)]
    (root / "objectInfo150.txt").write_text("Idx\tRatio\tTrain\tVal\tName\n" + "\n".join(rows))
    assert scan(root).table.names == list(ADE20K_NAMES)


def test_object_info_names_the_classes_in_its_published_forms(tmp_path):
    root = touch(
        tmp_path / "ADEChallengeData2016",
        "images/validation/ADE_val_00000001.jpg",
        "annotations/validation/ADE_val_00000001.png",
    )
    names = ("wall", "building, edifice", "person;individual;someone", "chest of drawers, chest")
    rows = [f"{k}\t0.1\t1\t1\t{n}" for k, n in enumerate(names, start=1)]
    (root / "objectInfo150.txt").write_text("Idx\tRatio\tTrain\tVal\tName\n" + "\n".join(rows))
    table = scan(root).table
    assert table.names == ["wall", "building", "person", "chest of drawers"]
    assert table.source == "objectInfo150.txt"
    assert table.value_map == ((0, IGNORED), (1, 0), (2, 1), (3, 2), (4, 3))
    (root / "objectInfo150.txt").write_text("Idx\tName\n1\twall\n3\tsky\n")
    with pytest.raises(SourceError, match=r"objectInfo150.txt: Idx must run 1..N"):
        scan(root)


def test_a_named_layout_that_is_not_there_is_a_clear_error(ade, city, tmp_path):
    with pytest.raises(SourceError, match="has no Cityscapes layout"):
        scan(ade[0], layout="cityscapes")
    with pytest.raises(SourceError, match="has no ADE20K layout"):
        scan(city[0], layout="ade20k")
    result = CliRunner().invoke(pack_command, [str(city[0]), "--layout", "ade20k", "--dry-run"])
    assert result.exit_code == 1 and "no ADE20K layout" in result.output
    assert "Traceback" not in result.output


def test_images_and_annotations_without_ade_split_folders_stay_generic(tmp_path):
    root = touch(tmp_path / "plain", "images/a.png", "annotations/a.png")
    assert scan(root).layout.startswith("mask-folders")


def test_ade20k_class_map_composes_and_workers_give_the_same_bytes(ade, tmp_path):
    parent, values = ade
    table = tmp_path / "map.csv"
    table.write_text("source,target\nwall,ignore\nfloor,building\n")
    ones = packer.pack(
        parent, tmp_path / "one", size=(W, H), resize="none", class_map=table, workers=1,
        shard_size=3 * W * H * 4,
    )  # fmt: skip
    packer.pack(
        parent, tmp_path / "two", size=(W, H), resize="none", class_map=table, workers=2,
        shard_size=3 * W * H * 4,
    )  # fmt: skip
    assert len(ones.manifest["splits"]["train"]["shards"]) > 1
    assert manifest_hashes(tmp_path / "one") == manifest_hashes(tmp_path / "two")
    kept = [n for n in ADE20K_NAMES if n not in ("wall", "floor")]
    assert [c["name"] for c in ones.classes] == kept
    lut = np.full(256, 255, np.uint8)
    for value, name in enumerate(ADE20K_NAMES, start=1):
        if name != "wall":
            lut[value] = kept.index("building" if name == "floor" else name)
    got = read_back(tmp_path / "one")
    assert got.keys() == values.keys()
    for name, raw in values.items():
        np.testing.assert_array_equal(got[name], lut[raw], name)
