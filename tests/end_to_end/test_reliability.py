"""Bad inputs, interruptions, corruption, full disks and concurrent use, on real processes."""

from __future__ import annotations

import hashlib
import os
import resource
import signal
import subprocess
import sys
import time
from concurrent.futures import Future
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import packer
from packer.errors import PackError
from packer.formats import FORMATS
from packer.packing import make_plan, schedule
from packer.packing.convert import Converter
from packer.synthetic import make_segmentation
from tests.fixtures.corpus import BLUE, GREEN, RED, exif_rotated_jpeg, write_classification_corpus
from tests.fixtures.packs import manifest_hashes
from tests.fixtures.processes import (
    children_of,
    finished_shards,
    gone,
    pack_cmd,
    wait_for_receipts,
)


def tree_digest(root: Path) -> dict[str, str]:
    """Hash of every file under root, to prove sources are never modified."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


# -- bad input ---------------------------------------------------------------------------------


def test_bad_input_corpus_is_packed_or_rejected_with_reasons(tmp_path):
    src = tmp_path / "src"
    expected = write_classification_corpus(src)
    before = tree_digest(src)
    out = tmp_path / "out"
    result = subprocess.run(
        pack_cmd(
            *(src, out, "--size", "40x30", "--resize", "stretch", "--interpolation", "nearest"),
            *("--dtype", "uint8"),  # the corpus holds a 16-bit PNG among 8-bit pictures
        ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert tree_digest(src) == before
    ds = packer.open(out)
    rejected = {r["path"]: r["reason"] for r in ds.manifest["rejected"]}
    packed = {
        Path(ds["train"].source(i)).relative_to(src).as_posix(): i for i in range(ds["train"].count)
    }
    for rel, expect in expected.items():
        if expect == "packed":
            assert rel in packed, f"{rel} was not packed: {rejected.get(rel)}"
        else:
            assert expect in rejected[rel].lower(), (rel, rejected[rel])
    assert any("loop" in r or "symlink" in r for p, r in rejected.items() if "loop" in p)
    assert f"packed {len(packed)} samples" in result.stdout
    assert f"rejected: {len(rejected)} (" in result.stdout

    images = ds["train"].reader.read(np.arange(ds["train"].count))["images"]
    pixel = lambda rel: images[packed[rel]]  # noqa: E731
    assert np.abs(pixel("a/cmyk.jpg").astype(int) - RED).max() <= 12
    assert (pixel("a/sixteen.png") == 100).all()
    assert (pixel("a/rgba.png") == GREEN).all()
    assert (pixel("b/palette.gif") == BLUE).all()
    assert (pixel("b/one.png") == BLUE).all()
    _, upright = exif_rotated_jpeg()
    assert np.abs(pixel("b/rotated.jpg").astype(int) - upright).mean() < 8


def test_strict_and_max_rejects_stop_the_pack(tmp_path):
    src = tmp_path / "src"
    write_classification_corpus(src)
    strict = subprocess.run(
        pack_cmd(src, tmp_path / "a", "--size", "16", "--strict", "--dtype", "uint8"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert strict.returncode == 1 and "rejected" in strict.stderr
    assert not (tmp_path / "a" / "dataset.json").exists()
    capped = subprocess.run(
        pack_cmd(src, tmp_path / "b", "--size", "16", "--max-rejects", "3", "--dtype", "uint8"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert capped.returncode == 1 and "more than the 3 allowed" in capped.stderr
    roomy = subprocess.run(
        pack_cmd(src, tmp_path / "c", "--size", "16", "--max-rejects", "50", "--dtype", "uint8"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert roomy.returncode == 0, roomy.stderr


def test_segmentation_pairing_problems_are_rejected(tmp_path):
    src = make_segmentation(tmp_path / "src", {"train": 5}, (32, 24))
    images, masks = sorted((src / "train").iterdir()), sorted((src / "train_labels").iterdir())
    masks[0].unlink()  # image without a mask
    images[1].unlink()  # mask without an image
    Image.open(masks[2]).resize((20, 10)).save(masks[2])  # mask of another size
    ds = packer.pack(src, out=tmp_path / "p", size=(32, 24))
    reasons = {Path(r["path"]).name: r["reason"] for r in ds.manifest["rejected"]}
    assert ds["train"].count == 2
    assert "no mask" in reasons[images[0].name]
    assert "no image" in reasons[masks[1].name] or "without" in reasons[masks[1].name]
    assert "20x10" in reasons[masks[2].name]


# -- interruption ------------------------------------------------------------------------------


@pytest.mark.parametrize("after", [0, 1, 7, 25])
def test_sigkill_at_any_point_then_rerun_gives_identical_output(many_shards, tmp_path, after):
    src, args, reference = many_shards
    out = tmp_path / "out"
    proc = subprocess.Popen(
        pack_cmd(src, out, *args, "--workers", "2"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    if after:
        wait_for_receipts(out, after, proc)
    else:
        time.sleep(0.3)  # during start-up and the first chunks
    proc.kill()
    proc.wait()
    assert not (out / "dataset.json").exists()
    finished = finished_shards(out)
    stamps = {
        p: p.stat().st_mtime_ns for p in out.glob("train/*") if p.name.split(".")[0] in finished
    }
    subprocess.run(pack_cmd(src, out, *args), check=True, capture_output=True, timeout=120)
    assert manifest_hashes(out) == manifest_hashes(reference)
    assert not list(out.rglob(".tmp-*")) and not (out / ".partial").exists()
    assert all(p.stat().st_mtime_ns == t for p, t in stamps.items()), "finished shards rewritten"
    assert len(stamps) >= 3 * after  # three files per finished shard


def _as_from_a_shell() -> None:
    """The pack starts with Ctrl-C's default action, as from an interactive shell, whatever
    this test process inherited: a shell without job control starts a background command
    (`make test &` in a script) with SIGINT ignored, Python keeps it so, and an ignored
    SIGINT is inherited across exec."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupted(src, args, out, sig: int) -> tuple[int, str, set[int]]:
    """A 2-worker pack sent `sig` once two shards are finished: its exit code, its stderr
    and the worker processes it had."""
    proc = subprocess.Popen(
        pack_cmd(src, out, *args, "--workers", "2"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_as_from_a_shell,
    )
    wait_for_receipts(out, 2, proc)
    workers = children_of(proc.pid)
    assert workers
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=30)  # a guard against a hang, not a timing
    return proc.returncode, stderr, workers


