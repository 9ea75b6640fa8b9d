"""Pascal VOC's `ImageSets/Main/<name>.txt`: every list is its split, whatever its name
(VOC2007's `trainval` + `test` both packed, once only 10 of 40 images were); `trainval` beside
`train` + `val` is their union, packed once; `--split` re-splits the listed images by hash."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import packer
from packer.cli import pack_command
from packer.sources import scan
from packer.sources.splits import assign_split
from tests.fixtures.voc import annotation, detectron2_instances, voc

NAMES = ["cat", "dog", "person"]
KEYS = [f"2007_{i:06d}" for i in range(12)]
XMLS = {
    key: annotation(
        (NAMES[i % 3], i % 2, (1 + i, 2, 20 + i, 30)), (NAMES[(i + 1) % 3], 0, (5, 6, 49, 39.5))
    )
    for i, key in enumerate(KEYS)
}
VOC2007 = {  # the test-set release: trainval + test, and per-class lists beside them
    "trainval": KEYS[:8],
    "test": KEYS[8:],
    "dog_trainval": [f"{k}  1" for k in KEYS[:8]],
    "dog_test": [f"{k} -1" for k in KEYS[8:]],
}
EXACT = {"size": (50, 40), "resize": "none", "classes": None}


def by_split(ds) -> dict[str, dict[str, dict]]:
    """split -> image id -> target."""
    return {
        split: {Path(ds[split].source(i)).stem: ds[split][i][1] for i in range(ds[split].count)}
        for split in ds.splits
    }


def test_voc2007_trainval_and_test_are_both_packed_with_exact_boxes(tmp_path):
    src = voc(tmp_path / "VOC2007", XMLS, VOC2007)
    dry = CliRunner().invoke(pack_command, [str(src), "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert (
        "splits from ImageSets/Main/: test.txt, trainval.txt (2 per-class lists there, e.g. "
        "dog_test.txt, not splits)"
    ) in dry.output
    assert "--split re-splits" not in dry.output
    ds = packer.pack(src, out=tmp_path / "p", size=(50, 40), resize="none")
    got = by_split(ds)
    assert {s: sorted(t) for s, t in got.items()} == {"test": KEYS[8:], "trainval": KEYS[:8]}
    assert ds.class_names == NAMES and ds.manifest["rejected"] == []
    for targets in got.values():
        for key, target in targets.items():
            want = detectron2_instances(XMLS[key], NAMES)
            np.testing.assert_array_equal(
                target["boxes"], np.array([w["bbox"] for w in want], np.float32), key
            )
            np.testing.assert_array_equal(target["labels"], [w["category_id"] for w in want])


def test_trainval_beside_train_and_val_is_not_packed_twice(tmp_path):
    lists = {"train": KEYS[:5], "val": KEYS[5:8], "trainval": KEYS[:9], "test": KEYS[9:]}
    result = scan(voc(tmp_path, XMLS, lists))
    got = {}
    for s in result.samples:
        got.setdefault(s.split, []).append(Path(s.image).stem)
    assert got == {"test": KEYS[9:], "train": KEYS[:5], "trainval": [KEYS[8]], "val": KEYS[5:8]}
    assert (
        "trainval.txt is train.txt + val.txt: packed as train and val, not again as trainval "
        "(its 1 ids in neither are split trainval)"
    ) in result.notes


def test_any_list_name_is_a_split_and_a_repeated_id_is_packed_once(tmp_path):
    lists = {"holdout": [KEYS[0], KEYS[1], KEYS[0]], "train": KEYS[2:]}
    result = scan(voc(tmp_path, XMLS, lists))
    holdout = [s.image for s in result.samples if s.split == "holdout"]
    assert holdout == ["JPEGImages/2007_000000.jpg", "JPEGImages/2007_000001.jpg"]
    assert "ImageSets/Main/holdout.txt: 1 ids listed again, packed once" in result.notes


@pytest.mark.parametrize("lists", [VOC2007, None])
def test_split_fractions_re_split_the_listed_images(tmp_path, lists):
    src = voc(tmp_path / "src", XMLS, lists)
    fractions = {"train": 0.75, "val": 0.25}
    result = scan(src, split=fractions)
    assert result.split_source == "hash"
    assert sorted(Path(s.image).stem for s in result.samples) == KEYS  # each image once
    for s in result.samples:
        assert s.split == assign_split(s.image, fractions)
    if lists:
        assert any(
            "re-splits the 12 images of the ImageSets/Main/ lists (test, trainval) by a hash" in n
            for n in result.notes
        )
    out = tmp_path / "out"
    cli = CliRunner().invoke(
        pack_command, [str(src), "--out", str(out), "--split", "train=0.75,val=0.25"]
    )
    assert cli.exit_code == 0, cli.output
    ds = packer.open(out)
    assert sum(ds[s].count for s in ds.splits) == 12 and set(ds.splits) <= {"train", "val"}
