"""Random-access batches for `packer.tf.dataset` (npy and recordio packs, uncompressed tfrecord
with `stream=False`): each batch read by packer's shard readers in one `tf.numpy_function`.

Keras creates a new iterator every epoch, and TensorFlow instantiates (and optimises) every
function of a pipeline for each new iterator: about 2 ms per function here, against about 8 ms
for reading a whole epoch of the benchmark's 19 batches. So a pass over the dataset is one
function: `Dataset.range(batches).map(read)`, where the one numpy_function numbers the passes
(a new iterator's batch 0 starts the next one; see `Passes`), reads the batch and hands back
the arrays. A second function, run in parallel, is added only when there is in-graph work
(augmentation, normalisation, one-hot), and `take_while` only when the first pass is a
resumed, shorter one. `repeat=True` reads (epoch, batch) pairs from a stateless counter instead
(one iterator, whose place `tf.train.Checkpoint` can save). An npy pack of plain fields
(or an uncompressed tfrecord pack whose records hold them in place) without augmentation is
read by the compiled source instead (see compiled): no function per batch, each iterator taking
its pass from `Passes.take_pass`, and without in-graph work the source reads ahead itself.
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
from ..reading.transforms import BatchTransform, targets_of
from ..schema import Field, fixed
from . import compiled


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

    def arrays_of(outputs: list[tf.Tensor]) -> dict[str, tf.Tensor] | tuple:
        out = passes.shaped(outputs, rows)
        return out if in_graph else finish(out)  # no arithmetic: only picks the fields

    whole = loader.sampler.batches(Pass(0))  # batches of a whole epoch
    if order.repeat:  # stateless, so tf.train.Checkpoint can save an iterator's place
        epoch, resumed = loader.epoch, len(loader)
        pairs = tf.data.Dataset.counter((epoch + 1) * whole).map(
            lambda g: tf.stack([g // whole, g % whole])
        )
        first = tf.data.Dataset.range(resumed).map(lambda i: tf.stack([epoch, i]))
        pairs = first.concatenate(pairs).apply(
            tf.data.experimental.assert_cardinality(tf.data.INFINITE_CARDINALITY)
        )
        batches = pairs.map(
            lambda pair: arrays_of(passes.call(passes.read_pair, pair, stateful=False)),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=order.deterministic,
        )
    elif compiled.handles(passes):  # each iterator (a Keras epoch) takes the next pass
        names = {f.name: f.name for f in passes.fields}
        structure = (
            names if in_graph else (transform.targets.input, targets_of(names, transform.targets))
        )
        known = whole if len(loader) == whole else None  # a resumed first pass is shorter
        passes.ahead = not in_graph and compiled.READ_AHEAD  # nothing follows: no prefetch
        batches = compiled.source(passes, structure, rows, known, passes.ahead)
        passes.read = compiled.READ_COMPILED
    else:  # each iteration (a Keras epoch) reads the next pass; its batch 0 starts it
        batches = tf.data.Dataset.range(max(whole, len(loader))).map(
            lambda index: arrays_of(passes.call(passes.fetch, index, stateful=True))
        )
        if len(loader) == whole:  # a known length (Keras shows progress and steps)
            batches = batches.apply(tf.data.experimental.assert_cardinality(whole))
        else:  # a resumed first pass ends early: fetch's empty batch marks its end
            passes.ends_early = True
            batches = batches.take_while(lambda *arrays: _rows(arrays) > 0)
    if in_graph:
        batches = batches.map(
            finish, num_parallel_calls=tf.data.AUTOTUNE, deterministic=order.deterministic
        )
    return batches, passes


def _rows(arrays: tuple) -> tf.Tensor:
    """Rows of a batch as `arrays_of` yields it: a tuple, or a dict as its only element."""
    first = arrays[0]
    return tf.shape(next(iter(first.values())) if isinstance(first, dict) else first)[0]


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
    inside `model.fit`). `fetch` and `read_pair` read batches for the dataset's one
    numpy_function; with `keys`, each batch also carries its epoch and sorted sample indices
    (what an augmentation draw is keyed by)."""

    def __init__(self, loader: Loader, keys: bool = False) -> None:
        self.loader = loader
        self.keys = keys
        self.fields = fixed(loader.dataset.fields)
        if loader.objects:  # the padded targets, read beside the images
            self.fields += loader.padder.padded_fields()
        self.ends_early = False  # whether an empty batch ends a pass (see `fetch`)
        self.read = compiled.READ_NUMPY  # which batch read the dataset runs
        self.ahead = False  # whether that read copies the next batch itself (no prefetch)
        self._lock = threading.Lock()
        self._next = self._current = loader.epoch

    def __len__(self) -> int:
        """Batches of the next pass."""
        return self.loader.sampler.batches(self.loader.pass_of(self._next))

    def fetch(self, index: np.int64) -> list[np.ndarray]:
        """Batch `index` of the pass being read, batch 0 starting the next pass; past the
        pass's end, an empty batch (a resumed first pass ends there) or an error (a pass made
        shorter by `load_state_dict` after the dataset was built: take at most `len` batches
        of it, as BackupAndRestore makes Keras do)."""
        index = int(index)
        with self._lock:
            if index == 0:
                self._current, self._next = self._next, self._next + 1
            epoch = self._current
        if index < self.loader.sampler.batches(self.loader.pass_of(epoch)):
            return self._read(epoch, index)
        if self.ends_early:
            return [np.empty((0, *f.shape), f.dtype) for f in self.fields] + self._empty_keys()
        raise IndexError(f"batch {index} is past the end of this pass (epoch {epoch})")

    def take_pass(self) -> tuple[np.ndarray, np.ndarray]:
        """The next pass for the compiled source (a new iterator's, as `fetch`'s batch 0):
        every batch's sorted sample indices one after another, and where each batch starts."""
        with self._lock:
            self._current, self._next = self._next, self._next + 1
            epoch = self._current
        count = self.loader.sampler.batches(self.loader.pass_of(epoch))
        batches = [np.sort(self.loader.indices(i, epoch)) for i in range(count)]
        starts = np.cumsum([0, *map(len, batches)], dtype=np.int64)
        return np.concatenate([np.zeros(0, np.int64), *batches]).astype(np.int64), starts

    def read_pair(self, pair: np.ndarray) -> list[np.ndarray]:
        """Batch `pair[1]` of epoch `pair[0]` (its pass: the loader's resumed one, or whole)."""
        return self._read(int(pair[0]), int(pair[1]))

    def call(self, read, argument: tf.Tensor, stateful: bool) -> list[tf.Tensor]:
        """`read` (fetch, which moves the passes, or read_pair, a pure function of the pair
        and so checkpointable) on `argument` as the dataset's numpy_function."""
        dtypes = [_tf_dtype(f) for f in self.fields] + [tf.int64] * (2 * self.keys)
        return tf.numpy_function(read, [argument], dtypes, stateful=stateful)

    def shaped(self, outputs: list[tf.Tensor], rows: int | None) -> dict[str, tf.Tensor]:
        """The numpy_function's outputs by name, with their static shapes."""
        names = [f.name for f in self.fields] + ["indices", "epoch"] * self.keys
        shapes = [[rows, *f.shape] for f in self.fields] + [[rows], []] * self.keys
        for output, shape in zip(outputs, shapes, strict=True):
            output.set_shape(shape)
        return dict(zip(names, outputs, strict=True))

    def _read(self, epoch: int, index: int) -> list[np.ndarray]:
        arrays = self.loader.read(index, epoch=epoch)  # ascending index order
        if self.loader.objects:
            padder = self.loader.padder
            targets = self.loader.ragged_targets(index, epoch, padder.names)
            arrays = {**arrays, **padder(*targets)}
        out = [arrays[f.name] for f in self.fields]
        if self.keys:
            out += [np.sort(self.loader.indices(index, epoch)), np.array(epoch, np.int64)]
        return out

    def _empty_keys(self) -> list[np.ndarray]:
        return [np.empty(0, np.int64), np.array(0, np.int64)] if self.keys else []

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