def test_ctrl_c_stops_workers_cleans_up_and_says_how_to_resume(many_shards, tmp_path):
    src, args, reference = many_shards
    out = tmp_path / "out"
    returncode, stderr, workers = _interrupted(src, args, out, signal.SIGINT)
    assert returncode == 130
    assert len(finished_shards(out)) < 40  # it stopped at once rather than finishing
    assert "run the same command again to resume" in stderr
    assert "Traceback" not in stderr
    assert gone(workers), "orphan worker processes"
    assert not list(out.rglob(".tmp-*")) and not list(out.rglob("*.part"))
    subprocess.run(pack_cmd(src, out, *args), check=True, capture_output=True, timeout=120)
    assert manifest_hashes(out) == manifest_hashes(reference)


def test_sigterm_stops_the_pack_as_ctrl_c_does_and_exits_143(many_shards, tmp_path):
    src, args, _ = many_shards
    out = tmp_path / "out"
    returncode, stderr, workers = _interrupted(src, args, out, signal.SIGTERM)
    assert returncode == 128 + signal.SIGTERM, stderr
    assert "interrupted: finished shards are kept" in stderr
    assert "run the same command again to resume:" in stderr and f"pack {src} " in stderr
    assert "Traceback" not in stderr
    assert gone(workers), "orphan worker processes"
    assert not list(out.rglob(".tmp-*")) and not list(out.rglob("*.part"))
    assert not (out / ".partial" / "parts").exists() and not (out / "dataset.json").exists()
    assert 2 <= len(finished_shards(out)) < 40  # stopped at once; finished shards kept


