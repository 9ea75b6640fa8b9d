"""`--shard-size` is what lands on disk for compressed packs too: the plan estimates a record's
stored bytes from a few samples encoded as packing encodes them, the same for the same inputs,
and leaves raw packs' plans as they were."""

from __future__ import annotations

import json
import re
import shutil
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

import packer
from packer.cli import pack_command
from packer.cli.report import dry_run, human_bytes
from packer.errors import PackError
from packer.packing import make_plan
from packer.packing.options import PLAN_OPTIONS
from packer.packing.stored_size import SAMPLED, drawn
from packer.schema import record_bytes
from packer.synthetic import make_segmentation, shapes_scene

SIZE = (128, 96)  # JPEG q90 stores these scenes in about a tenth of their 36,864 bytes
SHARD = 200_000  # about 5 decoded records, about 50 stored ones
JPEG = {"encoding": "jpeg", "quality": 90}
NOT_LAST = slice(0, -1)  # a split's last shard holds what is left


@pytest.fixture(scope="module")
def photos(tmp_path_factory) -> Path:
    """300 photo-like scenes (smooth ground with some texture, shapes) in three class folders."""
    root = tmp_path_factory.mktemp("photos")
    rng = np.random.default_rng(7)
    for name in ("bars", "boxes", "discs"):
        (root / name).mkdir()
        for i in range(100):
            image, _ = shapes_scene(rng, *SIZE)
            Image.fromarray(image).save(root / name / f"{name}_{i:03d}.png")
    return root


def shard_bytes(out: Path) -> list[list[int]]:
    """Each split's shards' bytes on disk, in order: the data files (not the sources list)."""
    manifest = json.loads((out / "dataset.json").read_text())
    return [
        [sum(f["bytes"] for f in s["files"] if not f["path"].endswith(".sources.json"))
         for s in split["shards"]]
        for split in manifest["splits"].values()
    ]  # fmt: skip


@pytest.mark.parametrize("fmt", ["npy", "tfrecord"])
def test_compressed_shards_hold_about_the_asked_bytes(photos, tmp_path, fmt):
    packer.pack(photos, tmp_path / fmt, format=fmt, size=SIZE, shard_size=SHARD, workers=1, **JPEG)
    (sizes,) = shard_bytes(tmp_path / fmt)
    assert len(sizes) >= 4
    # Planned from the decoded bytes, each would hold 5 records of about 3.7 KB: 0.1 x SHARD.
    assert all(0.8 * SHARD <= size <= 1.2 * SHARD for size in sizes[NOT_LAST]), sizes
    assert sizes[-1] <= 1.2 * SHARD


def test_recordio_counts_the_mask_its_encoded_payloads_hold_as_png(tmp_path):
    src = make_segmentation(tmp_path / "src", {"train": 300}, SIZE)
    plan = make_plan(src, tmp_path / "rec", "recordio", SIZE, shard_size=SHARD, **JPEG)
    assert any("samples encoded as jpeg q90, png)" in note for note in plan.notes), plan.notes
    packer.pack(src, tmp_path / "rec", "recordio", SIZE, shard_size=SHARD, workers=1, **JPEG)
    (sizes,) = shard_bytes(tmp_path / "rec")
    assert len(sizes) >= 4
    # Counting the 12,288-byte mask raw, each would hold 12 records of about 4 KB: 0.25 x SHARD.
    assert all(0.8 * SHARD <= size <= 1.2 * SHARD for size in sizes[NOT_LAST]), sizes
    assert sizes[-1] <= 1.2 * SHARD


def test_python_samples_plan_from_the_stored_bytes_too(photos, tmp_path):
    samples = [{"images": str(p), "labels": p.parent.name} for p in sorted(photos.rglob("*.png"))]
    packer.pack(samples, tmp_path / "out", size=SIZE, shard_size=SHARD, workers=1, **JPEG)
    (sizes,) = shard_bytes(tmp_path / "out")
    assert len(sizes) >= 4
    assert all(0.8 * SHARD <= size <= 1.2 * SHARD for size in sizes[NOT_LAST]), sizes
    shown = packer.pack(
        samples, tmp_path / "out", size=SIZE, shard_size=SHARD, dry_run=True, **JPEG
    )
    assert f"estimated from {SAMPLED} samples encoded as jpeg q90" in shown


