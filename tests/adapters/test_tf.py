"""`packer.tf.dataset`: order, shuffling, transforms, distribution and training, any format."""

from __future__ import annotations

from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

import packer
import packer.tf
from packer.fields.presets import fields_for
from packer.reading.transforms import Normalizer, ids_table
from tests.fixtures.models import tiny_classifier

SIZE = (32, 32)  # (W, H): "fit" pads the 4:3 scenes, so masks hold the ignore index
SHARD = 5 * 32 * 32 * 4  # five segmentation samples per shard: 3 train shards


@pytest.fixture(scope="module")
def seg(seg_src, tmp_path_factory) -> dict[str, Path]:
    """The same segmentation source packed in every format."""
    root = tmp_path_factory.mktemp("tf-seg")
    for fmt in ("npy", "tfrecord", "recordio"):
        packer.pack(seg_src, out=root / fmt, format=fmt, size=SIZE, resize="fit", shard_size=SHARD)
    return {fmt: root / fmt for fmt in ("npy", "tfrecord", "recordio")}


@pytest.fixture(scope="module")
def cls(cls_src, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tf-cls")
    for fmt in ("npy", "tfrecord", "recordio"):
        packer.pack(cls_src, out=root / fmt, format=fmt, size=24, shard_size=8 * 24 * 24 * 3)
    return {fmt: root / fmt for fmt in ("npy", "tfrecord", "recordio")}


# Every way of reading a pack: tfrecord streamed (its default), random access to the others.
READS = [("tfrecord", None), ("tfrecord", False), ("npy", None), ("recordio", None)]


def everything(path: Path, split: str = "train") -> dict[str, np.ndarray]:
    part = packer.open(path)[split]
    return part.reader.read(np.arange(part.count))


def collect(batches: tf.data.Dataset) -> tuple[np.ndarray, np.ndarray]:
    pairs = list(batches.as_numpy_iterator())
    return np.concatenate([x for x, _ in pairs]), np.concatenate([y for _, y in pairs])


def keys(images: np.ndarray) -> list[bytes]:
    """Each sample's bytes: tells samples apart."""
    return [x.tobytes() for x in images]


@pytest.mark.parametrize("fmt,stream", READS)
def test_unshuffled_batches_are_the_pack_in_order(seg, fmt, stream):
    batches = packer.tf.dataset(seg[fmt], batch_size=4, shuffle=False, stream=stream)
    images_spec, masks_spec = batches.element_spec
    assert images_spec.shape.as_list() == [None, 32, 32, 3] and images_spec.dtype == tf.uint8
    assert masks_spec.shape.as_list() == [None, 32, 32] and masks_spec.dtype == tf.uint8
    images, masks = collect(batches)
    expected = everything(seg["npy"])
    assert np.array_equal(images, expected["images"]) and np.array_equal(masks, expected["masks"])
    assert (masks == 255).any()  # padding: the ignore index


@pytest.mark.parametrize("fmt,stream", READS)
def test_seeded_shuffle_is_reproducible_and_sees_every_sample_once(seg, fmt, stream):
    def epochs(batches: tf.data.Dataset) -> list[list[bytes]]:
        return [keys(collect(batches)[0]) for _ in range(2)]

    first = epochs(packer.tf.dataset(seg[fmt], batch_size=3, seed=4, stream=stream))
    again = epochs(packer.tf.dataset(seg[fmt], batch_size=3, seed=4, stream=stream))
    expected = sorted(keys(everything(seg["npy"])["images"]))
    assert first == again
    assert sorted(first[0]) == sorted(first[1]) == expected
    assert first[0] != first[1] and first[0] != sorted(first[0])


@pytest.mark.parametrize("fmt,stream", READS)
def test_one_hot_and_normalisation_match_the_numpy_readers(seg, fmt, stream):
    path = seg[fmt]
    expected = everything(seg["npy"])
    stats = packer.open(path).manifest["stats"]
    table = ids_table(4, 255, fields_for("segmentation", (1, 1), np.dtype(np.uint8))[1:])
    for mode in ("unit", "dataset"):
        batches = packer.tf.dataset(
            path, batch_size=5, shuffle=False, one_hot=True, normalize=mode, stream=stream
        )
        images, targets = collect(batches)
        assert images.dtype == np.float32 and targets.shape == (14, 32, 32, 4)
        assert np.allclose(images, Normalizer(mode, stats)(expected["images"]), atol=1e-5)
        assert np.array_equal(targets, table[expected["masks"]])  # ignore index: all zero


@pytest.mark.parametrize("fmt,stream", READS)
def test_classification_labels_and_one_hot(cls, fmt, stream):
    expected = everything(cls["npy"])
    images, labels = collect(
        packer.tf.dataset(cls[fmt], batch_size=5, shuffle=False, stream=stream)
    )
    assert labels.dtype == np.int32 and np.array_equal(labels, expected["labels"])
    assert np.array_equal(images, expected["images"])
    _, one_hot = collect(packer.tf.dataset(cls[fmt], batch_size=5, shuffle=False, one_hot=True))
    assert np.array_equal(one_hot, np.eye(3, dtype=np.float32)[expected["labels"]])


@pytest.mark.parametrize("fmt,stream", READS)
@pytest.mark.parametrize("pipelines", [2, 4])
def test_input_pipelines_share_the_samples_out(seg, fmt, stream, pipelines):
    seen = []
    for pipeline in range(pipelines):
        context = tf.distribute.InputContext(pipelines, pipeline, pipelines)
        batches = packer.tf.dataset(seg[fmt], batch_size=2, input_context=context, stream=stream)
        seen.append(keys(collect(batches)[0]))
    assert all(seen)
    assert sorted(k for part in seen for k in part) == sorted(
        keys(everything(seg["npy"])["images"])
    )


@pytest.mark.parametrize("fmt", ["tfrecord", "npy"])
def test_known_length_drop_remainder_and_repeat(seg, fmt):
    assert packer.tf.dataset(seg[fmt], batch_size=4).cardinality() == 4  # 14 samples
    batches = packer.tf.dataset(seg[fmt], batch_size=4, drop_remainder=True, seed=0)
    assert batches.element_spec[0].shape.as_list() == [4, 32, 32, 3]
    assert batches.cardinality() == 3 and len(list(batches)) == 3
    endless = packer.tf.dataset(seg[fmt], batch_size=4, repeat=True)
    assert endless.cardinality() == tf.data.INFINITE_CARDINALITY
    assert len(list(endless.take(10))) == 10


def test_options_that_do_not_apply_are_refused(seg):
    with pytest.raises(ValueError, match="only tfrecord packs stream"):
        packer.tf.dataset(seg["npy"], stream=True)
    with pytest.raises(ValueError, match="batch_size"):
        packer.tf.dataset(seg["npy"], batch_size=0)


def test_distribute_datasets_from_function(seg):
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])

    def make(context: tf.distribute.InputContext) -> tf.data.Dataset:
        batch = context.get_per_replica_batch_size(4)
        return packer.tf.dataset(seg["tfrecord"], batch_size=batch, input_context=context)

    distributed = strategy.distribute_datasets_from_function(make)
    seen = sum(int(strategy.experimental_local_results(x)[0].shape[0]) for x, _ in distributed)
    assert seen == 14


