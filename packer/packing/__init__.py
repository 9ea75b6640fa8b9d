"""`packer.pack`: source -> samples -> plan -> shard tasks -> engine -> writers -> manifest.

`plan` decides everything (samples, order, shards, fingerprint), `convert` does a worker's
part, `schedule` runs shard tasks over an engine, `session` owns the output folder (lock,
resume or refuse, commit).
"""

from __future__ import annotations

import os

from ..errors import PackError
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
    address: str | None = None,
    ray_cpus: int | None = None,
    retries: int = 3,
    force: bool = False,
    overwrite: bool = False,
    progress: bool = False,
    strict: bool = False,
    max_rejects: int | None = None,
    **options,
) -> PackedDataset:
    """Pack SRC into OUT and return the opened dataset; resumes an interrupted pack of the same.

    `size` is (W, H) or one number for a square; `options` are make_plan's (resize,
    interpolation, split, classes, ...) and the format's own (compression, encoding, ...).
    SRC and OUT may be URLs (s3://, gs://, ...). `engine="ray"` runs the shard tasks on Ray:
    a local Ray of `ray_cpus` CPUs, or the cluster at `address`, retrying a failed task
    `retries` times. `force` breaks a stale lock of a remote OUT.
    """
    engine_options = engine_options_for(engine, address, ray_cpus, retries)
    plan = make_plan(src, out, format, size, **options)
    execute(plan, workers, overwrite, progress, strict, max_rejects, engine, engine_options, force)
    return open_dataset(plan.out)


def engine_options_for(
    engine: str, address: str | None, ray_cpus: int | None, retries: int
) -> dict:
    """The engine's own options from pack's arguments; Ray's options refused elsewhere."""
    if engine == "ray":
        return {"address": address, "ray_cpus": ray_cpus, "retries": retries}
    if address is not None or ray_cpus is not None:
        raise PackError("--address and --ray-cpus apply to --engine ray only")
    return {}