def test_workers_die_with_a_pack_killed_by_sigkill(many_shards, tmp_path):
    src, args, _ = many_shards
    proc = subprocess.Popen(
        pack_cmd(src, tmp_path / "out", *args, "--workers", "2"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for_receipts(tmp_path / "out", 1, proc)
    workers = children_of(proc.pid)
    assert workers
    proc.kill()
    proc.wait()
    assert gone(workers), "workers outlived their killed parent"


class InterruptedEngine:
    """An engine whose user presses Ctrl-C as its second task is submitted, and whose workers
    cannot be stopped cleanly afterwards (gone already, say)."""

    name, workers, shares_disk = "interrupted", 1, True

    def __init__(self) -> None:
        self.submitted = 0
        self.stops: list[bool] = []

    def start(self, converter) -> None:
        pass

    def submit(self, method: str, *args) -> Future:
        self.submitted += 1
        if self.submitted == 2:
            raise KeyboardInterrupt
        return Future()  # never done

    def stop(self, cancel: bool = False) -> None:
        self.stops.append(cancel)
        raise RuntimeError("the workers are gone already")


def test_an_engine_that_fails_to_stop_does_not_hide_ctrl_c(many_shards, tmp_path):
    src, _, _ = many_shards
    plan = make_plan(src, tmp_path / "out", size=(96, 72), shard_size=96 * 72 * 4)
    assert sum(len(s.chunks) for s in plan.shard_tasks()) >= 2
    engine = InterruptedEngine()
    with pytest.raises(KeyboardInterrupt):
        schedule.run(engine, Converter(plan.config), plan.shard_tasks(), False)
    assert engine.stops == [True]  # cancelled once, its failure not raised over the interrupt


# -- integrity ---------------------------------------------------------------------------------


@pytest.fixture(params=FORMATS)
def packed(request, seg_src, tmp_path) -> Path:
    out = tmp_path / request.param
    packer.pack(seg_src, out=out, format=request.param, size=(32, 24))
    return out


def _shard_file(out: Path) -> Path:
    files = [f["path"] for s in packer.open(out)["train"].shards for f in s["files"]]
    return out / next(f for f in files if not f.endswith(".json"))


def test_verify_names_a_flipped_byte_in_every_format(packed):
    shard = _shard_file(packed)
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0x01
    shard.write_bytes(bytes(data))
    result = subprocess.run(
        [sys.executable, "-m", "packer", "verify", str(packed)], capture_output=True, text=True
    )
    assert result.returncode == 1 and shard.name in result.stderr and "sha256" in result.stderr


def test_verify_names_a_missing_shard_file_and_every_other_is_checked(packed):
    shard = _shard_file(packed)
    shard.unlink()
    result = subprocess.run(
        [sys.executable, "-m", "packer", "verify", str(packed)], capture_output=True, text=True
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.splitlines() == [f"FAIL {shard}: missing"]


def test_truncated_shard_is_named_by_verify_and_by_readers(packed):
    shard = _shard_file(packed)
    with open(shard, "r+b") as f:
        f.truncate(shard.stat().st_size - 100)
    result = subprocess.run(
        [sys.executable, "-m", "packer", "verify", str(packed)], capture_output=True, text=True
    )
    assert result.returncode == 1 and shard.name in result.stderr
    split = packer.open(packed)["train"]
    with pytest.raises((OSError, ValueError), match=shard.name):
        split.reader.read(np.arange(split.count))


# -- full disk ---------------------------------------------------------------------------------


def _mount_tmpfs(path: Path, size: str) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    return (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True
        ).returncode
        == 0
    )


def _no_bigger_files(limit: int):
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def test_full_disk_gives_a_clear_error_and_a_later_run_completes(tmp_path):
    src = make_segmentation(tmp_path / "src", {"train": 30}, (160, 120))
    before = tree_digest(src)
    args = ["--size", "160x120", "--shard-size", str(10 * 160 * 120 * 4)]
    disk = tmp_path / "disk"
    mounted = _mount_tmpfs(disk, "1m")
    try:
        out = disk / "out"
        if mounted:  # 2.3 MB planned, 1 MB free: refused before anything is written
            refused = subprocess.run(pack_cmd(src, out, *args), capture_output=True, text=True)
            assert refused.returncode == 1 and "--force" in refused.stderr
            assert "Traceback" not in refused.stderr and not out.exists()
        limit = None if mounted else _no_bigger_files(600_000)
        result = subprocess.run(
            pack_cmd(src, out, *args, "--workers", "1", "--force"),
            capture_output=True,
            text=True,
            timeout=120,
            preexec_fn=limit,
        )
        assert result.returncode == 1, result.stdout
        assert "no space left" in result.stderr and "resume" in result.stderr
        assert "Traceback" not in result.stderr
        assert not (out / "dataset.json").exists()
        assert tree_digest(src) == before
        if mounted:
            subprocess.run(["mount", "-o", "remount,size=64m", str(disk)], check=True)
        subprocess.run(pack_cmd(src, out, *args), check=True, capture_output=True, timeout=120)
        assert packer.open(out)["train"].count == 30
        assert subprocess.run([sys.executable, "-m", "packer", "verify", str(out)]).returncode == 0
    finally:
        if mounted:
            subprocess.run(["umount", str(disk)], check=False)


# -- concurrency -------------------------------------------------------------------------------


def test_a_second_pack_into_the_same_folder_is_refused(tmp_path):
    src = make_segmentation(tmp_path / "src", {"train": 1}, (1024, 768))
    for i in range(1, 100):  # many links to one big PNG pair: slow to pack, quick to make
        os.link(src / "train" / "scene_0000.png", src / "train" / f"scene_{i:04d}.png")
        os.link(
            src / "train_labels" / "scene_0000.png", src / "train_labels" / f"scene_{i:04d}.png"
        )
    args = ["--size", "80x60", "--shard-size", str(80 * 60 * 4 * 10), "--workers", "1"]
    out = tmp_path / "out"
    first = subprocess.Popen(
        pack_cmd(src, out, *args), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    wait_for_receipts(out, 1, first)
    second = subprocess.run(pack_cmd(src, out, *args), capture_output=True, text=True, timeout=60)
    assert second.returncode == 1 and "being written by another pack" in second.stderr, (
        second.stdout + second.stderr
    )
    assert first.wait(timeout=120) == 0
    assert subprocess.run([sys.executable, "-m", "packer", "verify", str(out)]).returncode == 0
    with pytest.raises(PackError, match="already holds a different pack"):
        packer.pack(src, out=out, size=(50, 50))


_READ_ALL = """
import sys, numpy as np, packer
split = packer.open(sys.argv[1])["train"]
for _ in range(5):
    data = split.reader.read(np.random.default_rng().permutation(split.count))
print(int(data["images"].astype(np.int64).sum()), int(data["masks"].astype(np.int64).sum()))
"""


def test_many_reader_processes_on_one_pack(many_shards):
    _, _, reference = many_shards
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _READ_ALL, str(reference)], stdout=subprocess.PIPE, text=True
        )
        for _ in range(6)
    ]
    outputs = {p.communicate(timeout=120)[0] for p in procs}
    assert all(p.returncode == 0 for p in procs)
    split = packer.open(reference)["train"]
    data = split.reader.read(np.arange(split.count))
    expected = f"{data['images'].astype(np.int64).sum()} {data['masks'].astype(np.int64).sum()}"
    assert outputs == {expected + "\n"}


