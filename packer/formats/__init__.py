"""On-disk formats: each module writes and reads the bytes of one format, nothing else does.

A format module provides:

- `FORMAT_OPTIONS`: its pack options, a frozen dataclass of `packer.options` (each field a
  name, default, accepted values and help); the command line offers them.
  `OPTIONS = defaults(FORMAT_OPTIONS)`: name -> default (e.g. `{"compression": "none",
  "index": False}`), recorded in the manifest. `check_options(options)` raises ValueError for
  a value it cannot honour.
- Every format declares `encoding.EncodingOptions` (`--encoding raw|jpeg|png`, `--quality`):
  the plan gives the encoding to the image fields (`Field.encoding`); `check_fields(fields,
  options)` refuses fields the format cannot store so. npy and tfrecord leave the two out of
  `OPTIONS` (recorded only when given: their older manifests stay as they were); recordio has
  always recorded them. Optional `stored_fields(fields, options)`: the fields with the
  encoding each is stored in, for a format that encodes a field its `Field.encoding` leaves
  raw (RecordIO PNG-encodes the mask of an encoded payload); the plan's estimate of the stored
  bytes (`--shard-size`) encodes each field so.
- `ChunkWriter(part_dir, task, fields, options)`: `write(record)` appends one sample (a dict
  field name -> array) for the chunk `task` (a `ChunkPosition`: shard, chunk number, first
  record) to its part file(s); `close()`. Runs in a worker.
- `finalize(job: ShardJob) -> list[FileInfo]`: joins the parts of `job.chunks` (chunk
  numbers, in order) into the shard's final files, atomically (`storage.write_atomic`), and
  removes the parts. Runs in a worker.
- `open_shard(root, split, shard, fields, options) -> ShardReader`: random access for the
  NumPy readers; `ShardReader.read_into(local, out)` copies records `local` (sorted indices
  into the shard) of every field into the arrays of `out`; `close()`; optionally
  `prefetch(start, stop)`, a hint that records start..stop-1 come next. `read_into` decodes
  encoded fields into `out` itself; a reader with `decodes = True` says so, so that the
  gather splits even a small batch among its threads (`reading.gather`).

A new format is one module here plus its name in `KNOWN`. Format modules import nothing from
the packing or source-scanning side, and never TensorFlow at import time (workers load them).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Protocol

from ..options import Option, Options, declared
from ..schema import Field
from . import encoding  # noqa: F401 (formats.encoding: the image fields' encoding)

KNOWN = ("npy", "tfrecord", "recordio")
FORMATS = tuple(n for n in KNOWN if importlib.util.find_spec(f"packer.formats.{n}") is not None)


def get(name: str) -> ModuleType:
    """The module of format `name`; a clear error for an unknown one."""
    if name not in FORMATS:
        raise ValueError(f"unknown format {name!r}; choose one of {', '.join(FORMATS)}")
    return importlib.import_module(f"packer.formats.{name}")


def accepted(module: ModuleType) -> set[str]:
    """The names of the options a format module takes (`FORMAT_OPTIONS`), recorded by default
    (`OPTIONS`) or only when given (the image encoding's, see `encoding`)."""
    return {o.name for o in declared(module.FORMAT_OPTIONS)}


def defaults(options: type[Options]) -> dict:
    """name -> default of each option: a format's `OPTIONS`, as the manifest records them."""
    return {o.name: o.default for o in declared(options)}


def check_values(options: type[Options], given: Mapping) -> None:
    """Raise ValueError (an `OptionError`) for the first value in `given` that its option
    refuses."""
    for o in declared(options):
        o.check(given[o.name])


def all_options() -> list[tuple[Option, tuple[str, ...]]]:
    """Every format's options, once per name, with the formats that take it (registry order).

    Formats may share an option name only if it accepts the same values in each; the first
    one's help describes it.
    """
    found: dict[str, tuple[Option, tuple[str, ...]]] = {}
    for name in FORMATS:
        for o in declared(get(name).FORMAT_OPTIONS):
            if o.name not in found:
                found[o.name] = (o, (name,))
                continue
            first, names = found[o.name]
            if (first.kind, first.choices, first.range) != (o.kind, o.choices, o.range):
                raise TypeError(f"option {o.name!r}: {name} and {names[0]} accept different values")
            found[o.name] = (first, (*names, name))
    return list(found.values())


class ChunkPosition(Protocol):
    """Where a chunk's records go: what a ChunkWriter needs of the packing side's task."""

    shard: str  # shard name, e.g. train-00000-of-00003
    chunk: int  # the chunk's number within its shard
    start: int  # the shard-local index of the chunk's first record


def part_path(part_dir, shard: str, chunk: int, suffix: str):
    """Where a chunk's part file for `suffix` (a field name or 'records') lives."""
    return part_dir / f"{shard}.{chunk:05d}.{suffix}.part"


@dataclass(frozen=True)
class ShardJob:
    """A shard whose chunks are all written: what a format needs to make its final files."""

    out: Path  # the pack folder
    shard: str  # shard name, e.g. train-00000-of-00003
    split: str
    chunks: tuple[int, ...]  # chunk numbers, in record order
    fields: tuple[Field, ...]
    part_dir: Path
    options: dict  # the format's own options
    sources: tuple[tuple[str | None, ...], ...]  # [image, mask] source paths, per record

    @property
    def count(self) -> int:
        return len(self.sources)
