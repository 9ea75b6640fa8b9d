"""The shared-memory worker pipeline and `packer.parallel`: same batches in the same order,
epoch hooks reach every worker, worker errors carry their traceback, nothing outlives a
killed parent, and Keras trains from it (also when TensorFlow was imported first).

The sequences live in tests/fixtures/sequences.py, which workers import to rebuild them;
Keras is imported inside the tests only.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from packer.reading.pipeline import Pipeline, WorkerError
from tests.fixtures.packs import REPO
from tests.fixtures.processes import alive, shm_users
from tests.fixtures.sequences import (
    CountingSequence,
    Growing,
    ShiftingSequence,
    plainly,
    through_keras,
)


@pytest.mark.parametrize("workers", [1, 2])
def test_parallel_gives_the_same_batches_in_order_over_epochs(workers):
    from packer import parallel

    plain, parent = ShiftingSequence(), ShiftingSequence()
    dataset = parallel(parent, workers=workers)
    try:
        # Keras' threads only ask; the work is in packer's processes
        assert dataset.workers == dataset.pipeline.ahead and not dataset.use_multiprocessing
        expected, got = plainly(plain, 2), through_keras(dataset, 2)
    finally:
        dataset.close()
    assert len(got) == len(expected) == 10
    for (x, y), (ex, ey) in zip(got, expected, strict=True):
        assert x.dtype == ex.dtype and np.array_equal(x, ex) and np.array_equal(y, ey)
    assert parent.epoch == 2  # the parent's copy saw on_epoch_end as well as the workers'


def test_fit_shuffled_batch_order_is_made_ahead_and_once(tmp_path):
    """model.fit asks for batches in a shuffled order, through threads: each is the batch
    asked for, and hardly any is made twice."""
    from packer import parallel

    log = tmp_path / "made.log"
    plain, dataset = ShiftingSequence(batches=40), parallel(CountingSequence(log, 40), workers=2)
    try:
        got = through_keras(dataset, 2, shuffle=True)
    finally:
        dataset.close()
    expected = plainly(plain, 2)
    for epoch in range(2):
        key = lambda batch: batch[0].tobytes()  # noqa: E731
        want = sorted(expected[epoch * 40 : (epoch + 1) * 40], key=key)
        have = sorted(got[epoch * 40 : (epoch + 1) * 40], key=key)
        assert all(np.array_equal(w[0], h[0]) and np.array_equal(w[1], h[1])
                   for w, h in zip(want, have, strict=True))  # fmt: skip
    assert [b[0].tobytes() for b in got[:40]] != [b[0].tobytes() for b in expected[:40]]
    made = log.read_text().split()
    # each batch once, plus the start of each pass read ahead at on_epoch_end (the old way,
    # starting over at every out-of-order index, made each batch 2-4 times)
    assert len(made) <= 80 + 3 * dataset.pipeline.ahead, len(made)


def test_threads_asking_at_once_in_any_order_get_their_batches():
    import random
    from concurrent.futures import ThreadPoolExecutor

    plain = ShiftingSequence(batches=30)
    with Pipeline(ShiftingSequence(batches=30).__getitem__, 30, workers=2) as pipeline:
        order = list(range(30)) * 2
        random.Random(0).shuffle(order)
        with ThreadPoolExecutor(6) as pool:
            results = list(pool.map(lambda i: (i, [np.array(a) for a in pipeline[i]]), order))
        in_order = [np.array(pipeline[i][0]) for i in range(30)]
    for index, (x, y) in results:
        want_x, want_y = plain[index]
        assert np.array_equal(x, want_x) and np.array_equal(y, want_y)
    assert all(np.array_equal(x, plain[i][0]) for i, x in enumerate(in_order))


@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_pipeline_grows_slots_and_copies_batches_the_caller_keeps(start):
    producer = Growing()
    with Pipeline(producer.make, 3, workers=2, start=start) as pipeline:
        kept = [b for _ in range(4) for b in pipeline]  # more than it holds as views: copies
        assert pipeline[1]["ids"][0].tolist() == [1]  # out of order works too
    for index, batch in enumerate(kept):
        expected = producer.make(index % 3)
        assert np.array_equal(batch["image"], expected["image"])
        assert np.array_equal(batch["ids"][0], expected["ids"][0])
        assert batch["note"] is None
    assert np.array_equal(kept[0]["image"], kept[9]["image"])


def test_worker_exception_reaches_the_parent_with_its_traceback():
    producer = Growing()
    with Pipeline(producer.make, 5, workers=2) as pipeline:
        assert pipeline[2]["image"].shape == (8, 8, 3)  # batches before the bad one arrive
        with pytest.raises(WorkerError) as caught:
            pipeline[3]
        assert pipeline[4]["image"].shape == (14, 14, 3)  # and the pipeline goes on
    message = str(caught.value)
    assert "batch 3 failed in worker" in message
    assert "in _explode" in message and "ValueError: batch 3 is broken" in message


def test_broadcast_failure_and_dead_worker_are_reported():
    with Pipeline(ShiftingSequence(batches=50).__getitem__, 50, workers=2) as pipeline:
        with pytest.raises(WorkerError, match="AttributeError"):
            pipeline.broadcast("no_such_method")
        pipeline[0]
        os.kill(pipeline.worker_pids[1], signal.SIGKILL)
        with pytest.raises(WorkerError, match=r"worker 1 \(pid \d+\) died with exit code -9"):
            for index in range(1, 50):
                pipeline[index]


KILLED_PARENT = """
import sys, time
from packer.reading.pipeline import Pipeline
from tests.fixtures.sequences import ShiftingSequence
pipeline = Pipeline(ShiftingSequence(size=64).__getitem__, 50, workers=2, start=sys.argv[1])
batch = pipeline[0]
print(*pipeline.worker_pids, flush=True)
time.sleep(120)
"""


@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_sigkill_of_the_parent_leaves_no_worker_and_nothing_in_dev_shm(start):
    before = set(os.listdir("/dev/shm"))
    parent = subprocess.Popen(
        [sys.executable, "-c", KILLED_PARENT, start], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    try:
        pids = [int(pid) for pid in parent.stdout.readline().split()]
        assert len(pids) == 2 and all(alive(pid) for pid in pids)
        assert "/memfd:packer-slot" in Path(f"/proc/{pids[0]}/maps").read_text()
        # slots have no name: neither the parent nor a worker holds anything in /dev/shm
        assert not any(shm_users(pid) for pid in [parent.pid, *pids])
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(pid) for pid in pids)
    # other programs' process pools come and go there (sem.mp-*); nothing else may appear
    assert {n for n in set(os.listdir("/dev/shm")) - before if not n.startswith("sem.mp-")} == set()


def test_model_fit_trains_from_parallel():
    from packer import parallel
    from tests.fixtures.models import tiny_classifier

    sequence = ShiftingSequence(batches=4, size=12, batch=8)
    model = tiny_classifier(12, 3)
    dataset = parallel(sequence, workers=2)
    try:
        history = model.fit(dataset, epochs=2, verbose=0)
    finally:
        dataset.close()
    assert len(history.history["loss"]) == 2
    assert np.isfinite(history.history["loss"]).all()
    assert sequence.epoch >= 2  # Keras also calls on_epoch_end as fit sets up


TENSORFLOW_FIRST = """
import sys
import tensorflow  # a training script: TensorFlow before anything else
import keras
import numpy as np
from packer import parallel
from packer.reading.pipeline import Pipeline
from tests.fixtures.sequences import ShiftingSequence, plainly, through_keras


class Script(keras.utils.PyDataset):  # defined in the script: workers import it from __main__
    def __init__(self):
        super().__init__()
        self.inner = ShiftingSequence()

    def __len__(self):
        return len(self.inner)

    def __getitem__(self, index):
        return self.inner[index]

    def on_epoch_end(self):
        self.inner.on_epoch_end()


if __name__ == "__main__":
    with Pipeline(ShiftingSequence().__getitem__, 5, workers=1) as pipeline:
        pipeline[0]
        maps = open(f"/proc/{pipeline.worker_pids[0]}/maps").read()
        print(pipeline.start_method, "tensorflow" in maps)
    dataset = parallel(Script(), workers=2)
    same = all(
        all(np.array_equal(a, b) for a, b in zip(got, expected))
        for got, expected in zip(through_keras(dataset, 2), plainly(ShiftingSequence(), 2))
    )
    print(dataset.pipeline.start_method, same)
"""


def test_a_parent_that_imported_tensorflow_first(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(TENSORFLOW_FIRST))
    env = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3"}
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    # workers that need no TensorFlow start without it; a script's own PyDataset works
    assert result.stdout.split() == ["spawn", "False", "spawn", "True"], result.stdout
