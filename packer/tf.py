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

or through explicit `rank`/`world_size` (other launchers), each rank with as many batches.

Exact mid-epoch resume: random access takes `start=` (batches already consumed since epoch 0,
e.g. the optimizer's step count, or a reading state from another packer reader with the same
options) and yields exactly what the uninterrupted dataset would have yielded next. The
streamed pipeline is tf.data's own: checkpoint its iterator with `tf.train.Checkpoint`.
"""

from __future__ import annotations

import os
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from .augment import Augment, tf_exec
from .formats import tfrecord
from .reading.dataset import Split, open_dataset
from .reading.loader import Loader
from .reading.position import Pass
from .reading.transforms import BatchTransform
from .schema import Field

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
    pipelines: int  # input pipelines (tf.distribute) or ranks, and this one's id
    pipeline: int
    uneven: str  # as reading.Sampler: "pad", "drop" or "allow" (tf.distribute's way)

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
        uneven,
    )
    batches, decode, position = (
        (*_records(part, order), None) if stream else _indices(path, split, order, start, cache_dir)
    )
    transform = BatchTransform(part.dataset.manifest, normalize, one_hot)
    batches = batches.map(
        lambda batch: transform.tf_apply(_augmented(augment, decode(batch), batch)),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=order.deterministic,
    )
    batches = batches.prefetch(tf.data.AUTOTUNE)
    if position is not None and not repeat:  # what packer.keras.BackupAndRestore moves
        batches.packer_position = position
    return batches


def _records(part: Split, order: _Order) -> tuple[tf.data.Dataset, Decoder]:
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


def _indices(
    path, split: str, order: _Order, start: int | dict | list | None, cache_dir=None
) -> tuple[tf.data.Dataset, Decoder, Passes]:
    """(epoch, batch) numbers, and a decoder reading each batch through a `reading.Loader`.

    A seeded Loader draws each epoch's order, so the same seed gives the same batches as
    PackedSequence; each new pass over the dataset (a Keras epoch) takes the next epoch,
    the first one from the `start` position.
    """
    loader = Loader(
        path,
        split,
        order.batch_size,
        "global" if order.shuffle else False,
        drop_remainder=order.drop_remainder,
        # Pipelines must agree on each epoch's order to split it: unseeded, they all use 0.
        seed=order.seed if order.seed is not None or order.pipelines > 1 else secrets.randbits(32),
        rank=order.pipeline,
        world_size=order.pipelines,
        uneven=order.uneven,
        cache_dir=cache_dir,
    )
    _resume(loader, start, order.seed)
    fields = loader.dataset.fields
    loader.split.reader  # noqa: B018 - opened here, once, rather than by concurrent calls
    passes = Passes(loader)
    whole = loader.sampler.batches(Pass(0))  # batches of a whole epoch
    if order.repeat:  # stateless, so tf.train.Checkpoint can save an iterator's place
        epoch, resumed = loader.epoch, len(loader)
        batches = tf.data.Dataset.counter((epoch + 1) * whole).map(
            lambda g: tf.stack([g // whole, g % whole])
        )
        first = tf.data.Dataset.range(resumed).map(lambda i: tf.stack([epoch, i]))
        batches = first.concatenate(batches).apply(
            tf.data.experimental.assert_cardinality(tf.data.INFINITE_CARDINALITY)
        )
    else:  # each pass over the dataset (a Keras epoch) takes the next epoch
        # A new iterator counts from 0 again, and its batch 0 takes the next pass; passes
        # shorter than an epoch (a resume) end early. (A flat_map over passes did the same
        # at twice the cost per iterator, which Keras creates every epoch.)
        def numbered(index: np.int64) -> np.ndarray:
            return np.array(passes.number(int(index)), np.int64)

        batches = (
            tf.data.Dataset.range(max(whole, len(loader)))
            .map(lambda i: tf.ensure_shape(tf.numpy_function(numbered, [i], tf.int64), [3]))
            .take_while(lambda p: p[1] < p[2])  # (epoch, batch, batches): read as pairs
        )
        if len(loader) == whole:  # a known length (Keras shows progress and steps)
            batches = batches.apply(tf.data.experimental.assert_cardinality(whole))

    def read(pair: np.ndarray) -> list[np.ndarray]:
        epoch, index = int(pair[0]), int(pair[1])
        arrays = loader.read(index, epoch=epoch)  # ascending index order
        indices = np.sort(loader.indices(index, epoch))
        return [*(arrays[f.name] for f in fields), indices]

    def decode(pair: tf.Tensor) -> dict[str, tf.Tensor]:
        dtypes = [_tf_dtype(f) for f in fields] + [tf.int64]
        *arrays, indices = tf.numpy_function(read, [pair], dtypes, stateful=False)
        rows = None if not order.drop_remainder else order.batch_size
        out = {
            f.name: tf.ensure_shape(array, [rows, *f.shape])
            for f, array in zip(fields, arrays, strict=True)
        }
        return out | {"indices": tf.ensure_shape(indices, [rows])}

    return batches, decode, passes


def _augmented(augment: Augment | None, arrays: dict, pair: tf.Tensor) -> dict:
    """Images and masks warped in-graph by their samples' draw; `pair` is (epoch, batch) and
    `arrays["indices"]` the batch's sample indices (random access only)."""
    indices = arrays.pop("indices", None)
    if augment is None:
        return arrays
    images, masks = tf_exec.augment(
        augment, arrays["images"], arrays.get("masks"), pair[0], indices
    )
    return {**arrays, "images": images} | ({} if masks is None else {"masks": masks})


