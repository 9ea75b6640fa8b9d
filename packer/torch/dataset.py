"""`packer.torch`: PyTorch datasets over a pack, thin adapters over `reading.Loader`.

    ds = packer.torch.PackedDataset(DIR, "train", batch_size=64, seed=0)
    loader = DataLoader(ds, batch_size=None, num_workers=2, pin_memory=True,
                        persistent_workers=True)
    for epoch in range(first_epoch, epochs):
        ds.set_epoch(epoch)
        for step, (images, targets) in enumerate(loader):
            ...
            checkpoint["data"] = ds.state_dict(batches=step + 1)

Items are whole batches: the DataLoader gets `batch_size=None` (a PackedDataset refuses
another), no `shuffle`, sampler or DistributedSampler: the dataset orders and shards itself
(a PackedDataset refuses the RandomSampler of `shuffle=True` and a DistributedSampler).
A fresh dataset given `load_state_dict(checkpoint["data"])` yields exactly the samples the
interrupted run had left, with any number of workers, ranks or batch size (a state names a
place in the epoch's global order); torchdata's StatefulDataLoader saves and restores the
same position itself. Both datasets pickle without open files (each worker opens the shards)
and share their position (the current pass) with the workers through a tiny shared-memory
tensor, so `set_epoch` and `load_state_dict` reach persistent workers too. Workers hand
batches over in reusable shared-memory slots (`reading.handoff`).
"""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np
import torch
from torch.utils.data import Dataset, IterableDataset, get_worker_info

from ..augment import Augment
from ..reading import gather, handoff
from ..reading.loader import Loader
from ..reading.options import BATCH_SIZE, SPLIT, takes
from ..reading.position import ENCODED_LENGTH, Pass
from . import compat as torch_compat
from . import decode as torch_decode
from . import device as torch_device
from .options import TARGET_DTYPES, IterableOptions, TorchOptions
from .slots import Handed, SlotFilling, as_tensors


def _target_dtype(name: str | torch.dtype | None, one_hot: bool) -> np.dtype:
    """`target_dtype` as a NumPy dtype: by default int64 class ids (what torch's losses take)
    or float32 one-hot; "uint8" keeps the stored bytes (8x fewer than int64)."""
    if name is None:
        return np.dtype(np.float32 if one_hot else np.int64)
    text = str(name).removeprefix("torch.")
    if text not in TARGET_DTYPES:
        raise ValueError(f"target_dtype must be one of {', '.join(TARGET_DTYPES)}, not {name!r}")
    return np.dtype(text)


