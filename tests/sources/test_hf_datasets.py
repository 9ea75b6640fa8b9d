"""Hugging Face datasets as a source: Parquet files as the Hub lays them out, and a
save_to_disk folder, pack to the same samples (pixels, labels, boxes) as the same images in a
folder layout (class folders, image/mask folders, a COCO JSON), whatever the worker count."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

import packer
from tests.fixtures.golden import digest

W, H = 40, 30
CLASSES = ["ant", "bee", "cat"]


def png(pixels: np.ndarray) -> bytes:
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "PNG")
    return out.getvalue()


def photo(i: int) -> np.ndarray:
    """A distinct RGB image per index, sizes varying around W x H."""
    rng = np.random.default_rng(i)
    return rng.integers(0, 256, (H + i % 3, W - i % 2, 3), np.uint8)


def mask(i: int, shape: tuple[int, ...]) -> np.ndarray:
    """Class ids 0..3 in bands, shifted per image."""
    rows = (np.arange(shape[0])[:, None] + i) // 6 % 4
    return np.broadcast_to(rows, shape[:2]).astype(np.uint8).copy()


def features_metadata(features: dict) -> dict:
    return {"huggingface": json.dumps({"info": {"features": features}})}


def write_parquet(path: Path, columns: dict, features: dict, row_group_size: int = 2) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table(columns).replace_schema_metadata(features_metadata(features))
    pq.write_table(table, path, row_group_size=row_group_size)


def image_cells(indices) -> list[dict]:
    return [{"bytes": png(photo(i)), "path": f"{i}.png"} for i in indices]


LABELS = {"train": [0, 1, 2, 1, 0, 2, 2], "test": [1, 0, 2]}
FIRST = {"train": 0, "test": 20}
IMAGE = {"_type": "Image"}
CLASS_LABEL = {"_type": "ClassLabel", "names": CLASSES}


def classification_parquet(root: Path) -> Path:
    """Two Parquet shards for train and one for test, as the Hub writes them."""
    for split, labels in LABELS.items():
        first, count = FIRST[split], len(labels)
        halves = [range(count)] if split == "test" else [range(4), range(4, count)]
        for n, rows in enumerate(halves):
            write_parquet(
                root / "data" / f"{split}-{n:05d}-of-{len(halves):05d}.parquet",
                {
                    "image": image_cells(first + r for r in rows),
                    "label": [labels[r] for r in rows],
                },
                {"image": IMAGE, "label": CLASS_LABEL},
            )
    return root


def class_folders(root: Path) -> Path:
    for split, labels in LABELS.items():
        for r, label in enumerate(labels):
            folder = root / split / CLASSES[label]
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{r}.png").write_bytes(png(photo(FIRST[split] + r)))
    return root


def samples(ds, split: str) -> list[tuple[bytes, object]]:
    """Every sample of a split as (pixels, target), in an order that does not depend on the
    pack's: sorted by the pixels."""
    part = ds[split]
    found = []
    for i in range(part.count):
        image, target = part[i]
        if isinstance(target, dict):
            target = {k: np.asarray(v).tolist() for k, v in target.items()}
        elif isinstance(target, np.ndarray):
            target = target.tobytes()
        else:
            target = int(target)
        found.append((np.asarray(image).tobytes(), target))
    return sorted(found, key=lambda pair: pair[0])


def test_parquet_classes_pack_as_class_folders(tmp_path):
    hub = packer.pack(classification_parquet(tmp_path / "hub"), out=tmp_path / "a", size=(20, 15))
    folders = packer.pack(class_folders(tmp_path / "folders"), out=tmp_path / "b", size=(20, 15))
    assert hub.manifest["task"] == "classification"
    assert [c["name"] for c in hub.manifest["classes"]] == CLASSES
    assert hub.manifest["classes"] == folders.manifest["classes"]
    for split in LABELS:
        assert hub[split].count == len(LABELS[split])
        assert samples(hub, split) == samples(folders, split)


def segmentation_parquet(root: Path, count: int) -> Path:
    images = [photo(i) for i in range(count)]
    write_parquet(
        root / "data" / "train-00000-of-00001.parquet",
        {
            "image": [{"bytes": png(p), "path": None} for p in images],
            "annotation": [
                {"bytes": png(mask(i, p.shape)), "path": None} for i, p in enumerate(images)
            ],
        },
        {"image": IMAGE, "annotation": IMAGE},
    )
    return root


