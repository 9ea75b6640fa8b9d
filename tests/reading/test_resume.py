"""Exact mid-epoch resume, every reader: after k batches, a fresh reader given the saved state
yields exactly the batches the uninterrupted one would have yielded next, in order."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

import packer
from tests.fixtures.packs import REPO
from tests.jobs.torch_jobs import KINDS, sample_ids

ROOT = REPO
TOTAL = 12  # batches read: 5 per epoch (14 samples in batches of 3), so into a third epoch


@pytest.fixture(scope="module")
def pack(seg_src, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("resume") / "p"
    packer.pack(seg_src, out=out, size=(32, 24), shard_size=5 * 32 * 24 * 4)  # shards: 5, 5, 4
    return out


class Keras:
    """PackedSequence, indexed as Keras does, on_epoch_end between epochs."""

    def make(self, path: Path, shuffle, state=None, workers: int = 0):
        from packer.keras import PackedSequence

        seq = PackedSequence(path, batch_size=3, shuffle=shuffle, seed=7, shuffle_window=4)
        if state is not None:
            seq.load_state_dict(state)
        return seq

    def stream(self, seq):
        while True:
            for i in range(len(seq)):
                yield i, seq[i][0]
            seq.on_epoch_end()

    def state(self, seq, position: int, total: int) -> dict:
        return seq.state_dict(batches=position + 1)


class Torch:
    """packer.torch through a DataLoader with `workers` processes, set_epoch per epoch."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def make(self, path: Path, shuffle, state=None, workers: int = 0):
        ds = KINDS[self.kind](path, batch_size=3, shuffle=shuffle, seed=7, shuffle_window=4)
        if state is not None:
            ds.load_state_dict(state)
        loader = DataLoader(
            ds, batch_size=None, num_workers=workers, persistent_workers=workers > 0
        )
        return ds, loader  # not an attribute of ds: a cycle would outlive its workers

    def stream(self, reader):
        ds, loader = reader
        epoch = ds.state_dict()["epoch"]
        while True:
            ds.set_epoch(epoch)
            for i, (images, _) in enumerate(loader):
                yield i, images.numpy()
            epoch += 1

    def state(self, reader, position: int, total: int) -> dict:
        return reader[0].state_dict(batches=position + 1)


class TF:
    """packer.tf.dataset by random access; resumes from the count of batches done."""

    def make(self, path: Path, shuffle, state=None, workers: int = 0):
        import packer.tf

        return packer.tf.dataset(path, batch_size=3, shuffle=shuffle, seed=7, start=state)

    def stream(self, batches):
        while True:
            for i, (images, _) in enumerate(batches):
                yield i, images.numpy()

    def state(self, batches, position: int, total: int) -> int:
        return total


ADAPTERS = {"keras": Keras(), "torch-map": Torch("map"), "torch-iterable": Torch("iterable")}
CASES = [(name, shuffle) for name in ADAPTERS for shuffle in ("global", "windows")]
CASES += [("tf", True)]
ADAPTERS["tf"] = TF()


def take(adapter, reader, count: int) -> tuple[list[np.ndarray], object]:
    """The next `count` batches' images, and the state after them."""
    batches, stream = [], adapter.stream(reader)
    for position, images in stream:
        batches.append(np.array(images))
        if len(batches) == count:
            stream.close()
            return batches, adapter.state(reader, position, count)
    raise AssertionError("stream ended")


@pytest.mark.parametrize("name,shuffle", CASES)
def test_resume_gives_exactly_the_batches_left(pack, name, shuffle):
    adapter = ADAPTERS[name]
    full, _ = take(adapter, adapter.make(pack, shuffle), TOTAL)
    assert len({x.tobytes() for x in full[:5]}) == 5  # distinct batches: the check can fail
    for done, workers in [(2, 0), (5, 2), (8, 1)]:  # inside, at the end of, and a later epoch
        first, state = take(adapter, adapter.make(pack, shuffle, workers=2 - workers), done)
        state = json.loads(json.dumps(state))  # plain JSON, saved anywhere
        rest, _ = take(adapter, adapter.make(pack, shuffle, state, workers), TOTAL - done)
        assert all(map(np.array_equal, first + rest, full)), f"resumed after {done}"


