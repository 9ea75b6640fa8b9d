"""packer.keras.BackupAndRestore: a model.fit killed by SIGKILL mid-epoch, or right after an
epoch's last or first batch, and started again with the same command continues with the next
batch and ends with the uninterrupted run's weights, bit for bit (deterministic ops). Real
Keras, real processes, a real SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import packer
from tests.fixtures.packs import REPO

ROOT = REPO
KILL_AT = 7  # steps: batch 2 of the second epoch (5 batches of 3 per epoch, 14 samples)


@pytest.fixture(scope="module")
def pack(seg_src, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("backup") / "p"
    packer.pack(seg_src, out=out, size=(32, 24), shard_size=5 * 32 * 24 * 4)
    return out


def fit(pack: Path, reader: str, out: Path, *options: str) -> subprocess.Popen:
    out.mkdir(exist_ok=True)
    command = [sys.executable, "-m", "tests.jobs.keras_jobs", str(pack), reader, str(out), *options]
    path = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    env = os.environ | {"PYTHONPATH": path, "TF_CPP_MIN_LOG_LEVEL": "3"}  # an older Keras too
    return subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)


def finished(process: subprocess.Popen) -> None:
    _, errors = process.communicate(timeout=300)
    assert process.returncode == 0, errors[-3000:]


def killed_and_restarted(
    pack: Path, reader: str, out: Path, *options: str, kill_at: int = KILL_AT
) -> list[np.ndarray]:
    """Fit until SIGKILL at step `kill_at`, then again with the same command: final weights."""
    killed = fit(pack, reader, out, "--kill-at", str(kill_at), *options)
    killed.communicate(timeout=300)
    assert killed.returncode == -signal.SIGKILL
    finished(fit(pack, reader, out, *options))
    return weights(out)


def weights(out: Path) -> list[np.ndarray]:
    saved = np.load(out / "final.npz")
    return [saved[k] for k in saved.files]


def steps(out: Path) -> list[int]:
    return [int(line) for line in (out / "steps.log").read_text().split()]


@pytest.fixture(scope="module")
def uninterrupted(pack, tmp_path_factory) -> dict[str, list[np.ndarray]]:
    """Final weights of uninterrupted runs: PackedSequence (whatever runs its batches) and tf."""
    runs = {name: fit(pack, name, tmp_path_factory.mktemp(name)) for name in ("sequence", "tf")}
    for process in runs.values():
        finished(process)
    return {name: weights(Path(process.args[5])) for name, process in runs.items()}


@pytest.mark.parametrize("reader", ["sequence", "sequence-workers", "parallel", "tf"])
def test_fit_killed_mid_epoch_continues_with_the_next_batch(pack, uninterrupted, tmp_path, reader):
    final = killed_and_restarted(pack, reader, tmp_path)
    assert steps(tmp_path) == [0, 1, 2, 3, 4, 0, 1, 0, 1, 2]  # then only the rest of epoch 2
    want = uninterrupted["tf" if reader == "tf" else "sequence"]
    assert all(np.array_equal(a, b) for a, b in zip(final, want, strict=True))


@pytest.mark.parametrize(
    "reader, kill_at, logged, options",
    [
        pytest.param("sequence", 5, [0, 1, 2, 3, 4, 0, 1, 2, 3, 4], (), id="sequence-last-batch"),
        pytest.param("tf", 5, [0, 1, 2, 3, 4, 0, 1, 2, 3, 4], (), id="tf-last-batch"),
        pytest.param("sequence", 6, [0, 1, 2, 3, 4, 0, 0, 1, 2, 3], (), id="sequence-first-batch"),
        # the resumed first epoch is shorter; the epoch after it is whole again
        pytest.param("sequence", 2, [0, 1, 0, 1, 2, 0, 1, 2, 3, 4], (), id="sequence-first-epoch"),
        # Keras' default: a backup at each epoch's end, so the second epoch starts over
        pytest.param(
            "sequence", 6, [0, 1, 2, 3, 4, 0, 0, 1, 2, 3, 4], ("--save-freq", "epoch"),
            id="sequence-epoch-backups",
        ),
    ],
)  # fmt: skip
def test_fit_killed_at_an_epochs_edge_continues_with_the_next_batch(
    pack, uninterrupted, tmp_path, reader, kill_at, logged, options
):
    """A backup after an epoch's last batch names the next epoch: the restarted fit neither
    retrains the finished epoch nor skips the next one's first batch, and the epochs after a
    resumed one are whole."""
    final = killed_and_restarted(pack, reader, tmp_path, *options, kill_at=kill_at)
    assert steps(tmp_path) == logged
    want = uninterrupted["tf" if reader == "tf" else "sequence"]
    assert all(np.array_equal(a, b) for a, b in zip(final, want, strict=True))


def test_keras_own_callback_restarts_the_epoch_and_ends_elsewhere(pack, uninterrupted, tmp_path):
    """The control: the same kill with Keras' own callback retrains the epoch's first batches."""
    final = killed_and_restarted(pack, "sequence", tmp_path, "--keras-own")
    assert steps(tmp_path)[KILL_AT:] == [0, 1, 2, 3, 4]
    assert not all(
        np.array_equal(a, b) for a, b in zip(final, uninterrupted["sequence"], strict=True)
    )


def test_other_data_keeps_keras_own_shuffle(pack, tmp_path):
    """A keras.utils.PyDataset that is no packer reader: Keras shuffles its batches, with this
    callback as with Keras' own, so the two fits end with the same weights."""
    runs = [
        fit(pack, "plain", tmp_path / "packer"),
        fit(pack, "plain", tmp_path / "keras", "--keras-own"),
    ]
    for process in runs:
        finished(process)
    mine, theirs = weights(tmp_path / "packer"), weights(tmp_path / "keras")
    assert all(np.array_equal(a, b) for a, b in zip(mine, theirs, strict=True))
