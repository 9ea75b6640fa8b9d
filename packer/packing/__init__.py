"""`packer.pack`: source -> samples -> plan -> shard tasks -> engine -> writers -> manifest.

`plan` decides everything (samples, order, shards, fingerprint), `convert` does a worker's
part, `schedule` runs shard tasks over an engine, `session` owns the output folder (lock,
resume or refuse, commit).
"""

from __future__ import annotations

import os

from ..reading.dataset import PackedDataset, open_dataset
from .plan import DEFAULT_SHARD_BYTES, PackPlan, make_plan
from .session import execute

__all__ = ["DEFAULT_SHARD_BYTES", "PackPlan", "execute", "make_plan", "pack"]


def pack(
    src: str | os.PathLike,
    out: str | os.PathLike | None = None,
    format: str = "npy",
    size: tuple[int, int] | int | None = None,
    *,
    workers: int | None = None,
    engine: str = "local",
    overwrite: bool = False,
    progress: bool = False,
    strict: bool = False,
    max_rejects: int | None = None,
    **options,
) -> PackedDataset:
    """Pack SRC into OUT and return the opened dataset; resumes an interrupted pack of the same.

    `size` is (W, H) or one number for a square; `options` are make_plan's (resize,
    interpolation, split, classes, ...) and the format's own (compression, encoding, ...).
    """
    plan = make_plan(src, out, format, size, **options)
    execute(plan, workers, overwrite, progress, strict, max_rejects, engine)
    return open_dataset(plan.out)
