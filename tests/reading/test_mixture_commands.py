"""What users look at for a mixture: `describe()` (draws per pack, share against the asked
proportion, repeats, runs, classes), its repr and saved form, and `packer bench` / `packer
preview` given a saved mixture; and a mixture's remote pack read through the same cache."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

import packer
from packer.cli import main
from packer.errors import MixtureError
from packer.reading.loader import Loader
from tests.fixtures.mixture import seg_pack


@pytest.fixture(scope="module")
def packs(tmp_path_factory):
    root = tmp_path_factory.mktemp("mixcmd")
    return seg_pack(root, 10, seed=0), seg_pack(root, 5, seed=1)


@pytest.fixture
def saved(packs, tmp_path):
    a, b = packs
    mix = packer.Mixture([packer.Stream(a, proportion=0.6), packer.Stream(b, repeat=3)])
    path = tmp_path / "mix.json"
    mix.save(path)
    return mix, path


def test_describe_shows_draws_share_against_asked_repeats_and_classes(saved):
    mix, _ = saved
    summary = mix.epoch("train", seed=1)
    a, b = summary.packs
    assert summary.size == 38 and (a.draws, b.draws) == (23, 15)  # 15 is 40% of 38 (rounded)
    assert a.asked == ("proportion", 0.6) and a.share == pytest.approx(23 / 38)
    assert b.repeats == 3 and a.repeats == pytest.approx(2.3)
    assert a.longest_run <= a.run_bound and b.longest_run <= b.run_bound
    text = mix.describe("train", seed=1)
    assert "proportion 0.6" in text and "repeat 3" in text and "classes (4)" in text
    assert repr(mix).startswith("Mixture([Stream(") and "repeat=3" in repr(mix)


def test_a_saved_mixture_loads_as_the_same_mixture_with_paths_beside_it(saved, packs):
    mix, path = saved
    data = json.loads(path.read_text())
    assert not data["streams"][0]["path"].startswith("/")  # relative: the file moves with packs
    again = packer.Mixture.load(path)
    assert [s.amount for s in again.streams] == [s.amount for s in mix.streams]
    assert np.array_equal(again.open().plan.order(0, 0), mix.open().plan.order(0, 0))
    path.write_text('{"packs": []}')
    with pytest.raises(MixtureError, match="not a mixture description"):
        packer.Mixture.load(path)


def test_packer_bench_takes_a_mixture(saved):
    _, path = saved
    result = CliRunner().invoke(main, ["bench", str(path), "--seconds", "0.1", "--batch-size", "8"])
    assert result.exit_code == 0, result.output
    assert "mixture reader, warm cache" in result.output and "alone" in result.output
    assert "mixture epoch 0 of split 'train'" in result.output and "repeat 3" in result.output


def test_packer_preview_takes_a_mixture(saved, tmp_path, packs):
    _, path = saved
    out = tmp_path / "grid.png"
    result = CliRunner().invoke(main, ["preview", str(path), "--out", str(out), "-n", "6"])
    assert result.exit_code == 0, result.output
    assert "the first 6 draws of epoch 0" in result.output
    assert Image.open(out).size[0] > 0


def test_a_remote_pack_in_a_mixture_reads_through_the_shard_cache(packs, tmp_path):
    import fsspec

    a, b = packs
    fsspec.filesystem("memory").put(f"{b}/", "memory://mixture-test/b/", recursive=True)
    local = packer.Mixture([packer.Stream(a), packer.Stream(b, repeat=2)])
    remote = packer.Mixture([packer.Stream(a), packer.Stream("memory://mixture-test/b", repeat=2)])
    cache = tmp_path / "cache"
    mine = Loader(remote, "train", 7, seed=3, cache_dir=cache)
    theirs = Loader(local, "train", 7, seed=3)
    for k in range(len(theirs)):
        assert all(
            np.array_equal(x, y) for x, y in zip(mine.batch(k), theirs.batch(k), strict=True)
        )
    assert any(p.suffix == ".npy" for p in cache.rglob("*"))  # b's shards came into the cache
