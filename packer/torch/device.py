"""Batches augmented on a torch device where they are consumed (`augment_device=` in packer.torch).

DataLoader workers read raw uint8 batches and draw their parameters on the CPU; CUDA has no
place in a forked worker. The batch then reaches the training process as a `DeviceBatch`:
the DataLoader's pin-memory step pins its raw tensors, and unpacking it there
(`images, targets = batch`) moves them to the device and runs one batched warp, then the
normalisation and one-hot the NumPy readers apply, so the batch leaves ready for the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import torch

from ..augment import torch_exec
from ..augment.params import AugmentParams
from ..reading.transforms import Normalizer


def distributed(rank: int | None, world_size: int | None) -> tuple[int, int]:
    """Explicit values, else torch.distributed's when it is initialised, else one process."""
    dist = torch.distributed
    active = dist.is_available() and dist.is_initialized()
    if world_size is None:
        world_size = dist.get_world_size() if active else 1
    if rank is None:
        rank = dist.get_rank() if active else 0
    return rank, world_size


def device_of(name: Any, option: str = "augment_device") -> torch.device:
    """`option` (augment_device or decode_device) as a torch.device, refused with a one-line
    reason when unusable."""
    work = option.split("_")[0]  # what the option moves: augment, decode
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"{option} {name!r} is not a torch device ({error})") from None
    if device.type == "cpu":
        return device
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"{option}={name!r}, but torch sees no CUDA device here (torch.cuda."
                f"is_available() is False); use {option}=None to {work} on the CPU"
            )
        count = torch.cuda.device_count()
        if device.index is not None and device.index >= count:
            raise ValueError(
                f"{option}={name!r}, but torch sees {count} CUDA device(s) here: "
                f"use cuda:0 to cuda:{count - 1}, or {option}=None to {work} on the CPU"
            )
        return device
    try:  # another kind (mps, xpu, ...): usable only where torch can put a tensor on it
        torch.empty(1, device=device)
    except Exception as error:
        reason = (str(error).strip() or type(error).__name__).splitlines()[0].split(". ")[0]
        raise ValueError(
            f"{option}={name!r} is a device torch cannot use here ({reason}); "
            f'use "cuda" on a GPU, or {option}=None to {work} on the CPU'
        ) from None
    return device


