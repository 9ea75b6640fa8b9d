"""An update of a compressed pack cuts its shards by the estimate the pack was made with: an
edit to one of the samples the estimate encoded packs again that sample's shard only, where
a new estimate would move every boundary. Other options, `--overwrite` or a pack that
recorded no estimate: estimated anew, as a fresh pack is."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

import packer
from packer.cli import pack_command
from packer.packing import convert, make_plan, session
from packer.packing.stored_size import SAMPLED, drawn
from packer.synthetic import shapes_scene
from tests.fixtures.packs import manifest_hashes

SIZE = (64, 48)
SHARD = 12_000  # about 8 samples of about 1,500 bytes as JPEG q90: 8 shards of 60
JPEG = {"encoding": "jpeg", "quality": 90}


@pytest.fixture
def src(tmp_path) -> Path:
    """60 photo-like scenes in two class folders."""
    root = tmp_path / "src"
    rng = np.random.default_rng(3)
    for name in ("bars", "discs"):
        (root / name).mkdir(parents=True)
        for i in range(30):
            image, _ = shapes_scene(rng, *SIZE)
            Image.fromarray(image).save(root / name / f"{name}_{i:02d}.png")
    return root


def pack(src: Path, out: Path, **options) -> packer.reading.dataset.PackedDataset:
    return packer.pack(src, out=out, size=SIZE, shard_size=SHARD, workers=1, **JPEG | options)


def edit_a_drawn_source(src: Path, keep: frozenset[str] = frozenset()) -> str:
    """Replace the first sample the estimate encodes (but those in `keep`) with noise, which
    JPEG stores in about five times a scene's bytes: a new estimate of the edited set is
    larger."""
    samples = make_plan(src, size=SIZE, shard_size=SHARD, **JPEG).scan.samples
    first = next(s for s in drawn(samples, 0) if s.image not in keep)
    noise = np.random.default_rng(11).integers(0, 256, (SIZE[1], SIZE[0], 3), dtype=np.uint8)
    Image.fromarray(noise).save(src / first.image)
    return first.image


def shard_digests(out: Path) -> dict[str, str]:
    """Shard file name -> SHA-256 of its bytes, for every shard file on disk."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in out.glob("*/*-of-*")}


def image_of(ds, source: Path) -> np.ndarray:
    """The packed (decoded) image whose source is `source`."""
    part = ds["train"]
    index = next(i for i in range(part.count) if part.source(i) == str(source))
    return np.array(part.reader.read(np.array([index]))["images"][0])


def test_an_edited_drawn_source_repacks_only_its_shard(src, tmp_path):
    out = tmp_path / "out"
    recorded = pack(src, out).manifest["stored_size"]
    assert recorded == {"record_bytes": 1500, "samples": SAMPLED, "encodings": "jpeg q90"}
    before = shard_digests(out)
    edited = edit_a_drawn_source(src)
    old = image_of(packer.open(out), src / edited)
    fresh = make_plan(src, tmp_path / "fresh", size=SIZE, shard_size=SHARD, **JPEG)
    assert fresh.stored.record > 1500  # a new estimate would cut every shard elsewhere
    assert len(fresh.all_shards) != len(before) // 3
    ds = pack(src, out)
    update = ds.manifest["run"]["update"]
    assert update["changed"] == [edited]
    assert update["packed_shards"] == 1 and update["kept_shards"] == 7
    after = shard_digests(out)
    assert after.keys() == before.keys()
    rewritten = {name for name in before if after[name] != before[name]}
    assert len(rewritten) == 3  # the shard's images, labels and sources list
    assert ds.manifest["stored_size"] == recorded
    # the edited sample holds the new image, as a fresh pack of the edited sources stores it
    new = image_of(pack(src, tmp_path / "fresh"), src / edited)
    assert np.array_equal(image_of(ds, src / edited), new)
    noise = np.asarray(Image.open(src / edited)).astype(int)  # JPEG keeps little of it
    assert np.abs(new - noise).mean() < np.abs(old - noise).mean() - 20


def test_the_dry_run_says_the_estimate_is_the_packs_own(src, tmp_path):
    out = tmp_path / "out"
    args = [str(src), "--out", str(out), "--size", "64x48", "--encoding", "jpeg"]
    args += ["--quality", "90", "--shard-size", str(SHARD), "--workers", "1", "--no-progress"]
    dry = CliRunner().invoke(pack_command, [*args, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "the pack's own" not in dry.output
    assert CliRunner().invoke(pack_command, args).exit_code == 0
    edit_a_drawn_source(src)
    dry = CliRunner().invoke(pack_command, [*args, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert (
        f"about 1,500 bytes a sample as stored (estimated from {SAMPLED} samples encoded as "
        "jpeg q90, the pack's own, kept for its updates), 8 samples a shard"
    ) in dry.output
    replacing = CliRunner().invoke(pack_command, [*args, "--overwrite", "--dry-run"])
    assert replacing.exit_code == 0, replacing.output  # --overwrite estimates anew: not its own
    assert "bytes a sample as stored" in replacing.output
    assert "the pack's own" not in replacing.output


def test_other_options_or_overwrite_estimate_anew(src, tmp_path):
    out, again, fresh = tmp_path / "out", tmp_path / "again", tmp_path / "fresh"
    pack(src, out)
    pack(src, again)
    edit_a_drawn_source(src)
    q80 = make_plan(src, out, size=SIZE, shard_size=SHARD, encoding="jpeg", quality=80)
    assert not q80.stored.own and q80.stored.what == "jpeg q80"
    ds = pack(src, out, quality=80, overwrite=True)
    assert ds.manifest["stored_size"]["encodings"] == "jpeg q80"
    assert ds.manifest["stored_size"]["record_bytes"] == q80.stored.record
    # the same options, replaced: the shards a fresh pack of the edited sources has
    assert make_plan(src, again, size=SIZE, shard_size=SHARD, **JPEG).stored.own
    replaced = pack(src, again, overwrite=True)
    made = pack(src, fresh)
    assert manifest_hashes(again) == manifest_hashes(fresh)
    assert replaced.manifest["stored_size"] == made.manifest["stored_size"]
    assert made.manifest["stored_size"]["record_bytes"] > 1500


@pytest.mark.parametrize(
    "recorded",
    [None, {"record_bytes": 0, "samples": 24, "encodings": "jpeg q90"}, "1500"],
    ids=["older pack", "no bytes", "not an estimate"],
)
def test_a_pack_that_recorded_no_estimate_is_estimated_as_before(src, tmp_path, recorded):
    out = tmp_path / "out"
    pack(src, out)
    manifest = json.loads((out / "dataset.json").read_text())
    del manifest["stored_size"]  # as packs made before it was recorded
    if recorded is not None:  # or a record that is no estimate
        manifest["stored_size"] = recorded
    (out / "dataset.json").write_text(json.dumps(manifest))
    edit_a_drawn_source(src)
    plan = make_plan(src, out, size=SIZE, shard_size=SHARD, **JPEG)
    assert not plan.stored.own and plan.stored.record > 1500
    ds = pack(src, out)
    assert ds.manifest["stored_size"]["record_bytes"] == plan.stored.record
    pack(src, tmp_path / "fresh")
    assert manifest_hashes(out) == manifest_hashes(tmp_path / "fresh")


def test_raw_packs_record_no_estimate(src, tmp_path):
    ds = packer.pack(src, out=tmp_path / "raw", size=SIZE, shard_size=SHARD, workers=1)
    assert "stored_size" not in ds.manifest


class Stop(Exception):
    """Raised inside a worker to interrupt a pack after its first shard."""


class StopAfterFirstShard(convert.Converter):
    """A converter that refuses to finalise a shard once one has a receipt."""

    def finalize_shard(self, task, results):
        if any(self.out.glob("*/*.receipt.json")):
            raise Stop("interrupted")
        return super().finalize_shard(task, results)


