"""`packer.pack`: source -> samples -> plan -> shard tasks -> engine -> writers -> manifest.

`plan` decides everything (samples, order, shards, fingerprint), `convert` does a worker's
part, `schedule` runs shard tasks over an engine, `session` owns the output folder (lock,
resume or refuse, commit).
"""

from __future__ import annotations

import os
import warnings

from .. import engines
from ..options import with_signature
from ..reading.dataset import PackedDataset, open_dataset
from .options import DEFAULT_SHARD_BYTES, PLAN_OPTIONS, RUN_OPTIONS, by_stage
from .plan import PackPlan, make_plan
from .session import execute

__all__ = ["DEFAULT_SHARD_BYTES", "PackPlan", "execute", "make_plan", "pack"]


def pack(
    src: str | os.PathLike,
    out: str | os.PathLike | None = None,
    format: str = "npy",
    size: tuple[int, int] | int | None = None,
    **options,
) -> PackedDataset:
    """Pack SRC into OUT and return the opened dataset; resumes an interrupted pack of the same.

    `size` is (W, H) or one number for a square. `options` are the plan's (resize, split,
    classes, coco, ignore_class, ...), the run's (workers, engine, overwrite, ...), the
    engine's own (Ray: address, ray_cpus, retries) and the format's own (compression,
    encoding, ...); `help(packer.pack)` lists them with their defaults, `pack --help` explains
    each. A finished pack whose sources changed since is updated (its stale shards packed
    again), unless `update=False`: then it is left as it is, with a warning. `force` packs
    even when the output clearly exceeds the free space, and breaks a stale lock of a remote
    OUT. SRC and OUT may be URLs (s3://, gs://, ...).
    """
    stages = by_stage(options)
    plan = make_plan(src, out, format, size, **stages.plan)
    given = {"out": out, "format": format, "size": size, **options}
    shown = ", ".join(f"{k}={v!r}" for k, v in given.items() if v is not None)
    command = f"packer.pack({os.fspath(src)!r}{', ' if shown else ''}{shown})"
    data = execute(plan, stages.run, engine_options=stages.engine, command=command)
    if data.get("stale"):
        warnings.warn(
            f"{plan.out} is out of date ({data['changes']['text']}); left as it is (update=False)",
            stacklevel=2,
        )
    return open_dataset(plan.out)


with_signature(pack, (*PLAN_OPTIONS, *RUN_OPTIONS, *engines.all_options()))
