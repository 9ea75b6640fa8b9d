"""Shared memory after a training process is killed (SIGKILL) on the torch DataLoader
hand-off path: nothing may be left in /dev/shm, and no worker may live on holding memory.

DataLoader workers hand batches over in memfd slots (`reading.handoff`), which the kernel
frees with the last process holding them; batches that find every slot held go torch's
ordinary way, through a /dev/shm file named after the worker's pid that torch unlinks once
opened. The job below holds batches so both paths run, then is killed without any chance
to clean up.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import packer
from packer.synthetic import make_segmentation
from tests.fixtures.processes import alive, children_of

pytest.importorskip("torch")
SHM = Path("/dev/shm")
pytestmark = pytest.mark.skipif(
    not SHM.is_dir() or not hasattr(os, "memfd_create"), reason="needs Linux /dev/shm and memfd"
)

HOLDING_JOB = """
import sys
from torch.utils.data import DataLoader
from packer.torch import PackedDataset

dataset = PackedDataset(sys.argv[1], batch_size=4, shuffle=True, seed=0)
loader = DataLoader(dataset, batch_size=None, num_workers=2, persistent_workers=True)
held = []
while True:
    for batch in loader:
        held.append(batch)  # more than the slots: some batches go torch's ordinary way
        if len(held) == 12:
            print("ready", flush=True)
        del held[:-16]
"""


def _memfds(pid: int) -> list[str]:
    """The memfd names a process holds open (`/memfd:packer-batch (deleted)`, ...)."""
    found = []
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("/memfd:"):
            found.append(target)
    return found


def _ours(names: set[str], pids: set[int]) -> set[str]:
    """Entries of /dev/shm that these processes made: torch names them torch_<pid>_..., and
    any made by packer would say so."""
    return {n for n in names if "packer" in n or any(f"_{pid}_" in f"_{n}" for pid in pids)}


def test_a_killed_training_process_leaves_nothing_in_dev_shm(tmp_path):
    src = make_segmentation(tmp_path / "src", {"train": 24}, (64, 48))
    packer.pack(src, out=tmp_path / "pack", size=(64, 48), workers=1)
    before = set(os.listdir(SHM))
    job = subprocess.Popen(
        [sys.executable, "-c", HOLDING_JOB, str(tmp_path / "pack")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert job.stdout.readline().strip() == "ready", job.stderr.read()
        workers = children_of(job.pid)
        assert len(workers) >= 2
        held = [name for pid in workers for name in _memfds(pid)]
        assert any("packer-batch" in name for name in held), held  # the hand-off is in use
    finally:
        job.send_signal(signal.SIGKILL)
        job.wait()
    deadline = time.monotonic() + 20  # DataLoader workers look for their parent every 5 s
    while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(pid) for pid in workers), "DataLoader workers outlived the parent"
    left = _ours(set(os.listdir(SHM)) - before, {job.pid, *workers})
    assert not left, f"left in /dev/shm: {sorted(left)}"
