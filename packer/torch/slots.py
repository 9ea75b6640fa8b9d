"""The DataLoader workers' side of `packer.torch`'s hand-off: a batch written into a free
shared-memory slot of the worker's ring (`reading.handoff`) and the parcel that travels in its
place, which becomes the batch's tensors in the process that unpickles it, so no tensor of a
batch crosses on its own (torch's per-tensor sharing).
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import get_worker_info

from ..reading import handoff
from . import decode as torch_decode
from . import device as torch_device


class SlotFilling:
    """Mixin of the datasets (`dataset._Packed`): their batches written into slots, in a
    DataLoader worker. Uses the dataset's `loader`, `layout`, `_dtypes`, `_finish` and
    `_sender` (the worker's ring, made on first use)."""

    def _objects_into_slot(self, index: int) -> Handed | None:
        """A ragged (detection) batch in a free slot: the images, each image's object count,
        every ragged field as one array of all the batch's rows (values + counts) and every
        fixed target `[B, ...]`, to be split per image where it lands, so that no per-image
        tensor crosses on its own. Images and fixed targets as stored are read straight into
        the slot. None while every slot is held."""
        self._start_worker()
        loader, raw = self.loader, self._finish is not None
        targets = loader.targets
        as_stored = raw or (loader.augment is None and loader.transform.identity)
        reader_fields = {f.name: f for f in loader.split.reader.fields}
        if as_stored:
            fields, counts = loader.ragged_targets(index)
            fixed = {
                name: ((len(counts), *reader_fields[name].shape), reader_fields[name].dtype)
                for name in (targets.input, *targets.fixed)
            }
            images_spec = fixed.pop(targets.input)
            fixed_specs = [(shape, self._dtypes[name]) for name, (shape, _) in fixed.items()]
        else:
            images, expanded, fields, counts = loader.sample_batch(index)
            images_spec = (images.shape, images.dtype)
            fixed_specs = [(v.shape, self._dtypes[k]) for k, v in expanded.items()]
        specs = [images_spec, (counts.shape, np.int64)]
        specs += [(v.shape, torch_device.torch_dtype(v.dtype)) for v in fields.values()]
        slot = self._sender.take(specs + fixed_specs)
        if slot is None:
            return None
        placed = slot.arrays[2 + len(fields) :]  # the fixed targets' places in the slot
        if as_stored:
            out = {targets.input: slot.arrays[0]}  # straight into the slot where stored so
            for name, target in zip(targets.fixed, placed, strict=True):
                f = reader_fields[name]
                same = target.dtype == np.dtype(f.dtype)
                out[name] = target if same else np.empty((len(counts), *f.shape), f.dtype)
            out |= {  # any other fixed field read beside them
                name: np.empty((len(counts), *f.shape), f.dtype)
                for name, f in reader_fields.items()
                if name not in out
            }
            loader.read(index, out=out)
            expanded = {name: out[name] for name in targets.fixed}
        else:
            np.copyto(slot.arrays[0], images)
        values = [counts, *fields.values(), *expanded.values()]
        for target, value in zip(slot.arrays[1:], values, strict=True):
            if target is not value:
                np.copyto(target, value, casting="unsafe")
        device = (loader.draw(index), self._finish) if raw else None
        parcel = self._sender.parcel(slot)
        names = (tuple(fields), targets.fixed)
        return Handed(parcel, slot.arrays, self.layout, device, names)

    def _encoded_batch(self, index: int) -> torch_decode.EncodedBatch | Handed:
        """Batch `index` with its JPEG images undecoded (`decode_device`): the payloads as
        one byte array and their lengths, the target as stored and the draw, in a slot from
        a DataLoader worker (the payload's size varies: the slot grows to fit)."""
        loader = self.loader
        name, target = loader.targets.input, loader.targets.single
        payloads = loader.payloads(index, name)
        lengths = np.fromiter(map(len, payloads), np.int64, len(payloads))
        fields = {f.name: f for f in loader.split.reader.fields}
        target_spec = ((len(payloads), *fields[target].shape), np.dtype(fields[target].dtype))
        specs = [((int(lengths.sum()),), np.uint8), (lengths.shape, np.int64), target_spec]
        slot = None
        if get_worker_info() is not None and handoff.AVAILABLE:
            self._start_worker()
            slot = self._sender.take(specs)
        arrays = slot.arrays if slot is not None else [np.empty(*spec) for spec in specs]
        np.concatenate([np.frombuffer(p, np.uint8) for p in payloads], out=arrays[0])
        arrays[1][:] = lengths
        out = {target: arrays[2]} | {
            other: np.empty((len(payloads), *f.shape), f.dtype)
            for other, f in fields.items()
            if other not in (name, target)
        }
        loader.read(index, out=out, leave=(name,))
        params = loader.draw(index) if loader.augment is not None else None
        device = (fields[name].shape, params, self._finish)
        if slot is None:
            return torch_decode.from_arrays(arrays, *device)
        return Handed(self._sender.parcel(slot), slot.arrays, self.layout, device, encoded=True)

    def _start_worker(self) -> None:
        """In a DataLoader worker, once: its ring of slots. (Not OpenCV's thread count: in a
        forked worker, cv2.setNumThreads can hang on the thread pool the fork copied.)"""
        if self._sender is None:
            self._sender = handoff.Sender()

    def _read_into_slot(self, index: int, raw_targets: bool = False) -> handoff.Slot | None:
        """Images read straight into a free slot (one copy), each target field beside them:
        as stored with `raw_targets` or when stored is what is asked (one copy too), else as
        the transform makes them."""
        loader, transform = self.loader, self.loader.transform
        targets = loader.targets
        count = len(loader.indices(index))
        fields = {f.name: ((count, *f.shape), f.dtype) for f in loader.split.reader.fields}
        names = (targets.single,) if raw_targets else targets.fixed
        as_stored = raw_targets or (
            transform.one_hot is None
            and all(np.dtype(fields[name][1]) == self._dtypes[name] for name in names)
        )
        specs = [fields[name] for name in names]
        if not as_stored:
            specs = [
                (shape + (transform.num_classes,) * (transform.one_hot is not None
                                                     and name in targets.class_ids),
                 self._dtypes[name])
                for name, (shape, _) in zip(names, specs, strict=True)
            ]  # fmt: skip
        slot = self._sender.take([fields[targets.input], *specs])
        if slot is not None:
            out = {targets.input: slot.arrays[0]}  # straight into the slot, as the targets...
            if as_stored:  # ...when they are stored as asked
                out |= dict(zip(names, slot.arrays[1:], strict=True))
            out |= {name: np.empty(*spec) for name, spec in fields.items() if name not in out}
            arrays = loader.read(index, out=out)
            if not as_stored:
                made = self._listed(transform(arrays)[1])
                for target, values in zip(slot.arrays[1:], made, strict=True):
                    np.copyto(target, values, casting="unsafe")
        return slot


def as_tensors(
    arrays: list[np.ndarray], layout: str, names: tuple[str, ...] | None = None
) -> tuple[torch.Tensor, torch.Tensor | dict[str, torch.Tensor]]:
    """(images, targets) tensors sharing the arrays' memory (`[images, *targets]`); NCHW as a
    channels_last view. Targets: the one array, or with `names` a dict of them."""
    images = torch_device.channels(torch.from_numpy(arrays[0]), layout)
    if names is None:
        return images, torch.from_numpy(arrays[1])
    return images, {name: torch.from_numpy(a) for name, a in zip(names, arrays[1:], strict=True)}


class Handed:
    """A batch in a worker's slot: pickled, it travels as the slot; unpickled, it is tensors
    (or, with `device` = (params, finish), a DeviceBatch to be augmented where it lands).
    With `objects` (the names of a ragged batch's ragged fields and fixed targets) the slot
    holds images, object counts, one array per ragged field and one per fixed target, split
    per image where it lands; with `names`, a fixed-field batch's targets as a dict."""

    def __init__(
        self,
        parcel: handoff.Parcel,
        arrays: list[np.ndarray],
        layout: str,
        device: tuple | None = None,
        objects: tuple[tuple[str, ...], tuple[str, ...]] | None = None,
        names: tuple[str, ...] | None = None,
        encoded: bool = False,
    ) -> None:
        self.parcel, self.arrays, self.layout, self.device = parcel, arrays, layout, device
        self.objects, self.names, self.encoded = objects, names, encoded

    def __reduce__(self) -> tuple:
        return built, (
            self.parcel, self.layout, self.device, self.objects, self.names, self.encoded
        )  # fmt: skip

    def __iter__(self):
        """`images, targets = batch` in the worker too (a collate_fn of one's own): tensors
        there, which then travel the ordinary way."""
        return iter(
            built(self.arrays, self.layout, self.device, self.objects, self.names, self.encoded)
        )


def built(
    arrays: list[np.ndarray],
    layout: str,
    device: tuple | None,
    objects: tuple | None,
    names: tuple[str, ...] | None = None,
    encoded: bool = False,
):
    """A handed batch from its slot's arrays: see `Handed` (`encoded`: JPEG payloads, their
    lengths and the target, with `device` = (image shape, params, finish))."""
    if encoded:
        return torch_decode.from_arrays(arrays, *device)
    if objects is not None:
        return torch_device.objects_from_arrays(arrays, objects, layout, device)
    if device is not None:
        return torch_device.from_arrays(arrays, *device)
    return as_tensors(arrays, layout, names)
