"""Random-access batches for `packer.tf.dataset` (npy and recordio packs, uncompressed tfrecord
with `stream=False`): each batch read by packer's shard readers in one `tf.numpy_function`.

Each batch has a number (its epoch and its index in that epoch's pass), and a parallel map
reads several numbers at once, each batch copied (or decoded) by its own thread: tf.data's
threads then keep every core busy, where one read at a time, split among the gather's threads,
left cores idle between reads (benchmarks/results/2026-11-28-tf-data-parallel-reads.md).
Keras creates a new iterator every epoch, and TensorFlow instantiates every function of a
pipeline for each new iterator (milliseconds each), so a pass has few: the first element asks
`Passes` for the next pass's numbers (a resumed pass is shorter), then the read. A function for
in-graph work (augmentation, normalisation, one-hot) runs in parallel after it, only when
there is such work. `repeat=True` takes the numbers from a stateless counter instead (one
iterator, whose place `tf.train.Checkpoint` can save).
"""

from __future__ import annotations

import os
import secrets
import threading
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from ..augment import Augment, tf_exec
from ..reading.loader import Loader
from ..reading.position import Pass
from ..reading.transforms import BatchTransform
from ..schema import Field, fixed

PASS_STRIDE = 1 << 32  # batch numbers: epoch * PASS_STRIDE + the batch's index in its pass


@dataclass(frozen=True)
class Order:
    """Which samples, in what order and batches: everything a source of `packer.tf.dataset`
    (streamed or random access) needs besides the split."""

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


