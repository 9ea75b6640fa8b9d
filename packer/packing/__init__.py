"""`packer.pack`: source -> samples -> plan -> shard tasks -> engine -> writers -> manifest.

`plan` decides everything (samples, order, shards, fingerprint), `convert` does a worker's
part, `schedule` runs shard tasks over an engine, `session` owns the output folder (lock,
resume or refuse, commit).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping

from .. import engines
from ..errors import PackError
from ..fields import FieldKind
from ..flags import flag
from ..options import with_signature
from ..reading.dataset import PackedDataset, open_dataset
from .options import DEFAULT_SHARD_BYTES, PLAN_OPTIONS, RUN_OPTIONS, by_stage
from .plan import PackPlan, make_plan
from .samples import describe, plan_samples
from .session import execute, for_overwrite

__all__ = ["DEFAULT_SHARD_BYTES", "PackPlan", "execute", "for_overwrite", "make_plan", "pack"]


def pack(
    src,
    out: str | os.PathLike | None = None,
    format: str = "npy",
    size: tuple[int, int] | int | None = None,
    fields: Mapping[str, str | FieldKind] | None = None,
    dry_run: bool = False,
    **options,
) -> PackedDataset | str:
    """Pack SRC into OUT and return the opened dataset; resumes an interrupted pack of the same.

    SRC is a folder, a list file or a URL, or Python samples: a sequence of dicts (paths,
    bytes, arrays, numbers, strings) whose keys become the fields, each of the kind `fields`
    names (a kind name or a `packer.fields.FieldKind`) or inferred from the first sample.
    `dry_run` returns what would be packed, as text, and packs nothing. `size` is (W, H) or
    one number for a square. `options` are the plan's (resize, split, classes, coco,
    ignore_class, ...), the run's (workers, engine, overwrite, ...), the engine's own (Ray:
    address, ray_cpus, retries) and the format's own (compression, encoding, ...);
    `help(packer.pack)` lists them with their defaults, `pack --help` explains each. A
    finished pack whose sources changed since is updated (its stale shards packed again),
    unless `update=False`: then it is left as it is, with a warning. `force` packs even when
    the output clearly exceeds the free space, and breaks a stale lock of a remote OUT. SRC
    and OUT may be URLs (s3://, gs://, ...).
    """
    stages = by_stage(options)
    given = {"out": out, "format": format, "size": size, **options}
    if isinstance(src, (str, os.PathLike)):
        if fields is not None:
            raise PackError(f"{flag('fields')} applies to Python samples, not to a source folder")
        plan = make_plan(src, out, format, size, **stages.plan)
        shown_src = repr(os.fspath(src))
    else:
        plan = plan_samples(src, out, format, size, fields, **stages.plan)
        shown_src = f"<{len(plan.scan.samples)} samples>"
        given["fields"] = fields and {k: getattr(v, "name", v) for k, v in fields.items()}
    if stages.run.overwrite:
        plan = for_overwrite(plan)  # what the run packs, shown by the dry run too
    if dry_run:
        return describe(plan)
    shown = ", ".join(f"{k}={v!r}" for k, v in given.items() if v is not None)
    command = f"packer.pack({shown_src}{', ' if shown else ''}{shown})"
    data = execute(plan, stages.run, engine_options=stages.engine, command=command)
    if data.get("stale"):
        warnings.warn(
            f"{plan.out} is out of date ({data['changes']['text']}); left as it is (update=False)",
            stacklevel=2,
        )
    return open_dataset(plan.out)


with_signature(pack, (*PLAN_OPTIONS, *RUN_OPTIONS, *engines.all_options()))