def test_a_resumed_pack_keeps_its_estimate_and_finished_shards(src, tmp_path, monkeypatch):
    out = tmp_path / "out"
    monkeypatch.setattr(session, "Converter", StopAfterFirstShard)
    with pytest.raises(Stop):
        pack(src, out)
    monkeypatch.undo()
    marker = json.loads((out / ".partial" / "plan.json").read_text())
    assert marker["stored_size"]["record_bytes"] == 1500
    (done,) = out.glob("*/*.receipt.json")
    finished = json.loads(done.read_text())["sources"]
    edit_a_drawn_source(src, keep=frozenset(finished))  # one of a shard still to pack
    ds = pack(src, out)
    assert ds.manifest["run"]["resumed_shards"] == 1
    assert ds.manifest["stored_size"]["record_bytes"] == 1500


def test_python_samples_keep_their_packs_estimate_too(src, tmp_path):
    samples = [{"images": str(p), "labels": p.parent.name} for p in sorted(src.rglob("*.png"))]
    out = tmp_path / "out"
    packer.pack(samples, out, size=SIZE, shard_size=SHARD, workers=1, **JPEG)
    edit_a_drawn_source(src)
    fresh = packer.pack(
        samples, tmp_path / "new", size=SIZE, shard_size=SHARD, dry_run=True, **JPEG
    )
    assert "about 1,600 bytes a sample" in fresh  # a new estimate would move every boundary
    ds = packer.pack(samples, out, size=SIZE, shard_size=SHARD, workers=1, **JPEG)
    assert ds.manifest["run"]["update"]["packed_shards"] == 1
    assert ds.manifest["stored_size"]["record_bytes"] == 1500


def test_a_pack_in_a_bucket_keeps_its_estimate(src, s3, bucket):
    out = f"{bucket}/packed"
    packer.pack(src, out=out, size=SIZE, shard_size=SHARD, workers=1, **JPEG)
    edit_a_drawn_source(src)
    assert make_plan(src, out, size=SIZE, shard_size=SHARD, **JPEG).stored.own
    ds = packer.pack(src, out=out, size=SIZE, shard_size=SHARD, workers=1, **JPEG)
    assert ds.manifest["run"]["update"]["packed_shards"] == 1
