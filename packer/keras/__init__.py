"""`packer.keras`: Keras readers and callbacks over a pack (imports Keras; `import packer`
does not).

- `sequence`: `PackedSequence`, a `keras.utils.PyDataset` over a pack, and its options
- `backup`: `BackupAndRestore`, Keras' callback plus the reader's place in the epoch
- `parallel`: `packer.parallel`, any Sequence's batches from packer's worker processes
- `compat`: the one place that reads Keras' internals, and the supported Keras versions
"""

from __future__ import annotations

from .backup import BackupAndRestore
from .sequence import PackedSequence, SequenceOptions

__all__ = ["BackupAndRestore", "PackedSequence", "SequenceOptions"]
