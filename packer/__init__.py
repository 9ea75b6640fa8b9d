"""packer: decode, resize and label images once; read them back at memory speed.

The framework adapters (`packer.keras`, `packer.tf`, `packer.torch`) import their framework,
so they load lazily: `import packer` stays cheap, and converter workers never pay for
TensorFlow or torch.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"
__all__ = ["Augment", "Mixture", "Stream", "__version__", "open", "pack", "parallel"]

_LAZY = {
    "open": ("packer.reading.dataset", "open_dataset"),
    "pack": ("packer.packing", "pack"),
    "keras": ("packer.keras", None),
    "tf": ("packer.tf", None),
    "torch": ("packer.torch", None),
    "fields": ("packer.fields", None),
    "Augment": ("packer.augment", "Augment"),
    "Mixture": ("packer.reading.mixture", "Mixture"),
    "Stream": ("packer.reading.mixture", "Stream"),
    "parallel": ("packer.keras.parallel", "parallel"),
    "recordio": ("packer.recordio", None),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'packer' has no attribute {name!r}")
    module_name, attr = _LAZY[name]
    module = importlib.import_module(module_name)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value
    return value