@dataclass
class DeviceFinish:
    """What follows the reading, on `device`: warp, then normalise and one-hot as asked."""

    device: torch.device
    normalizer: Normalizer
    num_classes: int
    one_hot: bool
    fields: tuple  # the pack's fields, whose kinds move the target
    layout: str
    target_dtype: torch.dtype = torch.int64  # class ids; one-hot rows too when it is a float

    def __call__(
        self, images: torch.Tensor, targets: torch.Tensor, params: AugmentParams | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        device = self.device
        images = images.to(device, non_blocking=True)
        targets = targets.to(device, non_blocking=True)
        if params is not None:  # None: nothing to augment (a batch only decoded here)
            images, targets = self.moved(images, targets, params)
        images = self.normalised(images)
        if self.one_hot:  # ids outside 0..C-1 (the ignore index) become zero rows
            ids = targets.long()
            valid = (ids < self.num_classes).unsqueeze(-1)
            hot = torch.nn.functional.one_hot(ids.clamp(max=self.num_classes - 1), self.num_classes)
            targets = (hot * valid).to(self.target_dtype)
        else:  # converted here, after the copy: a uint8 mask crosses at an eighth of int64's size
            targets = targets.to(self.target_dtype)
        return (images.permute(0, 3, 1, 2) if self.layout == "NCHW" else images), targets

    def moved(self, images: torch.Tensor, targets: torch.Tensor, params: AugmentParams) -> tuple:
        """Images and the one fixed target field moved by the draw, by the target's kind."""
        image, *others = (f.name for f in self.fields if not f.ragged)
        if len(others) != 1:
            raise ValueError(f"one fixed target field moves here, not {len(others)}: {others}")
        target = others[0]
        moved, _ = torch_exec.apply_fields(
            {image: images, target: targets}, params, self.fields, device=self.device
        )
        return moved[image], moved[target]

    def normalised(self, images: torch.Tensor) -> torch.Tensor:
        """The images normalised as the reader asks (uint8 as they are without)."""
        mode = self.normalizer.mode
        if mode is None:
            return images
        out = images.float()
        if mode == "unit":
            return out.mul_(self.normalizer.scale)
        mean = torch.as_tensor(self.normalizer.mean, device=self.device)
        inv_std = torch.as_tensor(self.normalizer.inv_std, device=self.device)
        return out.sub_(mean).mul_(inv_std)


class DeviceBatch:
    """Raw `(images, targets)` of one batch and its drawn parameters, augmented on first use.

    Unpacking (`images, targets = batch`), indexing or `tensors()` runs the work once on the
    device; `pin_memory()` (called by the DataLoader with `pin_memory=True`) pins the raw
    tensors first, so the copy to the GPU is asynchronous.
    """

    def __init__(
        self,
        images: torch.Tensor,
        targets: torch.Tensor,
        params: AugmentParams,
        finish: DeviceFinish,
    ) -> None:
        self._raw: tuple[torch.Tensor, torch.Tensor] | None = (images, targets)
        self._done: tuple[torch.Tensor, torch.Tensor] | None = None
        self.params, self.finish = params, finish

    def pin_memory(self, device: Any = None) -> DeviceBatch:
        if self._raw is not None and self.finish.device.type == "cuda":
            self._raw = (self._raw[0].pin_memory(), self._raw[1].pin_memory())
        return self

    def tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The augmented `(images, targets)` on the device."""
        if self._done is None:
            self._done = self.finish(*self._raw, self.params)
            self._raw = None  # let a worker's shared-memory slot go
        return self._done

    def __iter__(self):
        return iter(self.tensors())

    def __getitem__(self, index: int) -> torch.Tensor:
        return self.tensors()[index]

    def __len__(self) -> int:
        return 2


class DeviceObjects(DeviceBatch):
    """A detection batch's raw images, its per-image targets and its draw: unpacking moves
    them to the device and augments boxes and per-object masks with the images there."""

    def __init__(self, images, targets: list[dict], params: AugmentParams, finish) -> None:
        super().__init__(images, images, params, finish)
        self.targets = targets

    def pin_memory(self, device: Any = None) -> DeviceObjects:
        if self._raw is not None and self.finish.device.type == "cuda":
            images = self._raw[0].pin_memory()
            self._raw = (images, images)
            self.targets = [{k: v.pin_memory() for k, v in t.items()} for t in self.targets]
        return self

    def tensors(self) -> tuple[torch.Tensor, list[dict[str, torch.Tensor]]]:
        if self._done is None:
            finish, device = self.finish, self.finish.device
            images = self._raw[0].to(device, non_blocking=True)
            targets = [{k: v.to(device, non_blocking=True) for k, v in t.items()}
                       for t in self.targets]  # fmt: skip
            if finish.fields:  # every field by its kind, fixed ones in the dicts too
                name = next(f.name for f in finish.fields if not f.ragged)  # the input
                fixed, moved = torch_exec.apply_fields(
                    {name: images}, self.params, finish.fields, device=device, targets=targets
                )
                images = fixed[name]
            else:
                images, _, moved = torch_exec.apply(
                    images, None, self.params, device=device, targets=targets
                )
            for target in moved:  # torchvision's dtypes, whatever the executor kept
                target.update({k: v.long() for k, v in target.items() if v.dtype in NARROW_INTS})
            self._done = (channels(finish.normalised(images), finish.layout), moved)
            self._raw = None
            self.targets = []
        return self._done


NARROW_INTS = (torch.int8, torch.int16, torch.int32)  # widened to int64, as class ids are


def torch_dtype(dtype: np.dtype | str) -> np.dtype:
    """A ragged field's dtype as packer.torch gives it: signed integers (class ids) as int64,
    which torch's losses and torchvision's detection models take; any other as stored."""
    dtype = np.dtype(dtype)
    return np.dtype(np.int64) if dtype.kind == "i" else dtype


def from_arrays(arrays: list[np.ndarray], params: AugmentParams, finish: DeviceFinish):
    """A DeviceBatch over NumPy arrays (a shared slot's views in the parent, say)."""
    return DeviceBatch(torch.from_numpy(arrays[0]), torch.from_numpy(arrays[1]), params, finish)


def detection_batch(
    loader, index: int, layout: str, finish: DeviceFinish | None = None, dtypes: dict | None = None
):
    """Batch `index` of a ragged (detection) pack's Loader as `detection_tensors` gives it,
    each fixed target as `dtypes` names its dtype (else as stored); with `finish`
    (augment_device), raw, to be augmented where it is unpacked."""
    images, fixed, fields, counts = loader.sample_batch(index, raw=finish is not None)
    fixed = {k: v.astype((dtypes or {}).get(k, v.dtype), copy=False) for k, v in fixed.items()}
    if finish is None:
        return detection_tensors(images, fields, counts, layout, fixed)
    images, targets = detection_tensors(images, fields, counts, "NHWC", fixed)
    return DeviceObjects(images, targets, loader.draw(index), finish)


def objects_from_arrays(
    arrays: list[np.ndarray],
    names: tuple[tuple[str, ...], tuple[str, ...]],
    layout: str,
    device: tuple | None = None,
):
    """A ragged pack's batch from the arrays a worker's slot holds (`[images, counts,
    *values, *fixed]`: each ragged field `names[0][i]` as one array of all the batch's rows,
    then each fixed target `names[1][i]` `[B, ...]`), split per image here, as
    `detection_tensors`; with `device` = (params, finish), a DeviceObjects."""
    ragged, fixed = names
    images, counts, *values = arrays
    fields = dict(zip(ragged, values[: len(ragged)], strict=True))
    per_image = dict(zip(fixed, values[len(ragged) :], strict=True))
    if device is None:
        return detection_tensors(images, fields, counts, layout, per_image)
    images, targets = detection_tensors(images, fields, counts, "NHWC", per_image)
    return DeviceObjects(images, targets, *device)


def detection_tensors(
    images: np.ndarray,
    fields: dict[str, np.ndarray],
    counts: np.ndarray,
    layout: str,
    fixed: dict[str, np.ndarray] | None = None,
) -> tuple[torch.Tensor, list[dict[str, torch.Tensor]]]:
    """A detection batch as torchvision's detection models take it: images (NCHW as a
    channels_last view) and per image a dict of tensors (class ids int64: `torch_dtype`),
    views of one tensor per field, split by the images' object `counts`, and each `fixed`
    target's (`[B, ...]`, as given) row of that image."""
    sizes = counts.tolist()
    names = (*fields, *(fixed or ()))
    # one tensor per field, split: the per-image tensors are most of a small batch's cost.
    # unsafe_split_with_sizes makes the same views of its memory without autograd's view
    # records, a quarter faster; safe, as its documentation says, while only its outputs
    # are modified in place (the tensor split is made here and handed to no one)
    split = [
        torch.from_numpy(v.astype(torch_dtype(v.dtype), copy=False)).unsafe_split_with_sizes(sizes)
        for v in fields.values()
    ]
    split += [torch.from_numpy(v).unbind(0) for v in (fixed or {}).values()]
    # every split has len(sizes) parts by construction; map over zip builds the dicts in
    # two thirds of a comprehension's time (zip's strict check would double it)
    return channels(torch.from_numpy(images), layout), list(
        map(dict, map(partial(zip, names), zip(*split, strict=False)))
    )


def channels(images: torch.Tensor, layout: str) -> torch.Tensor:
    """`[B,H,W,3]` images as they are (NHWC), or NCHW as a channels_last view of them."""
    return images.permute(0, 3, 1, 2) if layout == "NCHW" else images
