"""`packer.torch`'s options: the readers' (`reading.options`) and torch's own, each a field of a
frozen dataclass whose order, defaults and types `PackedDataset` and `PackedIterable` write in
their own signatures (a test holds them equal)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..options import again, option
from ..reading.options import LoaderOptions

if TYPE_CHECKING:
    import torch  # the types of two options; only packer.torch imports torch itself

LAYOUTS = ("NHWC", "NCHW")
TARGET_DTYPES = ("uint8", "int16", "int32", "int64", "float16", "float32")


@dataclass(frozen=True)
class TorchOptions(LoaderOptions):
    """`packer.torch`'s own options, besides the readers' (`reading.options`); unless given,
    the ranks come from torch.distributed (see device.distributed)."""

    rank: int | None = again(
        LoaderOptions, "rank", None, shown="torch.distributed's rank when it is initialised, else 0"
    )
    world_size: int | None = again(
        LoaderOptions, "world_size", None, shown="torch.distributed's world size, else 1"
    )
    layout: str = option(
        "NHWC",
        '"NCHW": images as a channels_last `[B,3,H,W]` view of the same bytes.',
        kind="choice",
        choices=LAYOUTS,
    )
    augment_device: str | torch.device | None = option(
        None,
        'Where `augment` runs ("cuda"): the workers read raw batches, each arriving as a '
        "DeviceBatch that unpacking warps there in one batched call.",
        shown="the workers, with NumPy/OpenCV",
    )
    decode_device: str | torch.device | None = option(
        None,
        'Where a JPEG-encoded pack\'s images are decoded ("cuda": nvJPEG through torchvision, '
        "a batch at a time): the workers hand over the payloads, a tenth of the pixels' bytes, "
        "and augment, normalize and one_hot run on that device after the decode.",
        shown="the workers, with libjpeg-turbo",
    )
    target_dtype: str | torch.dtype | None = option(
        None,
        f"The targets' dtype, one of {', '.join(TARGET_DTYPES)} (uint8 keeps the stored "
        "bytes, an eighth of int64's; with augment_device converted on the device).",
        shown="int64, float32 with one_hot",
    )


@dataclass(frozen=True)
class IterableOptions(TorchOptions):
    """PackedIterable's: PackedDataset's, shuffling in windows by default."""

    shuffle: bool | str = again(LoaderOptions, "shuffle", "windows")