class Passes:
    """The passes a random-access dataset reads, one per iteration over it (a Keras epoch):
    first the loader's current one (a resumed pass, maybe), then whole epochs. `state_dict` /
    `load_state_dict` save and move the position between iterations (BackupAndRestore does,
    inside `model.fit`)."""

    def __init__(self, loader: Loader) -> None:
        self.loader = loader
        self._lock = threading.Lock()
        self._next = self._current = loader.epoch

    def __len__(self) -> int:
        """Batches of the next pass."""
        return self.loader.sampler.batches(self.loader.pass_of(self._next))

    def number(self, index: int) -> tuple[int, int, int]:
        """(epoch, index, batches of the pass) for batch `index` of an iteration; batch 0
        starts the next pass."""
        with self._lock:
            if index == 0:
                self._current, self._next = self._next, self._next + 1
            epoch = self._current
        return epoch, index, self.loader.sampler.batches(self.loader.pass_of(epoch))

    def state_dict(self, batches: int = 0) -> dict:
        """The position after `batches` batches of the pass being read (JSON-ready)."""
        with self._lock:
            p = self.loader.pass_of(self._current)
        return self.loader.sampler.state_dict(p, batches)

    def load_state_dict(self, state: dict | list[dict]) -> None:
        """Make the next pass continue `state` (before the next iteration starts)."""
        with self._lock:
            self.loader.load_state_dict(state)
            self._next = self._current = self.loader.epoch


def _resume(loader: Loader, start: int | dict | list | None, seed: int | None) -> None:
    """Put `loader` at `start`: batches done since epoch 0, or a reader state dict."""
    if isinstance(start, dict | list):
        loader.load_state_dict(start)
    elif start:
        if seed is None:
            raise ValueError("start= needs the seed the interrupted dataset had (seed=...)")
        if start < 0 or not len(loader):
            raise ValueError(f"start must be a batch count >= 0, got {start}")
        epoch, batches = divmod(int(start), len(loader))
        loader.load_state_dict(loader.sampler.state_dict(Pass(epoch), batches))


def _tf_dtype(field: Field) -> tf.DType:
    """The TensorFlow dtype of a field's values (byte order is the readers' business)."""
    return tf.as_dtype(np.dtype(field.dtype).newbyteorder("="))