@pytest.mark.parametrize("name", ["keras", "torch-map"])
def test_a_state_only_loads_into_a_reader_that_orders_alike(pack, name):
    adapter = ADAPTERS[name]
    _, state = take(adapter, adapter.make(pack, "global"), 2)
    unwrap = (lambda r: r[0]) if name.startswith("torch") else (lambda r: r)
    other = unwrap(adapter.make(pack, "windows"))
    with pytest.raises(ValueError, match="shuffle='global'"):
        other.load_state_dict(state)
    seeded = unwrap(adapter.make(pack, "global"))
    seeded.load_state_dict(state | {"seed": 8})  # the seed comes from the state
    assert seeded.state_dict()["seed"] == 8
    with pytest.raises(ValueError, match="version"):
        seeded.load_state_dict({"epoch": 0})


def test_tf_resume_needs_a_seed_and_random_access(pack, seg_src, tmp_path):
    import packer.tf

    with pytest.raises(ValueError, match="seed"):
        packer.tf.dataset(pack, start=3)
    tfrecord = packer.pack(seg_src, out=tmp_path / "t", format="tfrecord", size=(32, 24))
    with pytest.raises(ValueError, match=r"tf\.train\.Checkpoint"):
        packer.tf.dataset(tfrecord.root, seed=0, start=3, stream=True)
    assert len(list(packer.tf.dataset(tfrecord.root, seed=0, start=3))) > 0  # random access


def run_job(pack: Path, kind: str, workers: int, out: Path, stop_after: int = 0):
    command = [
        sys.executable,
        "-m",
        "tests.jobs.torch_jobs",
        "train",
        str(pack),
        kind,
        str(workers),
    ]
    command += [str(out), "--stop-after", str(stop_after)]
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)


@pytest.mark.parametrize(
    "kind,workers,resumed_workers,kill_at", [("map", 2, 0, 4), ("iterable", 2, 1, 9)]
)
def test_a_training_killed_mid_epoch_resumes_as_if_never_stopped(
    pack, tmp_path, kind, workers, resumed_workers, kill_at
):
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    whole.mkdir(), cut.mkdir()
    uninterrupted = run_job(pack, kind, workers, whole)
    killed = run_job(pack, kind, workers, cut, stop_after=kill_at)
    assert killed.stdout.readline().strip() == "READY"
    os.kill(killed.pid, signal.SIGKILL)  # no chance to clean up or save anything more
    assert killed.wait() == -signal.SIGKILL
    assert len((cut / "batches.log").read_text().splitlines()) == kill_at
    assert uninterrupted.wait() == 0
    assert run_job(pack, kind, resumed_workers, cut).wait() == 0
    log = (whole / "batches.log").read_text().splitlines()
    assert len(log) == 14 and len(set(log)) == 14
    assert (cut / "batches.log").read_text().splitlines() == log
    for a, b in zip(*(torch.load(d / "final.pt").values() for d in (whole, cut)), strict=True):
        assert torch.equal(a, b)  # the same batches in the same order: the same model


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("workers", [0, 2])
def test_torchdata_stateful_dataloader_resumes_exactly(pack, kind, workers):
    stateful = pytest.importorskip("torchdata.stateful_dataloader")
    ids = sample_ids(pack)

    def run(state: dict | None, stop: int | None) -> tuple[list[int], dict | None]:
        ds = KINDS[kind](pack, batch_size=3, seed=4)
        loader = stateful.StatefulDataLoader(ds, batch_size=None, num_workers=workers)
        first = 0
        if state is not None:
            loader.load_state_dict(state["loader"])
            first = state["epoch"]
        seen = []
        for epoch in range(first, 2):
            ds.set_epoch(epoch)
            for images, _ in loader:
                seen.append([ids[x.numpy().tobytes()] for x in images])
                if len(seen) == stop:
                    return seen, {"loader": loader.state_dict(), "epoch": epoch}
        return seen, None

    full, _ = run(None, None)
    for stop in (2, 7):
        head, state = run(None, stop)
        tail, _ = run(state, None)
        assert head + tail == full