# -- readers under load ------------------------------------------------------------------------


def test_memory_stays_flat_over_twenty_epochs(many_shards):
    from packer.keras import PackedSequence

    _, _, reference = many_shards
    seq = PackedSequence(reference, batch_size=8, one_hot=True, normalize="unit")

    def rss_kb() -> int:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")

    samples = []
    for epoch in range(20):
        for i in range(len(seq)):
            seq[i]
        seq.on_epoch_end()
        if epoch in (2, 19):
            samples.append(rss_kb())
    assert samples[1] - samples[0] < 8 * 1024, f"RSS grew {samples[1] - samples[0]} kB"


_PEAK_RSS = """
import resource, subprocess, sys
subprocess.run([sys.executable, "-m", "packer", "pack", *sys.argv[1:]], check=True,
               capture_output=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)  # kB, largest descendant
"""


def test_pack_memory_is_bounded_and_independent_of_dataset_size(tmp_path):
    src = make_segmentation(tmp_path / "src", {"train": 12}, (1024, 768))  # colour masks
    images, masks = sorted((src / "train").iterdir()), sorted((src / "train_labels").iterdir())
    big = tmp_path / "big"
    for folder in ("train", "train_labels"):
        (big / folder).mkdir(parents=True)
    os.link(src / "class_dict.csv", big / "class_dict.csv")
    for k in range(4):  # the same files four times over: 4x the dataset, same images
        for image, mask in zip(images, masks, strict=True):
            os.link(image, big / "train" / f"{k}_{image.name}")
            os.link(mask, big / "train_labels" / f"{k}_{mask.name}")
    peaks = []
    for source in (src, big):
        args = [
            str(source),
            "--out",
            str(tmp_path / f"{source.name}-out"),
            "--size",
            "512x384",
            "--workers",
            "2",
            "--shard-size",
            "8MB",
            "--no-progress",
        ]
        result = subprocess.run(
            [sys.executable, "-c", _PEAK_RSS, *args], check=True, capture_output=True, text=True
        )
        peaks.append(int(result.stdout) / 1024)
    assert max(peaks) < 300, f"peak RSS {peaks} MB"
    assert abs(peaks[1] - peaks[0]) < 20, f"peak RSS grew with the dataset: {peaks} MB"
