"""`packer.tf.dataset`: a `tf.data.Dataset` of `(images, targets)` batches over any pack.

Two sources end in the same in-graph work (normalisation and one-hot with the NumPy readers'
semantics) and a prefetch:

- streamed (tfrecord packs, the default there): shard files, split per input pipeline, are
  interleaved; records go through a shuffle buffer, are batched first and then parsed,
  decoded and reshaped in one vectorised step per batch.
- random access (npy and recordio packs; uncompressed tfrecord with `stream=False`): shuffled
  batches of sample indices, each read by the format's shard readers, in the pipeline's one
  `tf.numpy_function` (see tf_indexed), into 64-byte aligned arrays that TensorFlow adopts
  without a copy.

Multi-worker training gives each input pipeline its share through `tf.distribute`:

    strategy.distribute_datasets_from_function(
        lambda ctx: packer.tf.dataset(
            DIR, "train", ctx.get_per_replica_batch_size(64), seed=0, input_context=ctx
        )
    )

or through explicit `rank`/`world_size` (other launchers), each rank with as many batches.

Exact mid-epoch resume: random access takes `start=` (batches already consumed since epoch 0,
e.g. the optimizer's step count, or a reading state from another packer reader with the same
options) and yields exactly what the uninterrupted dataset would have yielded next. The
streamed pipeline is tf.data's own: checkpoint its iterator with `tf.train.Checkpoint`.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import tensorflow as tf

from .augment import Augment
from .formats import tfrecord
from .reading.dataset import Split, open_dataset
from .reading.transforms import BatchTransform
from .tf_indexed import Order, indexed

Decoder = Callable[[tf.Tensor], dict[str, tf.Tensor]]

DEFAULT_SHUFFLE_BUFFER = 256  # records; shards already mix classes (seeded order at pack time)
INTERLEAVE_FILES = 16  # shard files read at once when shuffling
# Records are whole images: unbuffered reads go straight into each record's string, where a
# read buffer would copy every byte once more (measured: buffered reads are slower).
READ_BUFFER = 0


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
    rank: int | None = None,
    world_size: int | None = None,
    uneven: str | None = None,
    start: int | dict | list[dict] | None = None,
    augment: Augment | None = None,
    cache_dir: str | os.PathLike | None = None,
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
    pipelines); `batch_size` is per pipeline. `stream=None` streams gzip tfrecord packs and
    reads every other pack by random access through packer's shard readers (several times
    faster than TensorFlow's TFRecord reader); `stream=True` streams an uncompressed tfrecord
    pack too. `augment` (a `packer.Augment`) warps images and masks in-graph with the same
    seeded draw as PackedSequence (random access only). A pack at a URL is read through a
    local shard cache in `cache_dir` (default: the user's cache folder), each shard file
    fetched when first needed.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    part = open_dataset(path, cache_dir)[split]
    fmt = part.dataset.format
    if stream is None:
        stream = fmt == "tfrecord" and part.dataset.format_options.get("compression") == "gzip"
    if stream and fmt != "tfrecord":
        raise ValueError(f"{path}: only tfrecord packs stream; this one is {fmt}")
    if augment is not None and stream:
        raise ValueError(
            "augment= needs random access (each sample's draw is keyed by its index); "
            "a gzip tfrecord pack only streams: repack it uncompressed or as npy"
        )
    if input_context is not None:
        if rank is not None or world_size is not None:
            raise ValueError("give input_context or rank/world_size, not both")
        pipelines, pipeline = input_context.num_input_pipelines, input_context.input_pipeline_id
    else:
        pipelines, pipeline = world_size or 1, rank or 0
    if uneven is None:
        uneven = "pad" if world_size is not None else "allow"
    if start is not None and stream:
        raise ValueError(
            "start= needs random access (stream=False on uncompressed tfrecord); a streamed "
            "pipeline resumes exactly from its iterator saved with tf.train.Checkpoint"
        )
    order = Order(
        batch_size,
        shuffle,
        seed,
        repeat,
        drop_remainder,
        seed is not None or not shuffle if deterministic is None else deterministic,
        shuffle_buffer,
        pipelines,
        pipeline,
        uneven,
    )
    transform = BatchTransform(part.dataset.manifest, normalize, one_hot)
    if stream:
        records, decode = _records(part, order)
        batches = records.map(
            lambda batch: transform.tf_apply(decode(batch)),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=order.deterministic,
        )
        position = None
    else:
        batches, position = indexed(path, split, order, start, transform, augment, cache_dir)
    batches = batches.prefetch(tf.data.AUTOTUNE)
    if position is not None and not repeat:  # what packer.keras.BackupAndRestore moves
        batches.packer_position = position
    return batches


def _records(part: Split, order: Order) -> tuple[tf.data.Dataset, Decoder]:
    """Batches of serialized Examples from the split's TFRecord files, and their decoder."""
    options = part.dataset.format_options
    shards = part.shards
    by_file = len(shards) >= order.pipelines
    if by_file:
        shards = shards[order.pipeline :: order.pipelines]
    paths = [
        str(part.dataset.local_root / part.name / tfrecord.file_name(s["name"], options))
        for s in shards
    ]
    compression = "GZIP" if options["compression"] == "gzip" else ""
    files = tf.data.Dataset.from_tensor_slices(paths)
    if part.dataset.cache is not None:  # a remote pack: each file cached before it is read
        fetch = part.dataset.fetch_local
        files = files.map(lambda f: tf.ensure_shape(tf.numpy_function(fetch, [f], tf.string), []))
    if order.shuffle and by_file:
        files = files.shuffle(len(paths), seed=order.seed_for(0))
    records = files.interleave(
        lambda f: tf.data.TFRecordDataset(f, compression, READ_BUFFER),
        cycle_length=min(len(paths), INTERLEAVE_FILES) if order.shuffle else 1,
        num_parallel_calls=tf.data.AUTOTUNE,
        # Fewer files than pipelines: every pipeline reads all in one order, keeps its share.
        deterministic=order.deterministic or not by_file,
    )
    counts = _pipeline_counts(part.shards, order.pipelines, by_file)
    if not by_file:
        records = records.shard(order.pipelines, order.pipeline)
    # A known length (Keras shows progress and steps; a file with other counts is an error).
    count = counts[order.pipeline]
    records = records.apply(tf.data.experimental.assert_cardinality(count))
    if order.uneven == "pad" and count < max(counts):  # repeat a few of its own records
        records = records.repeat().take(max(counts))
    elif order.uneven == "drop" and count > min(counts):
        records = records.take(min(counts))
    if order.shuffle:
        records = records.shuffle(order.shuffle_buffer, seed=order.seed_for(1))
    if order.repeat:
        records = records.repeat()
    batches = records.batch(order.batch_size, order.drop_remainder)
    return batches, tfrecord.example_decoder(part.dataset.fields)


def _pipeline_counts(shards: list[dict], pipelines: int, by_file: bool) -> list[int]:
    """Records each pipeline streams: its files' (by file), or every pipelines-th record."""
    if by_file:
        return [sum(s["count"] for s in shards[p::pipelines]) for p in range(pipelines)]
    total = sum(s["count"] for s in shards)
    return [len(range(p, total, pipelines)) for p in range(pipelines)]
