"""On-disk formats: each module writes and reads the bytes of one format, nothing else does.

A format module provides:

- `OPTION_SPECS`: its pack options, a tuple of `FormatOption` (name, default, accepted values,
  help); the command line offers them. `OPTIONS = defaults(OPTION_SPECS)`: name -> default
  (e.g. `{"compression": "none", "index": False}`), recorded in the manifest.
  `check_options(options)` raises ValueError for a value it cannot honour.
- `ChunkWriter(part_dir, task, fields, options)`: `write(record)` appends one sample (a dict
  field name -> array) for the chunk `task` (a `ChunkPosition`: shard, chunk number, first
  record) to its part file(s); `close()`. Runs in a worker.
- `finalize(job: ShardJob) -> list[FileInfo]`: joins the parts of `job.chunks` (chunk
  numbers, in order) into the shard's final files, atomically (`storage.write_atomic`), and
  removes the parts. Runs in a worker.
- `open_shard(root, split, shard, fields, options) -> ShardReader`: random access for the
  NumPy readers; `ShardReader.read_into(local, out)` copies records `local` (sorted indices
  into the shard) of every field into the arrays of `out`; `close()`; optionally
  `prefetch(start, stop)`, a hint that records start..stop-1 come next.

A new format is one module here plus its name in `KNOWN`. Format modules import nothing from
the packing or source-scanning side, and never TensorFlow at import time (workers load them).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Protocol

from ..schema import Field

KNOWN = ("npy", "tfrecord", "recordio")
FORMATS = tuple(n for n in KNOWN if importlib.util.find_spec(f"packer.formats.{n}") is not None)


def get(name: str) -> ModuleType:
    """The module of format `name`; a clear error for an unknown one."""
    if name not in FORMATS:
        raise ValueError(f"unknown format {name!r}; choose one of {', '.join(FORMATS)}")
    return importlib.import_module(f"packer.formats.{name}")


@dataclass(frozen=True)
class FormatOption:
    """One pack option of a format: `name` is its key in the options (and `--name` on the
    command line), `default` the value the manifest records when it is not given.

    The default's type says what the option takes: a bool is a flag; a str one of `choices`;
    an int an integer within `range` (inclusive). `help` says what it does, in a phrase.
    """

    name: str
    default: bool | int | str
    help: str
    choices: tuple[str, ...] = ()
    range: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if self.flag:
            fits = not self.choices and self.range is None
        elif isinstance(self.default, str):
            fits = self.default in self.choices and self.range is None
        else:
            fits = (
                not self.choices and self.range is not None and self.accepts_integer(self.default)
            )
        if not fits:
            raise TypeError(
                f"option {self.name!r}: a bool default takes nothing else, a str default one "
                f"of its choices, an int default a range around it; got {self!r}"
            )

    @property
    def flag(self) -> bool:
        """Whether the option is a switch (True/False)."""
        return isinstance(self.default, bool)

    def accepts_integer(self, value: object) -> bool:
        """Whether `value` is an integer (not a bool) within `range`."""
        return (
            self.range is not None
            and isinstance(value, int)
            and not isinstance(value, bool)
            and self.range[0] <= value <= self.range[1]
        )

    def check(self, value: object) -> None:
        """Raise ValueError unless `value` is one this option accepts."""
        if self.flag:
            if not isinstance(value, bool):
                raise ValueError(f"{self.name} must be true or false, not {value!r}")
        elif self.choices:
            if value not in self.choices:
                raise ValueError(
                    f"{self.name} must be one of {', '.join(self.choices)}, not {value!r}"
                )
        elif not self.accepts_integer(value):
            low, high = self.range or (None, None)
            raise ValueError(f"{self.name} must be an integer {low}..{high}, not {value!r}")


def defaults(specs: Sequence[FormatOption]) -> dict:
    """name -> default of each option: a format's `OPTIONS`, as the manifest records them."""
    return {spec.name: spec.default for spec in specs}


def check_values(specs: Sequence[FormatOption], options: Mapping) -> None:
    """Raise ValueError for the first option in `options` whose value its spec refuses."""
    for spec in specs:
        spec.check(options[spec.name])


def all_options() -> list[tuple[FormatOption, tuple[str, ...]]]:
    """Every format's options, once per name, with the formats that take it (registry order).

    Formats may share an option name only if it accepts the same values in each; the first
    one's help describes it.
    """
    found: dict[str, tuple[FormatOption, tuple[str, ...]]] = {}
    for name in FORMATS:
        for spec in get(name).OPTION_SPECS:
            if spec.name not in found:
                found[spec.name] = (spec, (name,))
                continue
            first, names = found[spec.name]
            if (first.flag, first.choices, first.range) != (spec.flag, spec.choices, spec.range):
                raise TypeError(
                    f"option {spec.name!r}: {name} and {names[0]} accept different values"
                )
            found[spec.name] = (first, (*names, name))
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
