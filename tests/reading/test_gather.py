"""A batch copied by several threads: the same bytes as one thread, after fork too, sized from
the cores the process may use, and small batches left to the calling thread."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import packer
from packer.reading import gather

W, H = 64, 48


@pytest.fixture(scope="module", params=["npy", "tfrecord", "recordio"])
def pack(request, seg_src, tmp_path_factory):
    """The segmentation sample in each format, four samples a shard (runs cross shards)."""
    out = tmp_path_factory.mktemp(f"gather-{request.param}")
    return packer.pack(
        seg_src, out=out, format=request.param, size=(W, H), shard_size=4 * W * H * 4
    )


@pytest.fixture
def threaded(monkeypatch):
    """Every batch split over four threads, whatever this machine's cores."""
    monkeypatch.setattr(gather, "usable_cores", lambda: 4)
    monkeypatch.setattr(gather, "MIN_BYTES_PER_THREAD", 1)
    monkeypatch.setattr(gather, "_sharing", 1)


def one_thread_read(split, indices: np.ndarray) -> dict[str, np.ndarray]:
    """The batch as one thread reads it: each shard's run in turn."""
    reader = split.reader
    out = {f.name: np.empty((len(indices), *f.shape), f.dtype) for f in reader.fields}
    order = np.sort(indices)
    for shard, start, stop in reader._runs(order):
        rows = {k: v[start:stop] for k, v in out.items()}
        reader.shards[shard].read_into(order[start:stop] - split.offsets[shard], rows)
    return out


def test_threads_read_the_bytes_one_thread_reads(pack, threaded):
    split = pack["train"]
    assert len(split.shards) > 2
    rng = np.random.default_rng(0)
    for size in (1, 3, 7, split.count):
        indices = rng.choice(split.count, size, replace=False)
        expected = one_thread_read(split, indices)
        got = split.reader.read(indices)
        for name in expected:
            np.testing.assert_array_equal(got[name], expected[name])
    names = {t.name for t in threading.enumerate()}
    assert any(name.startswith("packer-gather") for name in names)


def test_threads_fill_arrays_the_caller_gives(pack, threaded):
    split = pack["train"]
    indices = np.arange(split.count)[::-1]
    out = {f.name: np.zeros((len(indices), *f.shape), f.dtype) for f in split.reader.fields}
    got = split.reader.read(indices, out=out, ordered=True)
    assert all(got[k] is out[k] for k in out)
    expected = one_thread_read(split, indices)
    for name in out:  # ordered=True: the order asked, here the reverse
        np.testing.assert_array_equal(out[name][::-1], expected[name])


def _child_read(root: str, queue) -> None:
    split = packer.open(root)["train"]
    batch = split.reader.read(np.arange(split.count))
    queue.put({k: v.tobytes() for k, v in batch.items()})


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
def test_a_forked_child_reads_with_a_pool_of_its_own(pack, threaded):
    split = pack["train"]
    parent = split.reader.read(np.arange(split.count))  # the parent's pool has threads now
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_child_read, args=(str(pack.root), queue))
    child.start()
    got = queue.get(timeout=60)  # a pool copied from the parent would hang here
    child.join(timeout=60)
    assert child.exitcode == 0
    assert got == {k: v.tobytes() for k, v in parent.items()}


def test_the_pool_follows_the_cores_the_process_may_use():
    script = (
        "import os; from packer.reading import gather\n"
        "os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
        "one = gather.thread_count()\n"
        "os.sched_setaffinity(0, set(range(os.cpu_count())))\n"
        "every = gather.thread_count()\n"
        "gather.share_cores(every)\n"
        "print(one, every, len(os.sched_getaffinity(0)), gather.thread_count())\n"
    )
    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("no CPU affinity on this OS")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    one, every, cores, shared = map(int, result.stdout.split())
    assert (one, every, shared) == (1, cores, 1)


class ThreadRecorder:
    """A shard of one field whose reads note the thread that made them."""

    def __init__(self, records: np.ndarray) -> None:
        self.records = records
        self.threads: set[int] = set()
        self.calls = 0

    def open(self) -> None:
        pass

    def read_into(self, local: np.ndarray, out: dict[str, np.ndarray]) -> None:
        self.threads.add(threading.get_ident())
        self.calls += 1
        np.take(self.records, local, axis=0, out=out["images"])


@pytest.mark.parametrize("record_bytes", [1 << 10, 1 << 20])
def test_only_batches_worth_splitting_leave_the_calling_thread(monkeypatch, record_bytes):
    monkeypatch.setattr(gather, "usable_cores", lambda: 4)
    monkeypatch.setattr(gather, "_sharing", 1)
    shard = ThreadRecorder(np.arange(8 * record_bytes, dtype=np.uint8).reshape(8, -1))
    out = {"images": np.empty((8, record_bytes), np.uint8)}
    gather.read([(shard, np.arange(8), out)])
    np.testing.assert_array_equal(out["images"], shard.records)
    big = 8 * record_bytes >= 2 * gather.MIN_BYTES_PER_THREAD
    assert (shard.calls > 1) == big  # split in pieces (which threads take them is the OS's)
    assert threading.get_ident() in shard.threads
    if not big:
        assert shard.threads == {threading.get_ident()}


def test_the_caller_reads_the_pieces_a_busy_helper_has_not_started():
    shard = ThreadRecorder(np.arange(8 * 16, dtype=np.uint8).reshape(8, 16))
    out = {"images": np.empty((8, 16), np.uint8)}
    pieces = [[(shard, np.arange(k, k + 2), {"images": out["images"][k : k + 2]})]
              for k in range(0, 8, 2)]  # fmt: skip
    busy, release = threading.Event(), threading.Event()
    with gather.ThreadPoolExecutor(1) as pool:
        blocker = pool.submit(lambda: (busy.set(), release.wait(30))[1])  # the only thread
        busy.wait(30)
        gather._share(pieces, pool, helpers=1)  # returns without waiting for a turn
        release.set()
        assert blocker.result(), "the caller waited for the busy thread (its wait timed out)"
    np.testing.assert_array_equal(out["images"], shard.records)
    assert shard.threads == {threading.get_ident()}


def test_a_failing_piece_raises_after_the_others_are_read():
    shard = ThreadRecorder(np.arange(4 * 16, dtype=np.uint8).reshape(4, 16))
    out = {"images": np.zeros((4, 16), np.uint8)}

    class Broken:
        def read_into(self, local, rows):
            raise OSError("a damaged shard")

    pieces = [[(shard, np.array([0, 1]), {"images": out["images"][:2]})],
              [(Broken(), np.array([2]), {"images": out["images"][2:3]})],
              [(shard, np.array([3]), {"images": out["images"][3:]})]]  # fmt: skip
    with gather.ThreadPoolExecutor(2) as pool, pytest.raises(OSError, match="damaged"):
        gather._share(pieces, pool, helpers=2)
    np.testing.assert_array_equal(out["images"][[0, 1, 3]], shard.records[[0, 1, 3]])
