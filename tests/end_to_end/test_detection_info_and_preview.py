"""What users look at for a detection pack: `packer info` (objects per image and class, COCO's
size ranges, objects left out and why), `info --json`, the manifest's stats, and `packer
preview` drawing boxes in class colours with mask outlines."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

import packer
from packer.cli import main
from packer.cli.preview import class_colors
from tests.fixtures.detection import make_detection_coco

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    root = tmp_path_factory.mktemp("info")
    src = make_detection_coco(root / "coco")
    return packer.pack(src, out=root / "p", size=(10, 30), task="instances")  # crops objects out


def test_manifest_stats_count_objects_and_what_was_left_out(pack):
    stats = pack.manifest["stats"]
    part = pack["train"]
    targets = [part[i][1] for i in range(part.count)]
    counts = np.bincount(np.concatenate([t["labels"] for t in targets]), minlength=3)
    assert list(stats["class_objects"].values()) == counts.tolist()
    per_image = np.bincount([len(t["labels"]) for t in targets])
    assert stats["objects"]["images_by_count"] == {
        str(n): int(c) for n, c in enumerate(per_image) if c
    }
    assert sum(stats["objects"]["sizes"].values()) == counts.sum()
    train_dropped = [d for d in pack.manifest["dropped_objects"] if d["path"].startswith("train/")]
    assert stats["objects"]["dropped"] == {"outside the frame": len(train_dropped)} != {}


def test_info_says_objects_sizes_and_dropped(pack):
    result = CliRunner().invoke(main, ["info", str(pack.root)])
    assert result.exit_code == 0, result.output
    assert "instances" in result.output and "share of objects" in result.output
    assert "boxes [N, 4] <f4" in result.output and "masks [N, 30, 10] |u1 (bits)" in result.output
    assert "objects:  " in result.output and "per image" in result.output
    assert "sizes:    small" in result.output
    assert "objects left out: " in result.output and "outside the frame" in result.output
    data = json.loads(CliRunner().invoke(main, ["info", str(pack.root), "--json"]).output)
    assert data["dropped_objects"] == len(pack.manifest["dropped_objects"])
    assert data["stats"]["objects"]["sizes"] == pack.manifest["stats"]["objects"]["sizes"]


def test_preview_draws_boxes_in_class_colours(pack, tmp_path):
    out = tmp_path / "grid.png"
    result = CliRunner().invoke(main, ["preview", str(pack.root), "--out", str(out)])
    assert result.exit_code == 0, result.output
    pixels = np.asarray(Image.open(out).convert("RGB")).reshape(-1, 3)
    colors = class_colors(pack)
    present = {tuple(p) for p in np.unique(pixels, axis=0)}
    assert tuple(int(v) for v in colors[1]) in present  # car's boxes and outlines


def test_verify_and_bench_take_a_detection_pack(pack):
    verified = CliRunner().invoke(main, ["verify", str(pack.root)])
    assert verified.exit_code == 0 and "every file matches" in verified.output
    bench = CliRunner().invoke(main, ["bench", str(pack.root), "--seconds", "0.2", "--json"])
    assert bench.exit_code == 0, bench.output
    assert "naive decode of the sources" in bench.output  # annotations are no mask files