@pytest.mark.parametrize("fmt", ["tfrecord", "npy"])
def test_keras_trains_a_segmenter_for_an_epoch(seg, fmt):
    model = keras.Sequential(
        [
            keras.Input((32, 32, 3)),
            keras.layers.Conv2D(8, 3, padding="same", activation="relu"),
            keras.layers.Conv2D(4, 1, activation="softmax"),
        ]
    )
    model.compile(optimizer="adam", loss="categorical_crossentropy")
    batches = packer.tf.dataset(seg[fmt], batch_size=4, one_hot=True, normalize="dataset")
    history = model.fit(batches, epochs=1, verbose=0, shuffle=False)
    assert np.isfinite(history.history["loss"][0])


def test_keras_trains_a_classifier_for_an_epoch(cls):
    model = tiny_classifier(24, 3)
    before = [w.copy() for w in model.get_weights()]
    batches = packer.tf.dataset(cls["tfrecord"], batch_size=8, normalize="unit")
    history = model.fit(batches, epochs=1, verbose=0, shuffle=False)
    assert np.isfinite(history.history["loss"][0])
    assert any(not np.array_equal(a, b) for a, b in zip(before, model.get_weights(), strict=True))


@pytest.mark.parametrize("fmt,stream", READS)
@pytest.mark.parametrize("world_size", [2, 3])
def test_explicit_ranks_get_equal_batch_counts(seg, fmt, stream, world_size):
    expected = keys(everything(seg["npy"])["images"])  # 14 samples in shards of 5, 5, 4
    for uneven in ("pad", "drop"):
        parts = []
        for rank in range(world_size):
            batches = packer.tf.dataset(
                seg[fmt], batch_size=2, seed=3, stream=stream, rank=rank,
                world_size=world_size, uneven=uneven,
            )  # fmt: skip
            parts.append(keys(collect(batches)[0]))
            assert batches.cardinality() == -(-len(parts[-1]) // 2)
        assert len({len(p) for p in parts}) == 1  # as many batches on every rank
        union = [k for p in parts for k in p]
        if uneven == "pad":  # every sample; a rank repeats a few of its own
            assert sorted(set(union)) == sorted(expected)
        else:  # disjoint
            assert len(set(union)) == len(union) and set(union) <= set(expected)
    with pytest.raises(ValueError, match="not both"):
        context = tf.distribute.InputContext(2, 0, 2)
        packer.tf.dataset(seg[fmt], input_context=context, rank=0, world_size=2)


def test_random_access_resumes_at_a_step_count(seg):
    endless = packer.tf.dataset(seg["npy"], batch_size=3, seed=2, repeat=True)
    full = [keys(x.numpy()) for x, _ in endless.take(9)]
    resumed = packer.tf.dataset(seg["npy"], batch_size=3, seed=2, repeat=True, start=6)
    assert [keys(x.numpy()) for x, _ in resumed.take(3)] == full[6:]


def test_a_streamed_pipeline_resumes_from_its_checkpointed_iterator(seg, tmp_path):
    """Streamed tfrecord is tf.data's own pipeline: tf.train.Checkpoint saves its position."""

    def make() -> tf.data.Dataset:
        return packer.tf.dataset(seg["tfrecord"], batch_size=3, seed=5, repeat=True)

    full = [keys(x.numpy()) for x, _ in make().take(9)]
    iterator = iter(make())
    head = [keys(next(iterator)[0].numpy()) for _ in range(4)]
    saved = tf.train.Checkpoint(iterator=iterator).save(str(tmp_path / "it"))
    resumed = iter(make())
    tf.train.Checkpoint(iterator=resumed).restore(saved)
    assert head + [keys(next(resumed)[0].numpy()) for _ in range(5)] == full


def test_uncompressed_tfrecord_reads_by_random_access_by_default(seg):
    """The default path is packer's shard reader: the same seeded batches as PackedSequence."""
    from packer.keras import PackedSequence

    seq = PackedSequence(seg["tfrecord"], batch_size=4, seed=5)
    batches = list(packer.tf.dataset(seg["tfrecord"], batch_size=4, seed=5))
    assert len(batches) == len(seq)
    for i, (images, masks) in enumerate(batches):
        assert np.array_equal(images.numpy(), seq[i][0])
        assert np.array_equal(masks.numpy(), seq[i][1])


def test_in_graph_augmentation_matches_the_numpy_executor(seg):
    """One seeded draw: tf.data's in-graph warp agrees with PackedSequence's OpenCV warp."""
    from packer.keras import PackedSequence

    aug = packer.Augment(rotation_range=15, zoom_range=0.1, horizontal_flip=True, seed=2)
    seq = PackedSequence(seg["npy"], batch_size=4, seed=1, augment=aug)
    batches = list(packer.tf.dataset(seg["npy"], batch_size=4, seed=1, augment=aug))
    assert len(batches) == len(seq)
    agree, total = 0, 0
    for i, (images, masks) in enumerate(batches):
        want_images, want_masks = seq[i]
        agree += int((masks.numpy() == want_masks).sum())
        total += want_masks.size
        assert np.abs(images.numpy().astype(int) - want_images).mean() < 2.0
    assert agree / total >= 0.9999  # docs/augmentation.md: masks agree on 99.99% of pixels
    plain = next(iter(packer.tf.dataset(seg["npy"], batch_size=4, seed=1)))[1].numpy()
    assert not np.array_equal(plain, batches[0][1].numpy())  # the masks did move
    with pytest.raises(ValueError, match="random access"):
        packer.tf.dataset(seg["tfrecord"], stream=True, augment=aug)


@pytest.mark.parametrize("normalize", [None, "unit"])
def test_a_resumed_first_pass_ends_early_then_whole_epochs_follow(seg, normalize):
    """start= makes the first pass shorter, with or without in-graph work after the read."""
    full = packer.tf.dataset(seg["npy"], batch_size=3, seed=3, normalize=normalize)
    epochs = [[x.numpy() for x, _ in full] for _ in range(2)]
    resumed = packer.tf.dataset(seg["npy"], batch_size=3, seed=3, normalize=normalize, start=2)
    rest, following = ([x.numpy() for x, _ in resumed] for _ in range(2))
    assert len(rest) == len(epochs[0]) - 2 and len(following) == len(epochs[1])
    assert all(np.array_equal(a, b) for a, b in zip(rest, epochs[0][2:], strict=True))
    assert all(np.array_equal(a, b) for a, b in zip(following, epochs[1], strict=True))
