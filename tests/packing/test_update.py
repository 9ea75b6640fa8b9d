"""Re-running a pack after its sources changed, and packs that cannot be resumed or reused.

Issue 13, items 1 (an edited source is never served stale), 7 (interrupted or refused packs
say what to type) and the part of 11 about `.partial/lock` left behind.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

import packer
from packer import storage
from packer.cli import main, pack_command
from packer.errors import PackError
from packer.packing import convert, plan, session
from packer.synthetic import make_segmentation
from tests.fixtures.packs import manifest_hashes

SIZE = (32, 24)
SHARD = 5 * 32 * 24 * 4  # 5 samples per shard: train 3 shards, val 1


@pytest.fixture
def src(tmp_path) -> Path:
    return make_segmentation(tmp_path / "src", {"train": 12, "val": 4}, (48, 36))


def pack(src: Path, out: Path, **options) -> packer.reading.dataset.PackedDataset:
    return packer.pack(src, out=out, size=SIZE, shard_size=SHARD, workers=1, **options)


def paint_mask(src: Path, name: str, colour=(0, 0, 0)) -> str:
    """Set every pixel of one mask to one class colour (the edit of the issue)."""
    path = src / "train_labels" / name
    rgb = np.asarray(Image.open(path).convert("RGB")).copy()
    rgb[:] = colour
    Image.fromarray(rgb).save(path)
    return path.relative_to(src).as_posix()


def masks_of(ds, split: str = "train") -> dict[str, np.ndarray]:
    """Source mask path -> packed mask, for every sample of a split."""
    part = ds[split]
    batch = part.reader.read(np.arange(part.count))
    return {part.mask_source(i): np.array(batch["masks"][i]) for i in range(part.count)}


def shard_stamps(out: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in out.glob("*/*-of-*.npy")}


# -- item 1: an edited source is never served stale ----------------------------------------------


def test_an_edited_mask_is_repacked_and_only_its_shard_is_written_again(src, tmp_path):
    out = tmp_path / "out"
    pack(src, out)
    before = shard_stamps(out)
    edited = paint_mask(src, "scene_0003.png", (220, 20, 60))  # every pixel: disc (class 1)
    ds = pack(src, out)
    mask = masks_of(ds)[str(src / edited)]
    assert (mask == 1).all(), "the pack still serves the old labels"
    update = ds.manifest["run"]["update"]
    assert update["changed"] == [edited] and update["added"] == update["removed"] == []
    assert update["packed_shards"] == 1 and update["kept_shards"] == 3
    after = shard_stamps(out)
    rewritten = {name for name in before if after[name] != before[name]}
    assert len(rewritten) == 2 and all(n.startswith("train-") for n in rewritten)  # images, masks
    # the same bytes as a fresh pack of the edited sources, statistics included
    fresh = pack(src, tmp_path / "fresh")
    assert manifest_hashes(out) == manifest_hashes(tmp_path / "fresh")
    assert ds.manifest["stats"] == fresh.manifest["stats"]
    assert not (out / ".partial").exists()


def test_no_update_leaves_the_pack_and_says_what_changed(src, tmp_path):
    out = tmp_path / "out"
    args = [str(src), "--out", str(out), "--size", "32x24", "--no-progress"]
    assert CliRunner().invoke(pack_command, args).exit_code == 0
    hashes = manifest_hashes(out)
    edited = paint_mask(src, "scene_0001.png")
    result = CliRunner().invoke(pack_command, [*args, "--no-update"])
    assert result.exit_code == 0, result.output
    assert "out of date" in result.output and edited in result.output
    assert manifest_hashes(out) == hashes
    with pytest.warns(UserWarning, match="out of date"):
        packer.pack(src, out=out, size=SIZE, update=False)
    verify = CliRunner().invoke(main, ["verify", str(out), "--sources"])
    assert verify.exit_code == 1 and edited in verify.output
    assert CliRunner().invoke(pack_command, args).exit_code == 0  # updates
    assert CliRunner().invoke(main, ["verify", str(out), "--sources"]).exit_code == 0


def test_added_and_removed_sources_are_counted_and_other_splits_kept(src, tmp_path):
    out = tmp_path / "out"
    pack(src, out)
    val_before = {k: v for k, v in shard_stamps(out).items() if k.startswith("val-")}
    for folder in ("train", "train_labels"):
        shutil.copy(src / folder / "scene_0000.png", src / folder / "scene_0100.png")
        (src / folder / "scene_0005.png").unlink()
    result = CliRunner().invoke(
        pack_command, [str(src), "--out", str(out), "--size", "32x24", "--shard-size", str(SHARD)]
    )
    assert result.exit_code == 0, result.output
    assert "2 added (train/scene_0100.png, train_labels/scene_0100.png)" in result.output
    assert "2 removed (train/scene_0005.png, train_labels/scene_0005.png)" in result.output
    ds = packer.open(out)
    sources = {ds["train"].source(i) for i in range(ds["train"].count)}
    assert str(src / "train/scene_0100.png") in sources
    assert str(src / "train/scene_0005.png") not in sources
    assert {k: v for k, v in shard_stamps(out).items() if k.startswith("val-")} == val_before
    listed = set(manifest_hashes(out))
    on_disk = {
        p.relative_to(out).as_posix() for p in out.glob("*/*-of-*") if "receipt" not in p.name
    }
    assert on_disk == listed, "files of the old plan left behind"


def test_an_unchanged_pack_is_confirmed_without_hashing_sources(src, tmp_path, monkeypatch):
    out = tmp_path / "out"
    pack(src, out)
    hashed = []
    real = storage.sha256_file
    monkeypatch.setattr(storage, "sha256_file", lambda p: hashed.append(p) or real(p))
    stamp = (out / "dataset.json").stat().st_mtime_ns
    pack(src, out)
    assert hashed == [] and (out / "dataset.json").stat().st_mtime_ns == stamp
    # touched, not changed: hashed once, recorded, nothing packed
    image = src / "train" / "scene_0002.png"
    os.utime(image, ns=(image.stat().st_atime_ns, image.stat().st_mtime_ns + 10**9))
    before = shard_stamps(out)
    pack(src, out)
    assert [Path(p).name for p in hashed] == ["scene_0002.png"]
    assert shard_stamps(out) == before
    hashed.clear()
    pack(src, out)
    assert hashed == []
    assert CliRunner().invoke(main, ["verify", str(out)]).exit_code == 0


class Stop(Exception):
    """Raised inside a worker to interrupt a pack after its first shard."""


class StopAfterFirstShard(convert.Converter):
    """A converter that refuses to finalise a shard once one has a receipt (workers may be
    spawned: the class travels by name, and its state lives on disk)."""

    def finalize_shard(self, task, results):
        if any(self.out.glob("*/*.receipt.json")):
            raise Stop("interrupted")
        return super().finalize_shard(task, results)


def interrupt_after_first_shard(monkeypatch) -> None:
    monkeypatch.setattr(session, "Converter", StopAfterFirstShard)


def test_a_source_edited_while_a_pack_was_interrupted_is_packed_again(src, tmp_path, monkeypatch):
    out = tmp_path / "out"
    interrupt_after_first_shard(monkeypatch)
    with pytest.raises(Stop):
        pack(src, out)
    monkeypatch.undo()
    done = list(out.glob("*/*.receipt.json"))
    assert len(done) == 1
    first = json.loads(done[0].read_text())
    mask = next(p for p in first["sources"] if p.startswith("train_labels/"))
    paint_mask(src, Path(mask).name)
    ds = pack(src, out)
    assert (masks_of(ds)[str(src / mask)] == 0).all()
    assert ds.manifest["run"]["resumed_shards"] == 0


# -- item 7: interrupted or refused packs say what to type ---------------------------------------


def test_info_on_a_half_written_pack_and_the_command_that_finishes_it(src, tmp_path, monkeypatch):
    out = tmp_path / "out"
    args = [str(src), "--out", str(out), "--size", "32x24", "--shard-size", str(SHARD)]
    interrupt_after_first_shard(monkeypatch)
    CliRunner().invoke(pack_command, [*args, "--workers", "1", "--no-progress"])
    monkeypatch.undo()
    assert not (out / "dataset.json").exists()
    info = CliRunner().invoke(main, ["info", str(out)])
    assert info.exit_code == 0, info.output
    assert "unfinished npy pack" in info.output
    assert "1 of 4 done (train 1 of 3, val 0 of 1)" in info.output or (
        "1 of 4 done (train 0 of 3, val 1 of 1)" in info.output
    )
    assert f"finish it with: pack {src} --out {out} --size 32x24" in info.output
    other = CliRunner().invoke(pack_command, [*args, "--seed", "3"])
    assert other.exit_code == 1 and "Traceback" not in other.output
    assert "--seed 0 there, 3 here" in other.output
    assert f"`pack {src} --out {out}" in other.output
    assert not (out / ".partial" / "lock").exists()
    finished = CliRunner().invoke(pack_command, args)  # the same command finishes it
    assert finished.exit_code == 0, finished.output
    assert "resumed: 1 shard already finished" in finished.output


def test_a_different_pack_says_what_differs(src, tmp_path, monkeypatch):
    out = tmp_path / "out"
    pack(src, out)
    with pytest.raises(PackError, match="other options: size 32x24 there, 16x16 here"):
        packer.pack(src, out=out, size=(16, 16), shard_size=SHARD)
    elsewhere = shutil.copytree(src, tmp_path / "copy")
    with pytest.raises(PackError, match=f"other sources: it was packed from {src}"):
        pack(elsewhere, out)
    monkeypatch.setattr(plan, "CONVERTER_REVISION", plan.CONVERTER_REVISION + 1)
    with pytest.raises(PackError, match="another packer version"):
        pack(src, out)
    result = CliRunner().invoke(
        pack_command, [str(src), "--out", str(out), "--size", "16x16", "--shard-size", str(SHARD)]
    )
    assert result.exit_code == 1 and "--size 32x24 there, 16x16 here" in result.output
    assert "pass --overwrite" in result.output


def test_refused_and_up_to_date_runs_leave_no_lock(src, tmp_path):
    out = tmp_path / "out"
    pack(src, out)
    assert not (out / ".partial").exists()
    pack(src, out)  # nothing to do
    assert not (out / ".partial").exists()
    with pytest.raises(PackError):
        pack(src, out, seed=5)  # refused
    assert not (out / ".partial").exists()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(PackError, match="not a packer dataset"):
        pack(src, tmp_path / "mine")
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["notes.txt"]


def test_a_finished_pack_missing_a_shard_file_is_repaired(src, tmp_path):
    out = tmp_path / "out"
    args = [str(src), "--out", str(out), "--size", "32x24", "--shard-size", str(SHARD)]
    assert CliRunner().invoke(pack_command, args).exit_code == 0
    hashes = manifest_hashes(out)
    next(out.glob("val/*.masks.npy")).unlink()
    result = CliRunner().invoke(pack_command, args)
    assert result.exit_code == 0, result.output
    assert "updated: shard files were missing or cut short; packed 1 shard again, kept 3" in (
        result.output
    )
    assert manifest_hashes(out) == hashes
