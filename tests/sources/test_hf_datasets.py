"""Hugging Face datasets as a source: Parquet files as the Hub lays them out, and a
save_to_disk folder, pack to the same samples (pixels, labels, boxes) as the same images in a
folder layout (class folders, image/mask folders, a COCO JSON), whatever the worker count."""

from __future__ import annotations

import pytest
from PIL import Image

import packer
from tests.fixtures.golden import digest
from tests.fixtures.hf_datasets import (
    CLASSES,
    FIRST,
    LABELS,
    OBJECTS,
    class_folders,
    classification_parquet,
    coco_folder,
    detection_parquet,
    mask_folders,
    photo,
    samples,
    save_to_disk_by_hand,
    segmentation_parquet,
)


def test_parquet_classes_pack_as_class_folders(tmp_path):
    hub = packer.pack(classification_parquet(tmp_path / "hub"), out=tmp_path / "a", size=(20, 15))
    folders = packer.pack(class_folders(tmp_path / "folders"), out=tmp_path / "b", size=(20, 15))
    assert hub.manifest["task"] == "classification"
    assert [c["name"] for c in hub.manifest["classes"]] == CLASSES
    assert hub.manifest["classes"] == folders.manifest["classes"]
    for split in LABELS:
        assert hub[split].count == len(LABELS[split])
        assert samples(hub, split) == samples(folders, split)


def test_parquet_segmentation_packs_as_mask_folders(tmp_path):
    hub = packer.pack(segmentation_parquet(tmp_path / "hub", 5), out=tmp_path / "a", size=(20, 15))
    folders = packer.pack(mask_folders(tmp_path / "folders", 5), out=tmp_path / "b", size=(20, 15))
    assert hub.manifest["task"] == "segmentation"
    assert hub["train"].count == 5
    assert hub["train"].mask_source(0).endswith("&column=annotation")
    assert samples(hub, "train") == samples(folders, "train")


@pytest.mark.parametrize("list_of_structs", [False, True])
def test_parquet_objects_pack_as_coco(tmp_path, list_of_structs):
    src = detection_parquet(tmp_path / "hub", list_of_structs)
    hub = packer.pack(src, out=tmp_path / "a", size=(20, 15))
    coco = packer.pack(
        coco_folder(tmp_path / "coco"), out=tmp_path / "b", size=(20, 15), task="detection"
    )
    assert hub.manifest["task"] == "detection"
    assert [c["name"] for c in hub.manifest["classes"]] == CLASSES
    assert hub["train"].count == len(OBJECTS)
    assert samples(hub, "train") == samples(coco, "train")
    assert len(hub.manifest["dropped_objects"]) == len(coco.manifest["dropped_objects"]) == 1


@pytest.mark.parametrize("kind", ["classification", "detection"])
def test_the_same_bytes_with_one_or_two_workers(tmp_path, kind):
    make = classification_parquet if kind == "classification" else detection_parquet
    src = make(tmp_path / "hub")
    packs = [
        packer.pack(src, out=tmp_path / f"w{n}", size=(20, 15), workers=n, shard_size=2_000)
        for n in (1, 2)
    ]
    assert len(packs[0].manifest["splits"]["train"]["shards"]) > 1
    assert digest(tmp_path / "w1") == digest(tmp_path / "w2")


def test_save_to_disk_folder_packs_as_class_folders(tmp_path):
    saved = packer.pack(save_to_disk_by_hand(tmp_path / "saved"), out=tmp_path / "a", size=(20, 15))
    folders = packer.pack(class_folders(tmp_path / "folders"), out=tmp_path / "b", size=(20, 15))
    assert saved.manifest["classes"] == folders.manifest["classes"]
    for split in LABELS:
        assert samples(saved, split) == samples(folders, split)


def test_datasets_save_to_disk_and_to_parquet(tmp_path):
    datasets = pytest.importorskip("datasets")
    features = datasets.Features(
        {"image": datasets.Image(), "label": datasets.ClassLabel(names=CLASSES)}
    )
    built = datasets.DatasetDict(
        {
            split: datasets.Dataset.from_dict(
                {
                    "image": [Image.fromarray(photo(FIRST[split] + r)) for r in range(len(labels))],
                    "label": labels,
                },
                features=features,
            )
            for split, labels in LABELS.items()
        }
    )
    built.save_to_disk(str(tmp_path / "saved"))
    for split in LABELS:
        (tmp_path / "hub" / "data").mkdir(parents=True, exist_ok=True)
        built[split].to_parquet(str(tmp_path / "hub" / "data" / f"{split}-00000-of-00001.parquet"))
    folders = packer.pack(class_folders(tmp_path / "folders"), out=tmp_path / "f", size=(20, 15))
    for name in ("saved", "hub"):
        ds = packer.pack(tmp_path / name, out=tmp_path / f"{name}-pack", size=(20, 15))
        for split in LABELS:
            assert samples(ds, split) == samples(folders, split)


def test_datasets_objects_to_parquet_pack_as_coco(tmp_path):
    datasets = pytest.importorskip("datasets")
    box = datasets.Sequence(datasets.Value("float32"), length=4)
    features = datasets.Features(
        {
            "image": datasets.Image(),
            "objects": datasets.Sequence(
                {"bbox": box, "category": datasets.ClassLabel(names=CLASSES)}
            ),
        }
    )
    built = datasets.Dataset.from_dict(
        {
            "image": [Image.fromarray(photo(i)) for i in range(len(OBJECTS))],
            "objects": [
                {"bbox": [b for _, b in row], "category": [c for c, _ in row]} for row in OBJECTS
            ],
        },
        features=features,
    )
    built.to_parquet(str(tmp_path / "hub" / "data" / "train-00000-of-00001.parquet"))
    hub = packer.pack(tmp_path / "hub", out=tmp_path / "a", size=(20, 15))
    coco = packer.pack(
        coco_folder(tmp_path / "coco"), out=tmp_path / "b", size=(20, 15), task="detection"
    )
    assert samples(hub, "train") == samples(coco, "train")
