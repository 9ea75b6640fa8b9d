"""`packer.tf.dataset`: a `tf.data.Dataset` of `(images, targets)` batches over any pack.

Two sources feed the same in-graph tail (normalisation and one-hot with the NumPy readers'
semantics, then prefetch):

- streamed (tfrecord packs, the default there): shard files, split per input pipeline, are
  interleaved; records go through a shuffle buffer, are batched first and then parsed,
  decoded and reshaped in one vectorised step per batch.
- random access (npy and recordio packs; uncompressed tfrecord with `stream=False`): shuffled
  batches of sample indices, each read by the format's shard readers in one
  `tf.numpy_function` into 64-byte aligned arrays that TensorFlow adopts without a copy.

Multi-worker training gives each input pipeline its share through `tf.distribute`:

    strategy.distribute_datasets_from_function(
        lambda ctx: packer.tf.dataset(
            DIR, "train", ctx.get_per_replica_batch_size(64), seed=0, input_context=ctx
        )
    )
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from .dataset import Split, open_dataset
from .formats import tfrecord
from .schema import Field
from .targets import Normalizer

Decoder = Callable[[tf.Tensor], dict[str, tf.Tensor]]

DEFAULT_SHUFFLE_BUFFER = 256  # records; shards already mix classes (seeded order at pack time)
INTERLEAVE_FILES = 16  # shard files read at once when shuffling
# Records are whole images: unbuffered reads go straight into each record's string, where a
# read buffer would copy every byte once more (measured: buffered reads are slower).
READ_BUFFER = 0


@dataclass(frozen=True)
class _Order:
    """Which samples, in what order and batches: everything a source needs besides the split."""

    batch_size: int
    shuffle: bool
    seed: int | None
    repeat: bool
    drop_remainder: bool
    deterministic: bool
    shuffle_buffer: int
    pipelines: int  # input pipelines (tf.distribute), and this one's id
    pipeline: int

    def seed_for(self, stage: int) -> int | None:
        """A distinct seed per shuffling stage, None when unseeded."""
        return None if self.seed is None else self.seed + stage


def dataset(
    path: str | os.PathLike,
    split: str = "train",
    batch_size: int = 32,
    shuffle: bool = True,
    one_hot: bool = False,
    normalize: str | None = None,
    seed: int | None = None,
    repeat: bool = False,
    drop_remainder: bool = False,
    deterministic: bool | None = None,
    shuffle_buffer: int = DEFAULT_SHUFFLE_BUFFER,
    input_context: tf.distribute.InputContext | None = None,
    stream: bool | None = None,
) -> tf.data.Dataset:
    """Batches `(images, targets)` of one split of a pack (any format), prefetched.

    Images are uint8 `[B,H,W,3]`, or float32 with `normalize="unit"` (/255) or `"dataset"`
    (the manifest's mean/std); targets class ids `[B]` (int32) or masks `[B,H,W]`, or
    float32 one-hot `[B,C]` / `[B,H,W,C]` with `one_hot=True` (ignore index: all-zero rows).
    `shuffle_buffer` (records) applies to streamed packs; random access shuffles uniformly.
    `deterministic=None` keeps the order reproducible when there is a seed or no shuffling,
    and lets parallel steps finish out of order (faster) otherwise. `input_context` (from
    `strategy.distribute_datasets_from_function`) gives each input pipeline its own shard
    files when streaming (its own samples with random access, or with fewer files than
    pipelines); `batch_size` is per pipeline. `stream=None` streams tfrecord packs and reads
    the others by random access; `stream=False` reads uncompressed tfrecord by random access.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    part = open_dataset(path)[split]
    fmt = part.dataset.format
    if stream is None:
        stream = fmt == "tfrecord"
    if stream and fmt != "tfrecord":
        raise ValueError(f"{path}: only tfrecord packs stream; this one is {fmt}")
    pipelines, pipeline = (
        (input_context.num_input_pipelines, input_context.input_pipeline_id)
        if input_context is not None
        else (1, 0)
    )
    order = _Order(
        batch_size,
        shuffle,
        seed,
        repeat,
        drop_remainder,
        seed is not None or not shuffle if deterministic is None else deterministic,
        shuffle_buffer,
        pipelines,
        pipeline,
    )
    batches, decode = (_records if stream else _indices)(part, order)
    transform = _transform(part, one_hot, normalize)
    batches = batches.map(
        lambda batch: transform(decode(batch)),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=order.deterministic,
    )
    return batches.prefetch(tf.data.AUTOTUNE)


def _records(part: Split, order: _Order) -> tuple[tf.data.Dataset, Decoder]:
    """Batches of serialized Examples from the split's TFRecord files, and their decoder."""
    options = part.dataset.format_options
    shards = part.shards
    by_file = len(shards) >= order.pipelines
    if by_file:
        shards = shards[order.pipeline :: order.pipelines]
    paths = [
        str(part.dataset.root / part.name / tfrecord.file_name(s["name"], options)) for s in shards
    ]
    compression = "GZIP" if options["compression"] == "gzip" else ""
    files = tf.data.Dataset.from_tensor_slices(paths)
    if order.shuffle and by_file:
        files = files.shuffle(len(paths), seed=order.seed_for(0))
    records = files.interleave(
        lambda f: tf.data.TFRecordDataset(f, compression, READ_BUFFER),
        cycle_length=min(len(paths), INTERLEAVE_FILES) if order.shuffle else 1,
        num_parallel_calls=tf.data.AUTOTUNE,
        # Fewer files than pipelines: every pipeline reads all in one order, keeps its share.
        deterministic=order.deterministic or not by_file,
    )
    count = sum(s["count"] for s in shards)
    if not by_file:
        records = records.shard(order.pipelines, order.pipeline)
        count = len(range(order.pipeline, count, order.pipelines))
    # A known length (Keras shows progress and steps; a file with other counts is an error).
    records = records.apply(tf.data.experimental.assert_cardinality(count))
    if order.shuffle:
        records = records.shuffle(order.shuffle_buffer, seed=order.seed_for(1))
    if order.repeat:
        records = records.repeat()
    batches = records.batch(order.batch_size, order.drop_remainder)
    return batches, tfrecord.example_decoder(part.dataset.fields)


def _indices(part: Split, order: _Order) -> tuple[tf.data.Dataset, Decoder]:
    """Batches of sample indices, and a decoder reading them with the format's random access."""
    fields = part.dataset.fields
    reader = part.reader  # opened here, once, rather than by concurrent calls
    indices = tf.data.Dataset.range(part.count).shard(order.pipelines, order.pipeline)
    if order.shuffle:  # indices are small: shuffle them all, a uniform order
        indices = indices.shuffle(part.count, seed=order.seed_for(0))
    if order.repeat:
        indices = indices.repeat()

    def read(batch: np.ndarray) -> list[np.ndarray]:
        arrays = reader.read(batch)  # in ascending index order, like PackedSequence batches
        return [arrays[f.name] for f in fields]

    def decode(batch: tf.Tensor) -> dict[str, tf.Tensor]:
        arrays = tf.numpy_function(read, [batch], [_tf_dtype(f) for f in fields], stateful=False)
        return {
            f.name: tf.ensure_shape(array, [batch.shape[0], *f.shape])
            for f, array in zip(fields, arrays, strict=True)
        }

    return indices.batch(order.batch_size, order.drop_remainder), decode


def _tf_dtype(field: Field) -> tf.DType:
    """The TensorFlow dtype of a field's values (byte order is the readers' business)."""
    return tf.as_dtype(np.dtype(field.dtype).newbyteorder("="))


def _transform(part: Split, one_hot: bool, normalize: str | None):
    """Per-batch fields -> (images, targets), normalised and one-hot as `targets.py` does it."""
    dataset = part.dataset
    normalizer = Normalizer(normalize, dataset.manifest["stats"])
    target = "masks" if dataset.task == "segmentation" else "labels"
    classes = len(dataset.classes)

    def apply(arrays: dict[str, tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor]:
        images, targets = arrays["images"], arrays[target]
        if normalizer.mode is not None:
            images = tf.cast(images, tf.float32)
            if normalizer.mode == "unit":
                images = images * (1 / 255)
            else:
                images = (images - normalizer.mean) * normalizer.inv_std
        if one_hot:  # ids outside 0..C-1 (the ignore index) become all-zero rows
            targets = tf.one_hot(tf.cast(targets, tf.int32), classes, dtype=tf.float32)
        return images, targets

    return apply
