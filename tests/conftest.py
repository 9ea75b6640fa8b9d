"""Pytest fixtures every folder shares: small synthetic datasets the tests make themselves,
packs several test modules read, and the real S3 endpoint (moto's server) started once.
Builders and helpers live in tests/fixtures/."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from packer.synthetic import make_classification, make_segmentation
from tests.fixtures.golden import make_class_folders, make_sources
from tests.fixtures.processes import pack_cmd

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


@pytest.fixture(scope="session")
def golden_sources(tmp_path_factory) -> dict[str, Path]:
    """The golden packs' sources: "seg" (mask folders) and "cls" (class folders)."""
    base = tmp_path_factory.mktemp("golden")
    return {"seg": make_sources(base / "seg"), "cls": make_class_folders(base / "cls")}


@pytest.fixture(scope="session")
def many_shards(tmp_path_factory) -> tuple[Path, list[str], Path]:
    """A source that packs into 40 one-sample shards (the pack options for that), and its
    uninterrupted reference pack: what the interruption tests kill and resume."""
    root = tmp_path_factory.mktemp("interrupt")
    src = make_segmentation(root / "src", {"train": 40}, (320, 240))
    args = ["--size", "96x72", "--shard-size", str(96 * 72 * 4), "--no-progress"]
    subprocess.run(pack_cmd(src, root / "reference", *args), check=True, capture_output=True)
    return src, args, root / "reference"