class _Packed(SlotFilling):
    """What both datasets share: the Loader, tensors out of its batches, epoch and state."""

    def __init__(
        self,
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
        uneven: str | None = "pad",
        augment: Augment | None = None,
        max_boxes: int = 100,
        cache_dir: str | os.PathLike | None = None,
        cache_bytes: int | None = None,
        shuffle_window: int | None = None,
        layout: str = "NHWC",
        augment_device: str | torch.device | None = None,
        decode_device: str | torch.device | None = None,
        target_dtype: str | torch.dtype | None = None,
    ) -> None:
        self._open(path, split, batch_size, TorchOptions.of(locals()))

    def _open(self, path: str | os.PathLike, split: str, batch_size: int, o: TorchOptions) -> None:
        """Set up from the typed options (each dataset's own signature makes them)."""
        if o.augment_device is not None and o.augment is None:
            raise ValueError("augment_device names where to run augment=...: give both")
        rank, world_size = torch_device.distributed(o.rank, o.world_size)
        o = replace(o, rank=rank, world_size=world_size)
        self.loader = Loader.with_options(path, split, batch_size, o)
        self.layout = o.layout
        self._target_dtype = _target_dtype(o.target_dtype, o.one_hot)
        targets = self.loader.targets
        if o.augment_device is not None and not (targets.single or targets.ragged):
            raise ValueError(
                "augment_device= augments one target field (class ids or masks) or a pack's "
                f"objects on the device; this pack's targets are {', '.join(targets.fixed)}: "
                "augment them on the CPU (augment_device=None)"
            )
        # each fixed target's dtype as yielded: class ids as target_dtype, others as stored
        self._dtypes = {
            f.name: self._target_dtype if f.name in targets.class_ids else np.dtype(f.dtype)
            for f in self.loader.dataset.fields
            if f.name in targets.fixed
        }
        device = o.augment_device
        if o.decode_device is not None:  # decoded, then augmented, there
            device = torch_decode.decode_device(self.loader, o.decode_device, o.augment_device)
        self._decoding = o.decode_device is not None
        self._finish = None if device is None else self._device_finish(device)
        self._position = torch.zeros(ENCODED_LENGTH, dtype=torch.int64).share_memory_()
        self._seen: list[int] | None = None  # the position's numbers `_sync` last took
        self._publish()
        self._sender: handoff.Sender | None = None  # in a DataLoader worker

    def __getstate__(self) -> dict:
        return self.__dict__ | {"_sender": None}

    def set_epoch(self, epoch: int) -> None:
        """Epoch `epoch`'s order from now on, in every worker (the current one again keeps a
        resumed position). Call it before each epoch, as with DistributedSampler."""
        self._sync()
        self.loader.set_epoch(epoch)
        self._publish()

    def state_dict(self, batches: int | None = None) -> dict:
        """The reading position after `batches` batches of the current pass (JSON-ready)."""
        self._sync()
        return self.loader.state_dict(batches or 0)

    def load_state_dict(self, state: dict | list[dict]) -> None:
        """Resume from `state` (of any packer reader of this split, any layout; a list: every
        rank's, which must agree); its seed is taken. Call before iterating."""
        self.loader.load_state_dict(state)
        self._publish()

    def _publish(self) -> None:
        """Put the loader's pass where the workers read it."""
        self._position[:] = torch.tensor(self.loader.pass_.encode())

    def _sync(self) -> int:
        """Take the shared position; returns the batches of the pass. Every batch asks, so
        the position is decoded only when its numbers changed since the last look."""
        values = self._position.numpy().tolist()
        if values != self._seen:
            self._seen = values
            shared = Pass.decode(values)
            if shared != self.loader.pass_:
                self.loader.pass_ = shared
        return len(self.loader)

    def _device_finish(self, augment_device: str | torch.device) -> torch_device.DeviceFinish:
        transform = self.loader.transform
        return torch_device.DeviceFinish(
            torch_device.device_of(augment_device),
            transform.normalizer,
            transform.num_classes,
            transform.one_hot is not None,
            self.loader.dataset.fields,
            self.layout,
            torch.from_numpy(np.empty(0, self._target_dtype)).dtype,
        )

    def _batch(self, index: int) -> tuple[torch.Tensor, torch.Tensor] | Handed:
        """Batch `index` of the current epoch: tensors, or in a DataLoader worker a parcel of
        a shared slot that becomes those tensors in the process that unpickles it."""
        worker = get_worker_info()
        if worker is not None:
            gather.share_cores(worker.num_workers)  # the workers share the cores
        if self._decoding:  # JPEG payloads, decoded where the batch lands
            return self._encoded_batch(index)
        if self.loader.objects:  # per image a dict of tensors, torchvision's detection input
            if worker is not None and handoff.AVAILABLE:
                handed = self._objects_into_slot(index)
                if handed is not None:
                    return handed
            return torch_device.detection_batch(
                self.loader, index, self.layout, self._finish, self._dtypes
            )
        if self._finish is not None:
            return self._raw_batch(index)
        names = self._names()
        if worker is None or not handoff.AVAILABLE:
            images, targets = self.loader.batch(index)
            return as_tensors([images, *self._cast(targets)], self.layout, names)
        self._start_worker()
        raw = self.loader.augment is None and self.loader.transform.normalizer.mode is None
        slot = self._read_into_slot(index) if raw else None
        if slot is None:
            images, targets = self.loader.batch(index)
            listed = self._listed(targets)
            dtypes = [self._dtypes[name] for name in self.loader.targets.fixed]
            slot = self._sender.take(
                [(images.shape, images.dtype)]
                + [(t.shape, d) for t, d in zip(listed, dtypes, strict=True)]
            )
            if slot is None:  # every slot still held by the consumer: the ordinary way
                return as_tensors([images, *self._cast(targets)], self.layout, names)
            np.copyto(slot.arrays[0], images)
            for target, values in zip(slot.arrays[1:], listed, strict=True):
                np.copyto(target, values, casting="unsafe")
        return Handed(self._sender.parcel(slot), slot.arrays, self.layout, names=names)

    def _names(self) -> tuple[str, ...] | None:
        """A fixed-field pack's target names when they are a dict (None: a single array)."""
        targets = self.loader.targets
        return None if targets.single is not None else targets.fixed

    def _listed(self, targets: np.ndarray | dict) -> list[np.ndarray]:
        """A fixed-field pack's targets as one array per target field, in the pack's order."""
        return [targets] if isinstance(targets, np.ndarray) else list(targets.values())

    def _cast(self, targets: np.ndarray | dict) -> list[np.ndarray]:
        """`_listed`, each in the dtype it is yielded in (no copy where it is already)."""
        return [
            values.astype(self._dtypes[name], copy=False)
            for name, values in zip(self.loader.targets.fixed, self._listed(targets), strict=True)
        ]

    def _raw_batch(self, index: int) -> torch_device.DeviceBatch | Handed:
        """Batch `index` unaugmented with its drawn parameters, to be augmented on the device
        when it is unpacked (see `torch_device`); from a worker through a slot."""
        params = self.loader.draw(index)
        if get_worker_info() is not None and handoff.AVAILABLE:
            self._start_worker()
            slot = self._read_into_slot(index, raw_targets=True)
            if slot is not None:
                return Handed(self._sender.parcel(slot), slot.arrays, self.layout,
                               (params, self._finish))  # fmt: skip
        arrays = self.loader.read(index)
        targets = arrays[self.loader.targets.single]
        images = arrays[self.loader.targets.input]
        return torch_device.from_arrays([images, targets], params, self._finish)