def indexed(
    path: str | os.PathLike,
    split: str,
    order: Order,
    start: int | dict | list | None,
    transform: BatchTransform,
    augment: Augment | None,
    cache_dir: str | os.PathLike | None = None,
    cache_bytes: int | None = None,
    max_boxes: int = 100,
) -> tuple[tf.data.Dataset, Passes]:
    """`(images, targets)` batches of `split` read by random access, and the passes they read
    (what saves and moves the position between iterations).

    A seeded Loader draws each epoch's order, so the same seed gives the same batches as
    PackedSequence; each new pass over the dataset (a Keras epoch) takes the next epoch, the
    first one from the `start` position.
    """
    loader = Loader(
        path,
        split,
        order.batch_size,
        shuffle="global" if order.shuffle else False,
        drop_remainder=order.drop_remainder,
        # Pipelines must agree on each epoch's order to split it: unseeded, they all use 0.
        seed=order.seed if order.seed is not None or order.pipelines > 1 else secrets.randbits(32),
        rank=order.pipeline,
        world_size=order.pipelines,
        uneven=order.uneven,
        cache_dir=cache_dir,
        cache_bytes=cache_bytes,
        max_boxes=max_boxes,
    )
    _resume(loader, start, order.seed)
    loader.split.reader  # noqa: B018 - opened here, once, rather than by concurrent calls
    passes = Passes(loader, augment is not None)
    rows = order.batch_size if order.drop_remainder else None
    in_graph = augment is not None or not transform.identity

    def finish(arrays: dict[str, tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor]:
        return transform.tf_apply(_augmented(augment, arrays, loader.dataset.fields))

    def arrays_of(number: tf.Tensor) -> dict[str, tf.Tensor] | tuple:
        out = passes.shaped(passes.read(number), rows)
        return out if in_graph else finish(out)  # no arithmetic: only picks the fields

    whole = loader.sampler.batches(Pass(0))  # batches of a whole epoch
    if order.repeat:  # stateless, so tf.train.Checkpoint can save an iterator's place
        first = loader.epoch * PASS_STRIDE
        later = tf.data.Dataset.counter((loader.epoch + 1) * whole).map(
            lambda g: g // whole * PASS_STRIDE + g % whole
        )
        numbers = tf.data.Dataset.range(first, first + len(loader)).concatenate(later)
        numbers = numbers.apply(
            tf.data.experimental.assert_cardinality(tf.data.INFINITE_CARDINALITY)
        )
    else:  # each iteration (a Keras epoch) reads the next pass, started by its first element
        numbers = tf.data.Dataset.range(1).flat_map(lambda _: passes.next_pass())
    batches = numbers.map(
        arrays_of, num_parallel_calls=tf.data.AUTOTUNE, deterministic=order.deterministic
    )
    if not order.repeat and len(loader) == whole:  # a known length (Keras shows progress)
        batches = batches.apply(tf.data.experimental.assert_cardinality(whole))
    if in_graph:
        batches = batches.map(
            finish, num_parallel_calls=tf.data.AUTOTUNE, deterministic=order.deterministic
        )
    return batches, passes


def _augmented(augment: Augment | None, arrays: dict, fields: tuple[Field, ...]) -> dict:
    """The batch's fields moved in-graph by their kinds' geometry with their samples' draw
    (`arrays["epoch"]` and the batch's sample `arrays["indices"]` key it); a ragged field's
    padded rows move with their objects."""
    indices, epoch = arrays.pop("indices", None), arrays.pop("epoch", None)
    if augment is None:
        return arrays
    return tf_exec.augment_fields(augment, arrays, fields, epoch, indices)


class Passes:
    """The passes a random-access dataset reads, one per iteration over it (a Keras epoch):
    first the loader's current one (a resumed pass, maybe), then whole epochs. `state_dict` /
    `load_state_dict` save and move the position between iterations (BackupAndRestore does,
    inside `model.fit`). `next_pass` starts a pass and `read` reads its batches, each named by
    a number, `epoch * PASS_STRIDE + batch`; with `keys`,
    each batch also carries its epoch and sorted sample indices (what an augmentation draw is
    keyed by)."""

    def __init__(self, loader: Loader, keys: bool = False) -> None:
        self.loader = loader
        self.keys = keys
        self.fields = fixed(loader.dataset.fields)
        if loader.objects:  # the padded targets, read beside the images
            self.fields += loader.padder.padded_fields()
        self._lock = threading.Lock()
        self._next = self._current = loader.epoch

    def __len__(self) -> int:
        """Batches of the next pass."""
        return self.loader.sampler.batches(self.loader.pass_of(self._next))

    def next_pass(self) -> tf.data.Dataset:
        """The batch numbers of the pass a new iteration reads: the next one, started when
        the iteration asks for its first batch (so the pass's reads may run in parallel, and a
        resumed or shortened pass has its own length). No function is made per pass: each
        costs a new iterator milliseconds."""
        first, stop = tf.numpy_function(self._start, [], [tf.int64, tf.int64], stateful=True)
        return tf.data.Dataset.range(tf.ensure_shape(first, []), tf.ensure_shape(stop, []))

    def _start(self) -> tuple[np.int64, np.int64]:
        with self._lock:
            self._current, self._next = self._next, self._next + 1
            epoch = self._current
        count = self.loader.sampler.batches(self.loader.pass_of(epoch))
        return np.int64(epoch * PASS_STRIDE), np.int64(epoch * PASS_STRIDE + count)

    def read_number(self, number: np.int64) -> list[np.ndarray]:
        """Batch `number % PASS_STRIDE` of epoch `number // PASS_STRIDE` (its pass: the
        loader's resumed one, or whole)."""
        epoch, index = divmod(int(number), PASS_STRIDE)
        return self._read(epoch, index)

    def read(self, number: tf.Tensor) -> list[tf.Tensor]:
        """The batch of a batch number read in the dataset's numpy_function: a pure function
        of the number, so parallel maps may run it and checkpoints save its input."""
        dtypes = [_tf_dtype(f) for f in self.fields] + [tf.int64] * (2 * self.keys)
        return tf.numpy_function(self.read_number, [number], dtypes, stateful=False)

    def shaped(self, outputs: list[tf.Tensor], rows: int | None) -> dict[str, tf.Tensor]:
        """The numpy_function's outputs by name, with their static shapes."""
        names = [f.name for f in self.fields] + ["indices", "epoch"] * self.keys
        shapes = [[rows, *f.shape] for f in self.fields] + [[rows], []] * self.keys
        for output, shape in zip(outputs, shapes, strict=True):
            output.set_shape(shape)
        return dict(zip(names, outputs, strict=True))

    def _read(self, epoch: int, index: int) -> list[np.ndarray]:
        # ascending index order; one thread: the parallel map reads other batches meanwhile
        arrays = self.loader.read(index, epoch=epoch, threads=1)
        if self.loader.objects:
            padder = self.loader.padder
            targets = self.loader.ragged_targets(index, epoch, padder.names)
            arrays = {**arrays, **padder(*targets)}
        out = [arrays[f.name] for f in self.fields]
        if self.keys:
            out += [np.sort(self.loader.indices(index, epoch)), np.array(epoch, np.int64)]
        return out

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