def mask_folders(root: Path, count: int) -> Path:
    (root / "images").mkdir(parents=True)
    (root / "masks").mkdir()
    for i in range(count):
        pixels = photo(i)
        (root / "images" / f"{i}.png").write_bytes(png(pixels))
        (root / "masks" / f"{i}.png").write_bytes(png(mask(i, pixels.shape)))
    return root


def test_parquet_segmentation_packs_as_mask_folders(tmp_path):
    hub = packer.pack(segmentation_parquet(tmp_path / "hub", 5), out=tmp_path / "a", size=(20, 15))
    folders = packer.pack(mask_folders(tmp_path / "folders", 5), out=tmp_path / "b", size=(20, 15))
    assert hub.manifest["task"] == "segmentation"
    assert hub["train"].count == 5
    assert hub["train"].mask_source(0).endswith("&column=annotation")
    assert samples(hub, "train") == samples(folders, "train")


# Per image: (category index, COCO [x, y, w, h]); one box of no size, left out as COCO does.
OBJECTS = [
    [(0, [2.0, 3.0, 14.0, 12.0]), (2, [20.0, 4.0, 8.5, 10.0])],
    [(1, [0.0, 0.0, 39.0, 29.0])],
    [],
    [(2, [5.0, 6.0, 7.0, 8.0]), (0, [10.0, 10.0, 0.0, 4.0]), (1, [30.0, 20.0, 9.0, 9.0])],
]


def detection_parquet(root: Path, list_of_structs: bool = False) -> Path:
    """Objects as datasets stores Sequence({...}) (a struct of lists), or as a list of structs."""
    value = {"dtype": "float32", "_type": "Value"}
    item = {"bbox": {"_type": "Sequence", "feature": value, "length": 4}, "category": CLASS_LABEL}
    if list_of_structs:
        objects: list = [[{"bbox": b, "category": c} for c, b in row] for row in OBJECTS]
        feature: object = [item]
    else:
        objects = [
            {"bbox": [b for _, b in row], "category": [c for c, _ in row]} for row in OBJECTS
        ]
        feature = {"_type": "Sequence", "feature": item}
    write_parquet(
        root / "data" / "train-00000-of-00001.parquet",
        {"image": image_cells(range(len(OBJECTS))), "objects": objects},
        {"image": IMAGE, "objects": feature},
    )
    return root


def coco_folder(root: Path) -> Path:
    (root / "train").mkdir(parents=True)
    (root / "annotations").mkdir()
    images, annotations = [], []
    for i, row in enumerate(OBJECTS):
        pixels = photo(i)
        (root / "train" / f"{i}.png").write_bytes(png(pixels))
        height, width = pixels.shape[:2]
        images.append({"id": i, "file_name": f"{i}.png", "height": height, "width": width})
        for category, bbox in row:
            annotations.append(
                {
                    "id": len(annotations) + 1,
                    "image_id": i,
                    "category_id": category + 1,
                    "bbox": bbox,
                    "iscrowd": 0,
                    "area": bbox[2] * bbox[3],
                    "segmentation": [],
                }
            )
    categories = [{"id": n + 1, "name": name} for n, name in enumerate(CLASSES)]
    data = {"images": images, "annotations": annotations, "categories": categories}
    (root / "annotations" / "instances_train.json").write_text(json.dumps(data))
    return root


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


def save_to_disk_by_hand(root: Path) -> Path:
    """A DatasetDict as datasets.save_to_disk writes it: dataset_dict.json, and per split
    Arrow stream files listed by state.json with dataset_info.json's features."""
    root.mkdir()
    (root / "dataset_dict.json").write_text(json.dumps({"splits": list(LABELS)}))
    features = {"image": IMAGE, "label": CLASS_LABEL}
    for split, labels in LABELS.items():
        folder = root / split
        folder.mkdir()
        table = pa.table(
            {"image": image_cells(FIRST[split] + r for r in range(len(labels))), "label": labels}
        ).replace_schema_metadata(features_metadata(features))
        path = str(folder / "data-00000-of-00001.arrow")
        with pa.OSFile(path, "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table, max_chunksize=3)
        state = {"_data_files": [{"filename": "data-00000-of-00001.arrow"}], "_split": split}
        (folder / "state.json").write_text(json.dumps(state))
        (folder / "dataset_info.json").write_text(json.dumps({"features": features}))
    return root


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
