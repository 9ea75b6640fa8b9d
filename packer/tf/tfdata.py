"""`packer.tf.dataset`: a `tf.data.Dataset` of `(images, targets)` batches over any pack.

Two sources end in the same in-graph work (normalisation and one-hot with the NumPy readers'
semantics) and a prefetch (none after a compiled source that reads ahead itself):

- streamed (tfrecord packs, the default there): shard files, split per input pipeline, are
  interleaved; records go through a shuffle buffer, are batched first and then parsed,
  decoded and reshaped in one vectorised step per batch.
- random access (npy and recordio packs; uncompressed tfrecord with `stream=False`): shuffled
  batches of sample indices, each read by the format's shard readers, in the pipeline's one
  `tf.numpy_function` (see indexed), into 64-byte aligned arrays that TensorFlow adopts
  without a copy; an npy or uncompressed tfrecord pack of plain fields by a tf.data source
  in C++ (see compiled).
  `dataset.packer_read` says which read runs.

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
from dataclasses import dataclass

import tensorflow as tf

from ..augment import Augment
from ..formats import tfrecord, tfrecord_parse
from ..options import again, option
from ..reading.dataset import Split
from ..reading.loader import check_augment_fits
from ..reading.mixture import open_split
from ..reading.options import BATCH_SIZE, SPLIT, ReaderOptions, batch_size_of, takes
from ..reading.transforms import BatchTransform
from .indexed import Order, indexed

Decoder = Callable[[tf.Tensor], dict[str, tf.Tensor]]

DEFAULT_SHUFFLE_BUFFER = 256  # records; shards already mix classes (seeded order at pack time)
INTERLEAVE_FILES = 16  # shard files read at once when shuffling
# Records are whole images: unbuffered reads go straight into each record's string, where a
# read buffer would copy every byte once more (measured: buffered reads are slower).
READ_BUFFER = 0


@dataclass(frozen=True)
class TfOptions(ReaderOptions):
    """`packer.tf.dataset`'s own options, besides the readers' (`reading.options`), and the
    readers' whose default or meaning differs here."""

    shuffle: bool | str = again(
        ReaderOptions,
        "shuffle",
        True,
        help='True ("global" too) or False: random access shuffles uniformly, a streamed pack '
        "through `shuffle_buffer`.",
        choices=(True, False, "global"),
    )
    seed: int | None = again(
        ReaderOptions, "seed", None, shown="a fresh one per dataset; 0 with several pipelines"
    )
    rank: int | None = again(ReaderOptions, "rank", None, shown="input_context's pipeline, else 0")
    world_size: int | None = again(
        ReaderOptions, "world_size", None, shown="input_context's pipelines, else 1"
    )
    uneven: str | None = again(
        ReaderOptions,
        "uneven",
        None,
        shown='"pad" with world_size, else "allow": tf.distribute takes partial batches',
    )
    repeat: bool = option(
        False,
        "One endless iterator over epoch after epoch, whose place tf.train.Checkpoint "
        "saves (Keras otherwise makes a new iterator every epoch).",
        kind="switch",
    )
    deterministic: bool | None = option(
        None,
        "Whether parallel steps keep their order (False: faster, in any order).",
        shown="when there is a seed or no shuffling",
        kind="switch",
    )
    shuffle_buffer: int = option(
        DEFAULT_SHUFFLE_BUFFER,
        "Records in a streamed pack's shuffle buffer (random access shuffles uniformly).",
    )
    input_context: tf.distribute.InputContext | None = option(
        None,
        "From strategy.distribute_datasets_from_function: this input pipeline's share (its "
        "own shard files when streaming, its own samples with random access or fewer files "
        "than pipelines); batch_size is per pipeline. Not with rank/world_size.",
    )
    stream: bool | None = option(
        None,
        "Stream a tfrecord pack's files through TensorFlow's TFRecord reader (True) rather "
        "than read batches by random access through packer's shard readers (several times "
        "faster).",
        shown="gzip tfrecord packs only",
        kind="switch",
    )
    start: int | dict | list[dict] | None = option(
        None,
        "Where to resume (random access): the batches consumed since epoch 0 (with the "
        "interrupted dataset's seed), or a packer reader's state_dict.",
    )


