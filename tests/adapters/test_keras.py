"""PackedSequence: batches, shuffling, one-hot, normalisation, and real Keras training from it."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import keras
import numpy as np
import pytest

import packer
from packer.fields.presets import fields_for
from packer.keras import PackedSequence
from packer.reading.transforms import ids_table
from tests.fixtures.models import tiny_classifier
from tests.fixtures.packs import REPO


@pytest.fixture(scope="module")
def seg_pack(seg_src, tmp_path_factory):
    out = tmp_path_factory.mktemp("seg-pack") / "p"
    packer.pack(seg_src, out=out, size=(32, 24), shard_size=5 * 32 * 24 * 4)
    return out


@pytest.fixture(scope="module")
def cls_pack(cls_src, tmp_path_factory):
    out = tmp_path_factory.mktemp("cls-pack") / "p"
    packer.pack(cls_src, out=out, size=(24, 24), shard_size=4 * 24 * 24 * 3)
    return out


def fingerprints(images: np.ndarray) -> list[int]:
    """A per-sample checksum that tells samples apart."""
    weights = np.arange(1, images[0].size + 1, dtype=np.int64)
    return [int(x.reshape(-1).astype(np.int64) @ weights) for x in images]


def all_samples(path, split="train") -> list[int]:
    ds = packer.open(path)[split]
    return sorted(fingerprints(ds.reader.read(np.arange(ds.count))["images"]))


def test_batches_are_uint8_images_and_index_masks(seg_pack):
    seq = PackedSequence(seg_pack, split="train", batch_size=4, shuffle=False)
    assert isinstance(seq, keras.utils.PyDataset) and isinstance(seq, keras.utils.Sequence)
    assert len(seq) == 4  # 14 samples
    images, masks = seq[0]
    assert images.shape == (4, 24, 32, 3) and images.dtype == np.uint8
    assert masks.shape == (4, 24, 32) and masks.dtype == np.uint8
    assert seq[3][0].shape[0] == 2
    assert len(PackedSequence(seg_pack, batch_size=4, drop_remainder=True)) == 3
    with pytest.raises(IndexError):
        seq[4]


def test_each_epoch_is_a_new_seeded_permutation(seg_pack):
    seq = PackedSequence(seg_pack, batch_size=3, shuffle=True, seed=7)

    def epoch() -> list[int]:
        seen = [f for i in range(len(seq)) for f in fingerprints(seq[i][0])]
        seq.on_epoch_end()
        return seen

    first, second = epoch(), epoch()
    assert sorted(first) == sorted(second) == all_samples(seg_pack)
    assert first != second
    again = PackedSequence(seg_pack, batch_size=3, shuffle=True, seed=7)
    assert [f for i in range(len(again)) for f in fingerprints(again[i][0])] == first


def test_one_hot_and_normalisation(seg_pack, cls_pack):
    seq = PackedSequence(seg_pack, batch_size=5, shuffle=False, one_hot=True, normalize="unit")
    raw = PackedSequence(seg_pack, batch_size=5, shuffle=False)
    images, onehot = seq[0]
    raw_images, masks = raw[0]
    assert onehot.shape == (5, 24, 32, 4) and onehot.dtype == np.float32
    assert np.array_equal(onehot.argmax(-1), masks)
    assert np.allclose(images, raw_images / 255.0)
    standard = PackedSequence(seg_pack, batch_size=14, shuffle=False, normalize="dataset")[0][0]
    assert np.allclose(standard.reshape(-1, 3).mean(0), 0, atol=0.05)
    assert np.allclose(standard.reshape(-1, 3).std(0), 1, atol=0.05)
    _, labels = PackedSequence(cls_pack, batch_size=4, shuffle=False, one_hot=True)[0]
    assert labels.shape == (4, 3) and np.array_equal(labels.sum(1), np.ones(4))


def test_ignore_index_is_all_zero_in_one_hot():
    table = ids_table(4, 255, fields_for("segmentation", (1, 1), np.dtype(np.uint8))[1:])
    assert np.array_equal(table[np.array([0, 3, 255])], [[1, 0, 0, 0], [0, 0, 0, 1], [0, 0, 0, 0]])


def test_pickles_without_open_files(seg_pack):
    seq = PackedSequence(seg_pack, batch_size=4, shuffle=False)
    first = seq[0][0]
    state = pickle.dumps(seq)
    assert len(state) < 50_000 < first.nbytes * 10  # no mapped arrays travel, only the path
    clone = pickle.loads(state)
    assert np.array_equal(clone[0][0], first)


class RecordingModel(keras.Model):
    """A model whose eager train step records which samples it was fed."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.dense = keras.layers.Dense(3)
        self.seen: list[int] = []

    def call(self, x):
        return self.dense(keras.ops.mean(keras.ops.cast(x, "float32"), axis=(1, 2)))

    def train_step(self, data):
        x, _ = data
        self.seen.extend(fingerprints(np.asarray(x)))
        return super().train_step(data)


@pytest.mark.parametrize("workers,multiprocessing", [(1, False), (4, True)])
def test_keras_fit_sees_every_sample_once_per_epoch(cls_pack, workers, multiprocessing):
    seq = PackedSequence(
        cls_pack,
        batch_size=5,
        shuffle=True,
        seed=1,
        workers=workers,
        use_multiprocessing=multiprocessing,
    )
    model = RecordingModel()
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy", run_eagerly=True)
    model.fit(seq, epochs=2, verbose=0)
    expected = all_samples(cls_pack)
    assert sorted(model.seen[: len(expected)]) == expected
    assert sorted(model.seen[len(expected) :]) == expected
    assert model.seen[: len(expected)] != model.seen[len(expected) :]


