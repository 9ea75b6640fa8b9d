"""The framework-neutral reader: NumPy `(images, targets)` batches of one split of a pack.

A `Loader` joins a `Sampler` (which samples, per epoch and batch), the split's `BatchReader`
(the bytes, into pooled or caller-supplied arrays) and a `BatchTransform` (normalisation,
one-hot, and an optional `packer.Augment` before them). The framework adapters (Keras, tf.data,
PyTorch) are thin layers over it. It pickles without its open files, so every worker process
opens the shards itself. Its reading position is the current pass (`position.Pass`: an epoch,
or the part of one a resumed reader has left): `state_dict` / `load_state_dict` save it as a
place in the epoch's global order and restore it exactly, in any layout.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ManifestError
from ..fields import kind_of
from ..schema import record_bytes
from .dataset import PackedDataset, Split
from .mixture import Mixture, open_split
from .mixture_read import MixedSplit
from .objects import Padder
from .options import BATCH_SIZE, SPLIT, LoaderOptions, batch_size_of, takes
from .position import Pass, agreed
from .sampler import Sampler, larger_than_ram, window_length
from .transforms import BatchTransform, input_field

if TYPE_CHECKING:
    from ..augment import Augment, AugmentParams


@takes(LoaderOptions)
class Loader:
    """Batches of one split, in a new seeded order every epoch.

    With `world_size` > 1 this loader yields rank `rank`'s part of every epoch (see Sampler);
    a rank or world size of None is one process's. A pack at a URL is read through a local
    shard cache (see storage.cache). `path` may be a `packer.Mixture` of packs (its epochs
    come from its seeded plan: see reading.mixture). The options are `LoaderOptions`
    (`reading.options`), listed below; the adapters hand theirs over whole (`with_options`).

    Batches are numbered within the current pass: the whole epoch, or after `load_state_dict`
    what the saved position left of it (`len` is the pass's batches).
    """

    def __init__(
        self,
        path: str | os.PathLike | Mixture,
        split: str = SPLIT,
        batch_size: int = BATCH_SIZE,
        *,
        shuffle: bool | str = True,
        one_hot: bool = False,
        normalize: str | None = None,
        drop_remainder: bool = False,
        seed: int | None = None,
        rank: int | None = 0,
        world_size: int | None = 1,
        uneven: str | None = "pad",
        augment: Augment | None = None,
        max_boxes: int = 100,
        cache_dir: str | os.PathLike | None = None,
        cache_bytes: int | None = None,
        shuffle_window: int | None = None,
    ) -> None:
        self._open(path, split, batch_size, LoaderOptions.of(locals()))

    @classmethod
    def with_options(
        cls, path: str | os.PathLike | Mixture, split: str, batch_size: int, o: LoaderOptions
    ) -> Loader:
        """A loader of `o`, a reader's options (a LoaderOptions or an adapter's extension)."""
        loader = cls.__new__(cls)
        loader._open(path, split, batch_size, o)
        return loader

    def _open(
        self, path: str | os.PathLike | Mixture, split: str, batch_size: int, o: LoaderOptions
    ) -> None:
        batch_size = batch_size_of(batch_size)
        self.options = o  # the reader's typed options, as given
        self.path = path if isinstance(path, Mixture) else os.fspath(path)
        self.cache = (o.cache_dir, o.cache_bytes)  # where a remote pack's shards are cached
        self.split_name = split
        self.pass_ = Pass(0)
        self._other: Pass | None = None  # the whole epoch pass_of gave last, for another epoch
        self.augment = o.augment
        self._split: Split | None = None
        dataset = self.split.dataset
        if not self.split.random_access:
            raise ManifestError(
                f"{self.path} is a gzip-compressed TFRecord pack, which has no random access, "
                "and this reader reads batches by index: read it with packer.tf.dataset (it "
                "streams), or pack it again without --compression gzip, or as npy"
            )
        if o.augment is not None:
            check_augment_fits(o.augment, dataset, self.path)
        record = record_bytes(dataset.fields)
        shuffle = o.shuffle
        plan = getattr(self.split, "plan", None)  # a mixture's: it shuffles each pack itself
        if plan is not None:
            shuffle = "global" if shuffle else False
        elif shuffle is True:
            shuffle = "windows" if larger_than_ram(record * self.split.count) else "global"
        self.sampler = Sampler(
            [s["count"] for s in self.split.shards],
            batch_size,
            shuffle,
            seed=0 if o.seed is None else o.seed,
            window=o.shuffle_window or window_length(record, batch_size),
            drop_remainder=o.drop_remainder,
            rank=0 if o.rank is None else o.rank,
            world_size=1 if o.world_size is None else o.world_size,
            uneven=o.uneven,
            plan=plan,
        )
        self.transform = BatchTransform(dataset.manifest, o.normalize, o.one_hot)
        self.targets = self.transform.targets
        self.objects = bool(self.targets.ragged)  # rows per object: per-sample or padded
        padded = [f for f in dataset.fields if f.ragged and kind_of(f).padded]
        self.padder = Padder(o.max_boxes, padded)
        self._prefetched: set[tuple[Pass, int]] = set()

    @property
    def split(self) -> Split | MixedSplit:
        """The split (a mixture's: its packs' as one), opened lazily so that each worker
        process opens its own files."""
        if self._split is None:
            self._split = open_split(self.path, self.split_name, *self.cache)
        return self._split

    @property
    def dataset(self) -> PackedDataset:
        return self.split.dataset

    @property
    def batch_size(self) -> int:
        return self.sampler.batch_size

    @property
    def shuffle(self) -> bool | str:
        return self.sampler.shuffle

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_split"] = None
        state["_prefetched"] = set()
        return state

    def __len__(self) -> int:
        """Batches of the current pass."""
        return self.sampler.batches(self.pass_)

    @property
    def epoch(self) -> int:
        return self.pass_.epoch

    def set_epoch(self, epoch: int) -> None:
        """Use epoch `epoch`'s order from its first batch on (the same seed gives the same
        orders); the current epoch again keeps the position (a resumed pass stays resumed)."""
        if epoch != self.epoch:
            self.pass_ = Pass(epoch)
            self._prefetched.clear()

    def state_dict(self, batches: int = 0) -> dict:
        """The position after `batches` more batches of the current pass (JSON-ready)."""
        return self.sampler.state_dict(self.pass_, batches)

    def load_state_dict(self, state: dict | list[dict]) -> None:
        """Continue where `state` left off, in this loader's own layout: the samples of its
        epoch not yet consumed, then whole epochs. `state` comes from any reader of this split
        with the same shuffle mode (a list: every rank's, which must agree). The seed comes
        from the state."""
        state = agreed(state) if isinstance(state, list) else state
        self.pass_ = self.sampler.load_state_dict(state)
        self._prefetched.clear()

    def pass_of(self, epoch: int | None) -> Pass:
        """The current pass for its own epoch (or None), a whole epoch for any other: the same
        Pass object batch after batch (tf.data's passes name theirs), so that the sampler
        finds its order by identity."""
        if epoch is None or epoch == self.epoch:
            return self.pass_
        other = self._other
        if other is None or other.epoch != epoch:
            other = self._other = Pass(epoch)
        return other

    def indices(self, index: int, epoch: int | None = None) -> np.ndarray:
        """Sample indices of batch `index` (of the current pass unless `epoch` names another)."""
        return self.sampler.batch(self.pass_of(epoch), index)

    def read(
        self,
        index: int,
        epoch: int | None = None,
        out: dict[str, np.ndarray] | None = None,
        leave: Collection[str] = (),
    ) -> dict[str, np.ndarray]:
        """The field arrays of batch `index`, untransformed, into `out` when given (without
        the fields in `leave` that `out` lacks: see `payloads`)."""
        p = self.pass_of(epoch)
        indices = self.sampler.batch(p, index)
        if self.sampler.shuffle == "windows":
            self._prefetch_windows(p, index)
        if leave:  # only a pack's own BatchReader leaves fields (mixtures decode them)
            return self.split.reader.read(indices, out, leave=leave)
        return self.split.reader.read(indices, out)

    def payloads(self, index: int, name: str, epoch: int | None = None) -> list:
        """Encoded field `name`'s payloads of batch `index`, undecoded, in the rows' order."""
        return self.split.reader.payloads(np.sort(self.indices(index, epoch)), name)

    def batch(self, index: int, epoch: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """`(images, targets)` of batch `index`, augmented, normalised and one-hot as asked;
        a pack with ragged fields (detection) gives a list of per-sample dicts of every
        ragged field's rows and each fixed target's value (rows in ascending sample index, as
        the images)."""
        if self.objects:
            images, fixed, fields, counts = self.sample_batch(index, epoch)
            return images, per_sample(fields, counts, fixed)
        arrays = self.read(index, epoch)
        if self.augment is not None:
            arrays = self._augmented(arrays, index, epoch)
        return self.transform(arrays)

    def ragged_targets(
        self, index: int, epoch: int | None = None, names: Collection[str] | None = None
    ) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """The same targets as one array per field (every object, sample after sample; the
        fields in `names`, or all) and each sample's object count."""
        return self.split.reader.ragged(np.sort(self.indices(index, epoch)), names)

    def objects_batch(
        self,
        index: int,
        epoch: int | None = None,
        raw: bool = False,
        names: Collection[str] | None = None,
    ) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]:
        """`sample_batch` without the fixed targets: images, the ragged fields, counts."""
        images, _, fields, counts = self.sample_batch(index, epoch, raw, names)
        return images, fields, counts

    def sample_batch(
        self,
        index: int,
        epoch: int | None = None,
        raw: bool = False,
        names: Collection[str] | None = None,
    ) -> tuple[np.ndarray, dict[str, np.ndarray], dict[str, np.ndarray], np.ndarray]:
        """A ragged pack's batch `index` at once: images (augmented and normalised as asked,
        or as stored with `raw`), the fixed targets `[B, ...]` (one-hot as asked unless
        `raw`), one array per ragged field (every object, sample after sample) and each
        sample's object count, in ascending sample index. Augmentation moves the boxes and
        per-object masks with the images and drops the objects it pushes out. Only the ragged
        fields in `names` are read, when given."""
        p = self.pass_of(epoch)
        indices = np.sort(self.sampler.batch(p, index))
        if self.sampler.shuffle == "windows":
            self._prefetch_windows(p, index)
        reader = self.split.reader
        arrays = reader.read(indices)
        images = arrays[self.targets.input]
        fixed = {name: arrays[name] for name in self.targets.fixed}
        fields, counts = reader.ragged(indices, names)
        if raw:
            return images, fixed, fields, counts
        if self.augment is not None:
            from ..augment import numpy_exec

            params = self.augment.draw(p.epoch, indices, images.shape[1:3])
            batch = {self.targets.input: images, **fixed, **fields}
            moved, counts = numpy_exec.apply_fields(
                batch, params, self.dataset.fields, counts=counts
            )
            images = moved.pop(self.targets.input)
            fixed = {name: moved.pop(name) for name in fixed}
            fields = moved
        return self.transform.normalizer(images), self.transform.expand(fixed), fields, counts

    def padded_batch(self, index: int, epoch: int | None = None) -> tuple[np.ndarray, dict]:
        """`(images, targets)`: the fixed targets `[B, ...]` and the padder's fields (the only
        ragged ones read) `[B, max_boxes, *row]` padded with -1; a detection pack's are
        `{"boxes": [B,max_boxes,4], "labels": [B,max_boxes]}`."""
        images, fixed, fields, counts = self.sample_batch(index, epoch, names=self.padder.names)
        targets = fixed | self.padder(fields, counts)
        return images, {name: targets[name] for name in self.targets.names}

    def draw(self, index: int, epoch: int | None = None) -> AugmentParams:
        """The augmentation parameters of batch `index`, rows in ascending sample index (the
        order `read` gives): keyed by (seed, epoch, sample), whatever batch the sample is in."""
        p = self.pass_of(epoch)
        indices = np.sort(self.sampler.batch(p, index))
        return self.augment.draw(p.epoch, indices, self.dataset.field(self.targets.input).shape[:2])

    def _augmented(self, arrays: dict, index: int, epoch: int | None) -> dict[str, np.ndarray]:
        """The batch's fields moved by their kinds' geometry with the draw of their samples
        (rows in ascending index)."""
        from ..augment import numpy_exec

        return numpy_exec.apply_fields(arrays, self.draw(index, epoch), self.dataset.fields)[0]

    def _prefetch_windows(self, p: Pass, index: int) -> None:
        """Have the window batch `index` starts in and the next read ahead, each as
        sequential runs of its shards."""
        reader = self.split.reader
        step = -(-self.sampler.window // self.batch_size)  # batches per window, about
        for ahead in (index, index + step):
            first = ahead * self.batch_size // self.sampler.window
            if (p, first) in self._prefetched:
                continue
            self._prefetched.add((p, first))
            for start, stop in self.sampler.window_runs(p, ahead):
                reader.prefetch(start, stop)


def per_sample(
    fields: dict[str, np.ndarray], counts: np.ndarray, fixed: dict[str, np.ndarray] | None = None
) -> list[dict[str, np.ndarray]]:
    """Ragged object fields (every object, sample after sample) as one dict per sample, with
    each sample's value of the `fixed` fields (`[B, ...]` each) beside its rows."""
    cuts = np.cumsum(counts)[:-1]
    split = {name: np.split(values, cuts) for name, values in fields.items()}
    split |= {name: list(values) for name, values in (fixed or {}).items()}
    return [dict(zip(split, row, strict=True)) for row in zip(*split.values(), strict=True)]


def check_augment_fits(augment: Augment, dataset: PackedDataset, path: str) -> None:
    """Refuse now, not at the first batch, an augmentation whose crop exceeds the images, or
    whose fill or ignore index the pack's images and masks cannot hold."""
    masks = next(
        (f for f in dataset.fields if not f.ragged and kind_of(f).geometry == "labels"), None
    )
    try:
        augment.check_dtypes(input_field(dataset.fields).dtype, masks and masks.dtype)
    except ValueError as error:
        raise ValueError(f"{error} ({path} holds them)") from None
    height, width = dataset.image_shape[:2]
    try:
        augment.output_hw((height, width))
    except ValueError as error:
        raise ValueError(
            f"{error} of {path}: crop at most {height}x{width} (height x width), or pack larger "
            "images (--size)"
        ) from None
