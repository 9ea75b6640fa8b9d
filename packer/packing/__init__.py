"""`packer.pack`: source -> samples -> plan -> shard tasks -> engine -> writers -> manifest.

`plan` decides everything (samples, order, shards, fingerprint), `convert` does a worker's
part, `schedule` runs shard tasks over an engine, `session` owns the output folder (lock,
resume or refuse, commit).
"""

from __future__ import annotations

import os
import warnings

from ..errors import PackError
from ..flags import flag, name_of
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
    address: str | None = None,
    ray_cpus: int | None = None,
    retries: int = 3,
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
    the output clearly exceeds the free space, and breaks a stale lock of a remote OUT.
    SRC and OUT may be URLs (s3://, gs://, ...). `engine="ray"` runs the shard tasks on Ray:
    a local Ray of `ray_cpus` CPUs, or the cluster at `address`, retrying a failed task
    `retries` times.
    """
    check_keywords(options)
    engine_options = engine_options_for(engine, address, ray_cpus, retries)
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
        engine_options=engine_options,
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


def engine_options_for(
    engine: str, address: str | None, ray_cpus: int | None, retries: int
) -> dict:
    """The engine's own options from pack's arguments; Ray's options refused elsewhere."""
    if engine == "ray":
        return {"address": address, "ray_cpus": ray_cpus, "retries": retries}
    if address is not None or ray_cpus is not None:
        raise PackError(
            f"{name_of('address')} and {name_of('ray_cpus')} apply to {flag('engine', 'ray')} only"
        )
    return {}