def test_trains_a_classifier_for_an_epoch(cls_pack):
    seq = PackedSequence(cls_pack, batch_size=8, normalize="unit")
    model = tiny_classifier(24, 3)
    before = [w.copy() for w in model.get_weights()]
    history = model.fit(seq, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    assert any(not np.array_equal(a, b) for a, b in zip(before, model.get_weights(), strict=True))


def test_trains_a_segmenter_for_an_epoch(seg_pack):
    seq = PackedSequence(seg_pack, batch_size=4, normalize="dataset", one_hot=True)
    model = keras.Sequential(
        [
            keras.Input((24, 32, 3)),
            keras.layers.Conv2D(8, 3, padding="same", activation="relu"),
            keras.layers.Conv2D(4, 1, activation="softmax"),
        ]
    )
    model.compile(optimizer="adam", loss="categorical_crossentropy")
    history = model.fit(seq, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    assert model.predict(seq[0][0], verbose=0).shape == (4, 24, 32, 4)


def test_windowed_shuffle_reads_shards_in_sequential_runs(seg_pack):
    seq = PackedSequence(seg_pack, batch_size=2, shuffle="windows", shuffle_window=5, seed=3)
    counts = [s["count"] for s in packer.open(seg_pack)["train"].shards]
    assert counts == [5, 5, 4]
    orders = []
    for _ in range(2):
        order = seq.loader.sampler.order(seq.loader.epoch).copy()
        assert sorted(order) == list(range(14))
        for start in range(0, 14, 5):  # a window spans at most two shards: two runs
            window = np.sort(order[start : start + 5])
            assert np.count_nonzero(np.diff(window) != 1) <= 1
        seen = [f for i in range(len(seq)) for f in fingerprints(seq[i][0])]
        assert sorted(seen) == all_samples(seg_pack)
        orders.append(order)
        seq.on_epoch_end()
    assert not np.array_equal(orders[0], orders[1])
    with pytest.raises(ValueError, match="shuffle"):
        PackedSequence(seg_pack, shuffle="sometimes")


@pytest.mark.parametrize("world_size", [2, 3])
@pytest.mark.parametrize("shuffle", ["global", "windows"])
def test_ranks_get_disjoint_parts_with_equal_batch_counts(seg_pack, world_size, shuffle):
    expected = all_samples(seg_pack)  # 14 samples
    for uneven in ("pad", "drop"):
        parts = []
        for rank in range(world_size):
            options = {"rank": rank, "world_size": world_size, "uneven": uneven}
            seq = PackedSequence(
                seg_pack, "train", 2, shuffle=shuffle, seed=4, shuffle_window=3, **options
            )
            parts.append([f for i in range(len(seq)) for f in fingerprints(seq[i][0])])
        assert len({len(p) for p in parts}) == 1  # same batch counts on every rank
        union = [f for p in parts for f in p]
        if uneven == "pad":  # the whole split, a few samples twice
            assert sorted(set(union)) == sorted(set(expected))
            assert len(union) == -(-14 // world_size) * world_size
        else:  # disjoint, the few that do not divide left out
            assert len(set(union)) == len(union) == 14 - 14 % world_size


KERAS_TORCH = """
import numpy as np, keras, sys
from packer.keras import PackedSequence
assert keras.backend.backend() == "torch" and "tensorflow" not in sys.modules
seq = PackedSequence(sys.argv[1], batch_size=8, normalize="unit", seed=0)
model = keras.Sequential([keras.Input((24, 24, 3)), keras.layers.Conv2D(4, 3, activation="relu"),
                          keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(3)])
model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
before = [w.copy() for w in model.get_weights()]
history = model.fit(seq, epochs=2, verbose=0)
assert np.isfinite(history.history["loss"]).all(), history.history
assert any(not np.array_equal(a, b) for a, b in zip(before, model.get_weights()))
print("trained", history.history["loss"])
"""


def test_keras_with_the_torch_backend_trains_from_packed_sequence(cls_pack):
    env = os.environ | {"KERAS_BACKEND": "torch", "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", KERAS_TORCH, str(cls_pack)],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "trained" in done.stdout


def test_packer_workers_give_the_same_augmented_batches_in_order(seg_pack):
    """workers=2: packer's own processes, shared-memory slots; same batches as in-process."""
    aug = packer.Augment(rotation_range=10, horizontal_flip=True, zoom_range=0.1, seed=4)
    alone = PackedSequence(seg_pack, batch_size=3, seed=2, augment=aug)
    pooled = PackedSequence(seg_pack, batch_size=3, seed=2, augment=aug, workers=2)
    try:
        for _ in range(2):  # on_epoch_end reaches the workers: epoch 1 differs from epoch 0
            assert len(pooled) == len(alone)
            for i in range(len(alone)):
                want, got = alone[i], pooled[i]
                assert np.array_equal(want[0], got[0]) and np.array_equal(want[1], got[1])
            alone.on_epoch_end()
            pooled.on_epoch_end()
        state = alone.state_dict(batches=2)
        resumed = PackedSequence(seg_pack, batch_size=3, augment=aug, workers=2)
        resumed.load_state_dict(state)
        assert np.array_equal(resumed[0][1], alone[2][1])
        resumed.close()
    finally:
        pooled.close()


def test_fit_from_packer_workers(cls_pack):
    seq = PackedSequence(cls_pack, batch_size=4, normalize="unit", workers=2)
    try:
        history = tiny_classifier(24, 3).fit(seq, epochs=2, verbose=0)
    finally:
        seq.close()
    assert all(np.isfinite(history.history["loss"]))
