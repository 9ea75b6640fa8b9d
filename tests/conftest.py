"""Shared fixtures: small synthetic datasets the tests make themselves, and the real-data root."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from packer.synthetic import make_classification, make_segmentation

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")


@pytest.fixture(scope="session")
def seg_src(tmp_path_factory) -> Path:
    """train/ + train_labels/, val/ + val_labels/ colour masks, class_dict.csv; 64x48 scenes."""
    return make_segmentation(tmp_path_factory.mktemp("seg"), {"train": 14, "val": 5}, (64, 48))


@pytest.fixture(scope="session")
def cls_src(tmp_path_factory) -> Path:
    """Three class folders of 48x36 JPEGs."""
    return make_classification(
        tmp_path_factory.mktemp("cls"), {"cats": 9, "dogs": 7, "owls": 6}, (48, 36)
    )


def tiny_classifier(size: int, classes: int):
    """A small real Keras CNN, compiled, for one-epoch training tests."""
    import keras

    model = keras.Sequential(
        [
            keras.Input((size, size, 3)),
            keras.layers.Conv2D(4, 3, activation="relu"),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(classes, activation="softmax"),
        ]
    )
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    return model


def manifest_hashes(root: Path) -> dict[str, str]:
    """Path -> sha256 of every file a pack's manifest lists."""
    data = json.loads((root / "dataset.json").read_text())
    return {
        f["path"]: f["sha256"]
        for split in data["splits"].values()
        for shard in split["shards"]
        for f in shard["files"]
    }


def shared_dataset(name: str) -> Path:
    """A real dataset from ../shared/data, or skip the test when it is absent."""
    path = SHARED_DATA / name
    if not path.is_dir():
        pytest.skip(f"real dataset {name} not available ({SHARED_DATA} absent)")
    return path