@takes(TfOptions)
def dataset(
    path: str | os.PathLike,
    split: str = SPLIT,
    batch_size: int = BATCH_SIZE,
    *,
    shuffle: bool | str = True,
    one_hot: bool = False,
    normalize: str | None = None,
    drop_remainder: bool = False,
    seed: int | None = None,
    rank: int | None = None,
    world_size: int | None = None,
    uneven: str | None = None,
    augment: Augment | None = None,
    max_boxes: int = 100,
    cache_dir: str | os.PathLike | None = None,
    cache_bytes: int | None = None,
    repeat: bool = False,
    deterministic: bool | None = None,
    shuffle_buffer: int = DEFAULT_SHUFFLE_BUFFER,
    input_context: tf.distribute.InputContext | None = None,
    stream: bool | None = None,
    start: int | dict | list[dict] | None = None,
) -> tf.data.Dataset:
    """Batches `(images, targets)` of one split of a pack (any format), prefetched.

    Images as stored, `[B,H,W,C]` (uint8 RGB for 8-bit pictures; see the manifest's
    `fields`), or float32 with `normalize`; targets class ids `[B]` (int32)
    or masks `[B,H,W]`, or float32 one-hot with `one_hot=True`. Every pack but a gzip
    tfrecord one is read by random access through packer's shard readers (several times
    faster than TensorFlow's TFRecord reader), in the same seeded order as PackedSequence and
    with the same `augment` draw (in-graph); a streamed pack interleaves its shard files. The
    options (below) are the readers' (`packer.reading.options`) and tf.data's own.
    """
    o = TfOptions.of(locals())
    batch_size = batch_size_of(batch_size)
    part = open_split(path, split, o.cache_dir, o.cache_bytes)  # a pack's, or a Mixture's
    fmt = part.dataset.format
    stream = o.stream
    if stream is None:
        stream = fmt == "tfrecord" and part.dataset.format_options.get("compression") == "gzip"
    if not stream and not part.random_access:
        raise ValueError(
            f"{path}: stream=False reads by index, and a gzip-compressed tfrecord pack has no "
            "random access: leave stream unset to stream it, or pack it without --compression"
        )
    if stream and fmt != "tfrecord":
        raise ValueError(f"{path}: only tfrecord packs stream; this one is {fmt}")
    if o.augment is not None:
        check_augment_fits(o.augment, part.dataset, str(path))  # a path or a Mixture
    if o.augment is not None and stream:
        raise ValueError(
            "augment= needs random access (each sample's draw is keyed by its index); "
            "a gzip tfrecord pack only streams: repack it uncompressed or as npy"
        )
    if o.input_context is not None:
        if o.rank is not None or o.world_size is not None:
            raise ValueError("give input_context or rank/world_size, not both")
        context = o.input_context
        pipelines, pipeline = context.num_input_pipelines, context.input_pipeline_id
    else:
        pipelines, pipeline = o.world_size or 1, o.rank or 0
    uneven = o.uneven
    if uneven is None:
        uneven = "pad" if o.world_size is not None else "allow"
    if o.start is not None and stream:
        raise ValueError(
            "start= needs random access (stream=False on uncompressed tfrecord); a streamed "
            "pipeline resumes exactly from its iterator saved with tf.train.Checkpoint"
        )
    shuffle = bool(o.shuffle)
    order = Order(
        batch_size,
        shuffle,
        o.seed,
        o.repeat,
        o.drop_remainder,
        o.seed is not None or not shuffle if o.deterministic is None else o.deterministic,
        o.shuffle_buffer,
        pipelines,
        pipeline,
        uneven,
    )
    transform = BatchTransform(part.dataset.manifest, o.normalize, o.one_hot)
    if stream:
        records, decode = _records(part, order, o.max_boxes)
        batches = records.map(
            lambda batch: transform.tf_apply(decode(batch)),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=order.deterministic,
        )
        position = None
    else:
        batches, position = indexed(
            path, split, order, o.start, transform, o.augment, o.cache_dir, o.cache_bytes,
            o.max_boxes,
        )  # fmt: skip
    if position is None or not position.ahead:  # the compiled source reads ahead itself
        batches = batches.prefetch(tf.data.AUTOTUNE)
    if position is not None and not o.repeat:  # what packer.keras.BackupAndRestore moves
        batches.packer_position = position
    batches.packer_read = "stream" if position is None else position.read  # which read runs
    return batches


def _records(part: Split, order: Order, max_boxes: int) -> tuple[tf.data.Dataset, Decoder]:
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
        # A remote pack's files are fetched as the interleave takes them: a parallel one takes
        # files ahead, whose downloads could evict a file before it is opened.
        num_parallel_calls=None if part.dataset.cache is not None else tf.data.AUTOTUNE,
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
    return batches, tfrecord_parse.example_decoder(part.dataset.fields, max_boxes)


def _pipeline_counts(shards: list[dict], pipelines: int, by_file: bool) -> list[int]:
    """Records each pipeline streams: its files' (by file), or every pipelines-th record."""
    if by_file:
        return [sum(s["count"] for s in shards[p::pipelines]) for p in range(pipelines)]
    total = sum(s["count"] for s in shards)
    return [len(range(p, total, pipelines)) for p in range(pipelines)]
