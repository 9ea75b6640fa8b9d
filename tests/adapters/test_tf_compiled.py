"""`packer.tf.dataset`'s compiled batch read (npy packs): the same batches as the Loader, epoch
after epoch, resumed and split among ranks, and a plain fallback where it cannot be built."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

import packer
import packer.tf
from packer.reading.loader import Loader

SIZE = (32, 24)


@pytest.fixture(scope="module")
def packs(seg_src, cls_src, tmp_path_factory) -> dict[str, Path]:
    """Segmentation (3 shards) and classification npy packs, and tfrecord ones."""
    root = tmp_path_factory.mktemp("tf-compiled")
    shard = 5 * SIZE[0] * SIZE[1] * 4
    packer.pack(seg_src, out=root / "seg", format="npy", size=SIZE, shard_size=shard)
    packer.pack(cls_src, out=root / "cls", format="npy", size=24, shard_size=8 * 24 * 24 * 3)
    packer.pack(seg_src, out=root / "tfrecord", format="tfrecord", size=SIZE)
    packer.pack(cls_src, out=root / "cls-tfrecord", format="tfrecord", size=24)
    return {name: root / name for name in ("seg", "cls", "tfrecord", "cls-tfrecord")}


@pytest.fixture(scope="module")
def big(cls_src, tmp_path_factory) -> Path:
    """The classification source at 1024x768: 2.4 MB a sample, 16.5 MB a batch of 7."""
    root = tmp_path_factory.mktemp("tf-compiled-big")
    return Path(packer.pack(cls_src, out=root / "big", format="npy", size=(1024, 768)).root)


def expected(path: Path, batch_size: int, epoch: int, **options) -> list[tuple]:
    """Epoch `epoch`'s `(images, targets)` batches as the Loader (PackedSequence's) gives them."""
    loader = Loader(path, "train", batch_size, **options)
    return [loader.batch(i, epoch) for i in range(len(loader))]


def same(batches: tf.data.Dataset, wanted: list[tuple]) -> None:
    got = list(batches.as_numpy_iterator())
    assert len(got) == len(wanted)
    for (x, y), (ex, ey) in zip(got, wanted, strict=True):
        np.testing.assert_array_equal(x, ex)
        np.testing.assert_array_equal(y, ey)


@pytest.mark.parametrize("name", ["seg", "cls", "cls-tfrecord"])
@pytest.mark.parametrize("shuffle", [True, False])
def test_each_iteration_reads_the_next_epoch_as_the_loader(packs, name, shuffle):
    batches = packer.tf.dataset(packs[name], batch_size=4, shuffle=shuffle, seed=7)
    assert batches.packer_read == "compiled"
    options = {"shuffle": "global" if shuffle else False, "seed": 7, "uneven": "allow"}
    for epoch in range(3):  # a new iterator each, as Keras makes one an epoch
        same(batches, expected(packs[name], 4, epoch, **options))


def test_transforms_and_static_batch_shape(packs):
    batches = packer.tf.dataset(
        packs["cls"], batch_size=4, seed=1, normalize="unit", one_hot=True, drop_remainder=True
    )
    assert batches.packer_read == "compiled"
    assert batches.element_spec[0].shape[0] == 4
    options = {"seed": 1, "normalize": "unit", "one_hot": True, "drop_remainder": True}
    wanted = expected(packs["cls"], 4, 0, uneven="allow", **options)
    got = list(batches.as_numpy_iterator())
    assert len(got) == len(wanted)
    for (x, y), (ex, ey) in zip(got, wanted, strict=True):
        np.testing.assert_allclose(x, ex, rtol=1e-6)
        np.testing.assert_array_equal(y, ey)


def test_resumed_start_then_whole_epochs(packs):
    whole = len(Loader(packs["seg"], "train", 3, seed=5))
    batches = packer.tf.dataset(packs["seg"], batch_size=3, seed=5, start=whole + 2)
    assert batches.packer_read == "compiled"
    same(batches, expected(packs["seg"], 3, 1, seed=5, uneven="allow")[2:])
    same(batches, expected(packs["seg"], 3, 2, seed=5, uneven="allow"))


def test_a_position_loaded_between_iterations(packs):
    batches = packer.tf.dataset(packs["seg"], batch_size=3, seed=2)
    list(batches)
    state = batches.packer_position.state_dict(1)  # one batch into epoch 0
    list(batches)
    batches.packer_position.load_state_dict(state)
    same(batches, expected(packs["seg"], 3, 0, seed=2, uneven="allow")[1:])


@pytest.mark.parametrize("rank", [0, 1])
def test_ranks_read_their_share(packs, rank):
    batches = packer.tf.dataset(packs["seg"], batch_size=2, seed=3, rank=rank, world_size=2)
    assert batches.packer_read == "compiled"
    for epoch in range(2):
        same(batches, expected(packs["seg"], 2, epoch, seed=3, rank=rank, world_size=2))


def test_what_it_does_not_handle_reads_as_before(packs):
    augmented = packer.tf.dataset(
        packs["seg"], batch_size=2, seed=0, augment=packer.Augment(horizontal_flip=True, seed=1)
    )
    assert augmented.packer_read == "numpy_function"
    assert packer.tf.dataset(packs["tfrecord"], batch_size=2, stream=True).packer_read == "stream"


def test_without_a_compiler_one_line_and_the_same_batches(packs, tmp_path):
    script = (
        "import sys, numpy as np, packer.tf\n"
        f"d = packer.tf.dataset({str(packs['seg'])!r}, batch_size=4, seed=7)\n"
        "print(d.packer_read)\n"
        "np.save(sys.argv[1], np.concatenate([x for x, _ in d.as_numpy_iterator()]))\n"
    )
    env = os.environ | {"CXX": str(tmp_path / "no-compiler"), "PACKER_CACHE_DIR": str(tmp_path)}
    env |= {"TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "x.npy")],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    said = [line for line in done.stderr.splitlines() if line.startswith("packer.tf:")]
    assert len(said) == 1 and "unavailable" in said[0] and "numpy_function" in said[0]
    assert done.stdout.split() == ["numpy_function"]
    wanted = expected(packs["seg"], 4, 0, seed=7, uneven="allow")
    np.testing.assert_array_equal(
        np.load(tmp_path / "x.npy"), np.concatenate([x for x, _ in wanted])
    )


def test_a_dataset_built_inside_a_traced_function_reads_as_the_loader(packs):
    """Inside a `flat_map`'s function no Python object outlives the tracing to hand the source
    its passes: such a dataset takes the numpy_function read, with the same batches."""
    inner = []

    def build(_):
        inner.append(packer.tf.dataset(packs["seg"], batch_size=4, seed=0, shuffle=False))
        return inner[-1]

    batches = tf.data.Dataset.range(2).flat_map(build)
    assert inner[0].packer_read == "numpy_function"
    want = expected(packs["seg"], 4, 0, shuffle=False, seed=0, uneven="allow")
    want += expected(packs["seg"], 4, 1, shuffle=False, seed=0, uneven="allow")
    same(batches, want)


def test_the_source_reads_ahead_only_as_the_last_stage(packs):
    plain = packer.tf.dataset(packs["seg"], batch_size=4, seed=0)
    mapped = packer.tf.dataset(packs["seg"], batch_size=4, seed=0, normalize="unit")
    assert plain.packer_read == mapped.packer_read == "compiled"
    assert plain.packer_position.ahead and not mapped.packer_position.ahead
    assert "Prefetch" not in type(plain).__name__ and "Prefetch" in type(mapped).__name__


def test_iterators_dropped_while_a_batch_is_copied_ahead(packs):
    batches = packer.tf.dataset(packs["seg"], batch_size=2, seed=6)
    for _ in range(40):  # each takes a pass, returns batch 0 and is copying batch 1 when dropped
        iterator = iter(batches)
        next(iterator)
        del iterator
    same(batches, expected(packs["seg"], 2, 40, seed=6, uneven="allow"))


def test_a_tf_function_reads_every_batch(packs):
    batches = packer.tf.dataset(packs["cls"], batch_size=4, seed=8)
    assert batches.packer_position.ahead

    @tf.function
    def total(dataset: tf.data.Dataset) -> tuple[tf.Tensor, tf.Tensor]:
        pixels, labels = tf.constant(0, tf.int64), tf.constant(0, tf.int64)
        for x, y in dataset:
            pixels += tf.reduce_sum(tf.cast(x, tf.int64))
            labels += tf.reduce_sum(tf.cast(y, tf.int64))
        return pixels, labels

    for epoch in range(2):
        wanted = expected(packs["cls"], 4, epoch, seed=8, uneven="allow")
        got = [int(t) for t in total(batches)]
        assert got == [sum(int(b[i].astype(np.int64).sum()) for b in wanted) for i in (0, 1)]


def test_the_next_batch_is_copied_during_the_step(big):
    """While the consumer's step runs (here a sleep, as a step on an accelerator leaves the
    cores to the input), the helpers copy the next batch: the process spends about a batch's
    read of CPU meanwhile."""
    batches = packer.tf.dataset(big, batch_size=7, seed=0)
    epochs = []  # CPU per batch of whole epochs; the least: other threads' work only adds
    for _ in range(10):
        start = cpu_seconds()
        list(batches)
        epochs.append((cpu_seconds() - start) / len(batches))
    per_batch = min(epochs)
    for _ in range(3):  # no timing: the CPU is spent while the consumer sleeps, however late
        iterator = iter(batches)
        next(iterator)  # starts the pass; batch 1 is copied from here on
        begin, deadline = cpu_seconds(), time.monotonic() + 10
        while cpu_seconds() - begin < 0.4 * per_batch and time.monotonic() < deadline:
            time.sleep(0.01)
        assert cpu_seconds() - begin >= 0.4 * per_batch
        assert next(iterator)[0].shape[0] == 7


def test_keras_fit_trains_on_it(packs):
    batches = packer.tf.dataset(packs["cls"], batch_size=4, seed=8)
    assert batches.packer_position.ahead
    model = keras.Sequential(
        [keras.Input((24, 24, 3)), keras.layers.Rescaling(1 / 255), keras.layers.Flatten(),
         keras.layers.Dense(3)]
    )  # fmt: skip
    model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(True))
    before = [w.copy() for w in model.get_weights()]
    history = model.fit(batches, epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2 and np.isfinite(history.history["loss"]).all()
    assert any(not np.array_equal(a, b) for a, b in zip(before, model.get_weights(), strict=True))


def cpu_seconds() -> float:
    """User and system CPU time of this process, all threads."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
