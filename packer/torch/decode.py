"""JPEG image fields decoded where the batch is consumed (`decode_device=` in packer.torch).

The DataLoader workers read a batch's JPEG payloads as they are stored (a tenth of the pixels'
bytes) and hand them over with the targets and the drawn augmentation. On a GPU, nvJPEG
(`torchvision.io.decode_jpeg(..., device="cuda")`) decodes the whole batch in one call: in the
DataLoader's pin-memory thread when `pin_memory=True` (off the training thread, which only
waits for it when it unpacks the batch), else when the batch is unpacked. The augmentation,
normalisation and one-hot then run there too (`device.DeviceFinish`). On the CPU the batch is
decoded by packer's own decoder (`imaging.codec`) when it is unpacked.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..augment.params import AugmentParams
from ..imaging import codec
from .device import DeviceBatch, DeviceFinish, device_of


class EncodedBatch(DeviceBatch):
    """One batch's JPEG payloads (one uint8 tensor, `lengths` bytes each), its fixed target
    and its draw (None without augment): decoded and finished on `finish.device` on first
    use, as DeviceBatch."""

    def __init__(
        self,
        payload: torch.Tensor,
        lengths: list[int],
        shape: tuple[int, ...],
        targets: torch.Tensor,
        params: AugmentParams | None,
        finish: DeviceFinish,
    ) -> None:
        super().__init__(payload, targets, params, finish)
        self.lengths, self.shape = lengths, shape
        self._images: torch.Tensor | None = None  # decoded, before the finish

    def pin_memory(self, device: Any = None) -> EncodedBatch:
        """Called by the DataLoader's pin-memory thread: decode on the GPU there, and move the
        targets there, so the training thread finds the batch decoded."""
        if self._raw is not None and self.finish.device.type == "cuda":
            self._decode()
        return self

    def _decode(self) -> None:
        payload, targets = self._raw
        self._images = decode(payload, self.lengths, self.shape, self.finish.device)
        self._raw = (None, targets.to(self.finish.device, non_blocking=True))

    def tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self._done is None:
            if self._images is None:
                self._decode()
            self._done = self.finish(self._images, self._raw[1], self.params)
            self._raw = self._images = None  # let the worker's slot go
        return self._done


def from_arrays(
    arrays: list[np.ndarray],
    shape: tuple[int, ...],
    params: AugmentParams | None,
    finish: DeviceFinish,
) -> EncodedBatch:
    """An EncodedBatch over `[payload, lengths, targets]` (a worker's slot's views, say)."""
    payload, lengths, targets = arrays
    return EncodedBatch(
        torch.from_numpy(payload),
        lengths.tolist(),
        tuple(shape),
        torch.from_numpy(targets),
        params,
        finish,
    )


def decode_device(loader, name: Any, augment_device: Any) -> torch.device:
    """`decode_device` as a torch.device, once the pack is known to fit: a JPEG image field,
    one fixed target, a format whose shards give payloads, augment_device unset or the same
    device; else a one-line ValueError saying what would work."""
    device = device_of(name, "decode_device")
    if augment_device is not None and device_of(augment_device) != device:
        raise ValueError(
            f"decode_device={name!r} and augment_device={augment_device!r} differ: the batch "
            "is augmented where it is decoded, so give decode_device alone"
        )
    targets, dataset = loader.targets, loader.dataset
    field = dataset.field(targets.input)
    if field.encoding != "jpeg":
        raise ValueError(
            f"decode_device decodes JPEG images; this pack's {field.name} is stored "
            f"{field.encoding}: pack it with --encoding jpeg, or leave decode_device unset"
        )
    if targets.single is None:
        found = ", ".join((*targets.fixed, *targets.ragged)) or "none"
        raise ValueError(
            "decode_device reads packs of images and one target field (class ids or a "
            f"mask); this pack's targets are {found}: leave decode_device unset"
        )
    shards = getattr(loader.split.reader, "shards", None)
    if shards is None or not all(hasattr(s, "payloads_of") for s in shards):
        what = "a mixture" if shards is None else f"a {dataset.format} pack"
        raise ValueError(
            f"decode_device reads npy and TFRecord packs; this is {what}: leave "
            "decode_device unset to decode in the workers"
        )
    return device


def decode(
    payload: torch.Tensor, lengths: list[int], shape: tuple[int, ...], device: torch.device
) -> torch.Tensor:
    """JPEG payloads (one uint8 CPU tensor, `lengths` bytes each) as images `[B, *shape]` (an
    NHWC view) on `device`; a CodecError when one decodes to another shape."""
    parts = payload.split(lengths)
    if device.type == "cuda":
        io = _torchvision_io()
        mode = io.ImageReadMode.RGB if shape[-1] == 3 else io.ImageReadMode.GRAY
        decoded = io.decode_jpeg(list(parts), mode=mode, device=device)
        wrong = next((tuple(d.shape) for d in decoded if d.shape[1:] != shape[:2]), None)
        if wrong is not None:
            raise codec.CodecError(
                f"a JPEG decodes to {list(wrong)} (CHW), the manifest says {list(shape)}"
            )
        return torch.stack(decoded).permute(0, 2, 3, 1).reshape(len(lengths), *shape)
    images = np.empty((len(lengths), *shape), np.uint8)
    for row, part in zip(images, parts, strict=True):
        codec.decode_into(part.numpy(), row)
    return torch.from_numpy(images).to(device)


def _torchvision_io():
    """torchvision.io, whose decode_jpeg runs nvJPEG; a one-line ValueError where it does not
    import (torchvision missing, or built for another torch)."""
    try:
        import torchvision.io
    except Exception as error:
        reason = (str(error).strip() or type(error).__name__).splitlines()[0]
        raise ValueError(
            f'decode_device="cuda" decodes with torchvision.io.decode_jpeg (nvJPEG), and '
            f"torchvision does not import here ({reason}): install the torchvision build of "
            "this torch, or leave decode_device unset to decode in the workers"
        ) from None
    return torchvision.io
