"""Packs written before the typed fields open and read the same: one pack per preset
(segmentation npy, classification TFRecord, detection RecordIO, instances npy), written by the
packer of commit 8efce9c from the golden sources (tests/fixtures/golden.py), with every sample
as that packer's `packer.open(...)[split][i]` read it, in `<case>.npz` beside the pack."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import packer

OLD = Path(__file__).parents[1] / "fixtures" / "old_packs"
CASES = ("seg-npy", "cls-tfrecord", "det-recordio", "inst-npy")


def _expected(case: str) -> dict[str, np.ndarray]:
    with np.load(OLD / f"{case}.npz") as data:
        return {key: data[key] for key in data.files}


def _sample_keys(expected: dict, split: str, index: int) -> dict[str, np.ndarray]:
    prefix = f"{split}/{index}/"
    return {k[len(prefix) :]: v for k, v in expected.items() if k.startswith(prefix)}


@pytest.mark.parametrize("case", CASES)
def test_every_sample_reads_as_the_old_packer_read_it(case):
    expected = _expected(case)
    ds = packer.open(OLD / case)
    seen = 0
    for split in ds.splits:
        for i in range(len(ds[split])):
            want = _sample_keys(expected, split, i)
            image, target = ds[split][i]
            np.testing.assert_array_equal(image, want.pop("image"))
            assert image.dtype == np.uint8 and image.shape[-1] == 3
            if isinstance(target, dict):
                assert sorted(target) == sorted(want)
                for key, value in target.items():
                    np.testing.assert_array_equal(np.asarray(value), want[key], err_msg=key)
                    assert np.asarray(value).dtype == want[key].dtype, key
            else:
                np.testing.assert_array_equal(np.asarray(target), want["target"])
            seen += 1
    assert seen == len({k.rsplit("/", 1)[0] for k in expected}) > 0


@pytest.mark.parametrize("case", CASES)
def test_readers_batch_the_old_images(case):
    from packer.keras import PackedSequence
    from packer.torch import PackedDataset

    expected = _expected(case)
    count = len(packer.open(OLD / case)["train"])
    images = np.stack([expected[f"train/{i}/image"] for i in range(count)])
    seq = PackedSequence(OLD / case, split="train", batch_size=count, shuffle=False)
    np.testing.assert_array_equal(seq[0][0], images)
    torch_images, _ = PackedDataset(OLD / case, split="train", batch_size=count, shuffle=False)[0]
    np.testing.assert_array_equal(torch_images.numpy(), images)


def test_old_packs_verify():
    from click.testing import CliRunner

    from packer.cli import main

    for case in CASES:
        result = CliRunner().invoke(main, ["verify", str(OLD / case)])
        assert result.exit_code == 0, (case, result.output)
