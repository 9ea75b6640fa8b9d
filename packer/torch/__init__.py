"""`packer.torch`: PyTorch datasets over a pack (imports torch; `import packer` does not).

- `dataset`: `PackedDataset` (batch i by index) and `PackedIterable` (streamed over windows)
- `options`: their options, as frozen dataclasses
- `device`: batches augmented on the device where they are consumed (`augment_device=`)
- `pinning`: the DataLoader hand-off's slots page-locked for CUDA (`pin_slots`)
- `compat`: the one place that reads torch's internals, and the supported torch versions
"""

from __future__ import annotations

from .dataset import PackedDataset, PackedIterable
from .options import IterableOptions, TorchOptions
from .pinning import pin_slots

__all__ = ["IterableOptions", "PackedDataset", "PackedIterable", "TorchOptions", "pin_slots"]