@takes(TorchOptions)
class PackedDataset(_Packed, Dataset):
    """Item `i` is batch `i` of the current epoch: `(images, targets)` tensors.

    Images as stored, `[B,H,W,C]` (8-bit pictures: uint8 RGB; `layout="NCHW"`: `[B,C,H,W]`,
    a channels_last view), float32
    with `normalize`; targets int64 `[B]` or `[B,H,W]`, float32 one-hot with `one_hot=True`,
    or `target_dtype`. Use `DataLoader(ds, batch_size=None, num_workers=N, pin_memory=True,
    persistent_workers=True)`: the dataset orders its batches itself (seeded, resumable) and
    gives each rank its part, so a DataLoader that shuffles or samples them is refused. The
    options (below) are the readers' (`packer.reading.options`) and torch's own; a remote
    pack's shard cache is shared safely by the DataLoader's workers.
    """

    def __len__(self) -> int:
        torch_compat.refuse_reordering("packer.torch.PackedDataset")
        return self._sync()

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        if not 0 <= index < self._sync():
            raise IndexError(f"batch {index} out of range ({self._sync()} batches)")
        return self._batch(index)

    def __getitems__(self, indices: list[int]) -> None:
        """Called only when the DataLoader batches items itself: refuse, say what to do."""
        raise TypeError(
            "packer.torch.PackedDataset items are whole batches: give the DataLoader "
            "batch_size=None (set the batch size on the dataset)"
        )


@takes(IterableOptions)
class PackedIterable(_Packed, IterableDataset):
    """The same batches, streamed: worker w of W yields batches w, w+W, ... of the pass, so
    the DataLoader's round robin over workers gives them in order, each exactly once.

    `shuffle="windows"` by default: shards in a seeded order, shuffled within windows read
    ahead as sequential runs. Give the DataLoader `batch_size=None` (a batch_size there would
    stack whole batches; this cannot be detected from inside the dataset). Its options (below)
    are PackedDataset's, `shuffle`'s default aside.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        split: str = SPLIT,
        batch_size: int = BATCH_SIZE,
        *,
        shuffle: bool | str = "windows",
        one_hot: bool = False,
        normalize: str | None = None,
        drop_remainder: bool = False,
        seed: int | None = None,
        rank: int | None = None,
        world_size: int | None = None,
        uneven: str | None = "pad",
        augment: Augment | None = None,
        max_boxes: int = 100,
        cache_dir: str | os.PathLike | None = None,
        cache_bytes: int | None = None,
        shuffle_window: int | None = None,
        layout: str = "NHWC",
        augment_device: str | torch.device | None = None,
        decode_device: str | torch.device | None = None,
        target_dtype: str | torch.dtype | None = None,
    ) -> None:
        self._open(path, split, batch_size, IterableOptions.of(locals()))
        self._next: tuple[int, int] | None = None  # (next batch, stride) while iterating
        self._resume: tuple[int, int] | None = None  # where the next iteration starts, if loaded

    def __len__(self) -> int:
        return self._sync()

    def __iter__(self):
        self._sync()
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info else (0, 1)
        first, stride = self._resume or (worker, workers)
        self._resume = None
        try:
            for index in range(first, len(self.loader), stride):
                self._next = (index + stride, stride)
                yield self._batch(index)
        finally:
            self._next = None

    def state_dict(self, batches: int | None = None) -> dict:
        """As PackedDataset's; without `batches`, inside an iteration, this worker's own
        position (what torchdata's StatefulDataLoader saves per worker)."""
        if batches is not None or self._next is None:
            return super().state_dict(batches)
        return super().state_dict() | {"next": self._next[0], "stride": self._next[1]}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        if "next" in state:
            info = get_worker_info()
            if state["stride"] != (info.num_workers if info else 1):
                raise ValueError(
                    f"this is the state of one of {state['stride']} DataLoader workers "
                    f"(torchdata's StatefulDataLoader saves them): resume with as many"
                )
            self._resume = (state["next"], state["stride"])