def test_the_same_inputs_give_the_same_shards_and_a_second_run_has_nothing_to_do(photos, tmp_path):
    first, again = (make_plan(photos, tmp_path / "out", size=SIZE, shard_size=SHARD, **JPEG)
                    for _ in range(2))  # fmt: skip
    assert first.shard_fingerprints == again.shard_fingerprints
    assert [s.samples for s in first.all_shards] == [s.samples for s in again.all_shards]
    other = make_plan(photos, tmp_path / "tf", "tfrecord", SIZE, shard_size=SHARD, **JPEG)
    assert [s.samples for s in other.all_shards] == [s.samples for s in first.all_shards]
    args = [str(photos), "--out", str(tmp_path / "out"), "--size", "128x96", "--encoding", "jpeg"]
    args += ["--quality", "90", "--shard-size", "200KB", "--workers", "1", "--no-progress"]
    dry = CliRunner().invoke(pack_command, [*args, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "shard size (--shard-size) 200,000 bytes: about 3," in dry.output
    assert f"estimated from {SAMPLED} samples encoded as jpeg q90" in dry.output
    assert CliRunner().invoke(pack_command, args).exit_code == 0
    second = CliRunner().invoke(pack_command, args)
    assert second.exit_code == 0 and "nothing to do" in second.output, second.output


def test_raw_packs_plan_from_the_decoded_bytes_as_before(photos, tmp_path):
    plan = make_plan(photos, tmp_path / "out", size=SIZE, shard_size=SHARD)
    per_shard = SHARD // record_bytes(plan.config.fields)
    assert [len(s.samples) for s in plan.all_shards][NOT_LAST] == [per_shard] * 59
    assert not any("as stored" in note for note in plan.notes)
    shown = dry_run(plan)
    assert f"split train: 300 samples in 60 shards, ~{human_bytes(300 * 36_864)}\n" in shown
    assert "estimated" not in shown


def test_the_dry_run_shows_about_the_bytes_a_compressed_pack_stores(photos, tmp_path):
    args = [str(photos), "--out", str(tmp_path / "out"), "--size", "128x96", "--encoding", "jpeg"]
    args += ["--quality", "90", "--workers", "1", "--no-progress"]
    dry = CliRunner().invoke(pack_command, [*args, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    line = re.search(
        r"split train: 300 samples in 1 shard, ~([\d.]+) MB \(estimated, jpeg q90\)", dry.output
    )
    assert line, dry.output
    assert CliRunner().invoke(pack_command, args).exit_code == 0
    ((stored,),) = shard_bytes(tmp_path / "out")
    # The decoded bytes would show 11.1 MB, about ten times what lands on disk.
    assert 0.85 * stored <= float(line[1]) * 1e6 <= 1.15 * stored, (line[0], stored)


def test_png_packs_estimate_their_own_bytes(photos, tmp_path):
    plan = make_plan(photos, tmp_path / "out", size=SIZE, shard_size=SHARD, encoding="png")
    note = next(n for n in plan.notes if "as stored" in n)
    assert f"estimated from {SAMPLED} samples encoded as png" in note
    per_shard = len(plan.all_shards[0].samples)
    assert 5 < per_shard < 60  # lossless: between the raw bytes and JPEG's
    assert f"), {per_shard} samples a shard" in note


def test_a_shard_smaller_than_a_sample_holds_one(photos, tmp_path):
    plan = make_plan(photos, tmp_path / "out", size=SIZE, shard_size=1000, **JPEG)
    assert {len(s.samples) for s in plan.all_shards} == {1}
    assert any(n.endswith("), 1 sample a shard") for n in plan.notes)


def test_the_help_says_how_many_samples_the_estimate_encodes():
    shard_size = next(o for o in PLAN_OPTIONS if o.name == "shard_size")
    assert f"estimated from {SAMPLED} samples encoded" in shard_size.help


def test_the_estimate_samples_are_seeded_and_spread_over_the_set():
    items = list(range(1000))
    picked = drawn(items, seed=0)
    assert picked == drawn(items, seed=0) != drawn(items, seed=1)
    assert len(picked) == SAMPLED
    for i, p in enumerate(picked):  # one in each stretch
        assert i * 1000 // SAMPLED <= p < (i + 1) * 1000 // SAMPLED
    assert drawn(items[:10], seed=0) == items[:10]  # fewer than SAMPLED: all of them


def test_the_space_check_counts_what_a_compressed_pack_stores(photos, tmp_path, monkeypatch):
    free = 4_000_000  # the disk as `shutil.disk_usage` reports it
    monkeypatch.setattr(shutil, "disk_usage", lambda path: SimpleNamespace(free=free))
    decoded = 300 * 36_864  # 11.1 MB: more than twice the free space, refused raw as before
    assert decoded > 2 * free
    with pytest.raises(
        PackError, match=r"needs about 11\.1 MB .* \(uncompressed\), which has 4\.0"
    ):
        packer.pack(photos, tmp_path / "raw", size=SIZE, workers=1)
    # JPEG stores about 1.1 MB, 1.4 MB with the check's margin: it packs, without a warning.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        packer.pack(photos, tmp_path / "jpeg", size=SIZE, workers=1, **JPEG)
    assert not [w for w in caught if "needs about" in str(w.message)]
    assert 0.8e6 < sum(map(sum, shard_bytes(tmp_path / "jpeg"))) < 1.4e6
    free = 1_000_000  # below the estimate (read when the pack asks): a warning saying so
    with pytest.warns(UserWarning, match=r"\(estimated as stored, jpeg q90, plus 25%\), which"):
        packer.pack(photos, tmp_path / "tight", size=SIZE, workers=1, **JPEG)
