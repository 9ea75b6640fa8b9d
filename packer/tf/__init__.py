"""`packer.tf`: `tf.data` datasets over a pack (imports TensorFlow; `import packer` does not).

- `tfdata`: `dataset()`, streamed or random-access, and its options (`TfOptions`)
- `indexed`: the random-access source, each batch read by packer's shard readers
- `compiled`: the compiled batch read of npy packs (a tf.data source in C++, `ops/`) and its build
"""

from __future__ import annotations

from .tfdata import TfOptions, dataset

__all__ = ["TfOptions", "dataset"]
