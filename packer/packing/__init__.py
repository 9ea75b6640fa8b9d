"""`packer.pack`: source -> samples -> plan -> shard tasks -> engine -> writers -> manifest.

`plan` decides everything (samples, order, shards, fingerprint), `convert` does a worker's
part, `schedule` runs shard tasks over an engine, `session` owns the output folder (lock,
resume or refuse, commit).
"""

from __future__ import annotations

import os
import warnings

from ..reading.dataset import PackedDataset, open_dataset
from .plan import DEFAULT_SHARD_BYTES, PackPlan, check_keywords, make_plan
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
    update: bool = True,
    force: bool = False,
    **options,
) -> PackedDataset:
    """Pack SRC into OUT and return the opened dataset; resumes an interrupted pack of the same.

    `size` is (W, H) or one number for a square; `options` are make_plan's (resize,
    interpolation, split, classes, ...) and the format's own (compression, encoding, ...).
    A finished pack whose sources changed since is updated (its stale shards packed again),
    unless `update=False`: then it is left as it is, with a warning. `force` packs even when
    the output clearly exceeds the free space.
    """
    check_keywords(options)
    plan = make_plan(src, out, format, size, **options)
    given = {"out": out, "format": format, "size": size, **options}
    shown = ", ".join(f"{k}={v!r}" for k, v in given.items() if v is not None)
    command = f"packer.pack({os.fspath(src)!r}{', ' if shown else ''}{shown})"
    data = execute(
        plan,
        workers,
        overwrite,
        progress,
        strict,
        max_rejects,
        engine,
        update=update,
        force=force,
        command=command,
    )
    if data.get("stale"):
        warnings.warn(
            f"{plan.out} is out of date ({data['changes']['text']}); left as it is (update=False)",
            stacklevel=2,
        )
    return open_dataset(plan.out)
