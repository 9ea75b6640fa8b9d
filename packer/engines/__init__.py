"""Engines run a pack's shard tasks somewhere; they schedule, they never decide.

The plan fixes every shard's samples and bytes, so any engine gives byte-identical output.
An engine is given a `Converter` once (`start`), then runs its methods on tasks (`submit`,
returning a `concurrent.futures.Future`) in its workers, and stops (`stop`). Engines whose
workers share the parent's disk (`shares_disk`) get chunk tasks and then a finalise task per
shard; the others get one task per whole shard. A new engine is one module defining a class
with this interface plus one line in ENGINES; its own pack options are the module's `OPTIONS`
(`packer.options.declared` of a frozen options dataclass), which `pack --help` and
`packer.pack()` take from here.
"""

from __future__ import annotations

import functools
import importlib
import os
from concurrent.futures import Future
from typing import Any, Protocol

from ..errors import PackError
from ..flags import flag, name_of
from ..options import resolve

ENGINES = {  # name -> "module:class"
    "local": "packer.engines.local:LocalEngine",
    "ray": "packer.engines.ray:RayEngine",
}


class Engine(Protocol):
    """Runs converter methods on tasks in workers."""

    name: str
    workers: int  # tasks that run at once
    shares_disk: bool  # workers write into the parent's output folder (chunk + finalise tasks)

    def start(self, converter: Any) -> None:
        """Start the workers and hand each the converter."""

    def submit(self, method: str, *args: Any) -> Future:
        """Run `converter.<method>(*args)` in a worker; its result or exception in the Future."""

    def stop(self, cancel: bool = False) -> None:
        """Stop the workers: after the tasks in flight, or at once (`cancel`, e.g. Ctrl-C)."""


def create(name: str = "local", **options: Any) -> Engine:
    """An engine by name (`local`, ...), with its own options (e.g. `workers`)."""
    if name not in ENGINES:
        raise PackError(f"unknown engine {name!r}; choose one of {', '.join(ENGINES)}")
    module_name, class_name = ENGINES[name].split(":")
    return getattr(importlib.import_module(module_name), class_name)(**options)


@functools.cache
def all_options() -> tuple:
    """Every engine's own options (`OPTIONS` of each engine module), in registry order."""
    found: list = []
    for target in ENGINES.values():
        found += getattr(importlib.import_module(target.split(":")[0]), "OPTIONS", ())
    return tuple(found)


def option_names() -> set[str]:
    """The names of every engine's own options."""
    return {o.name for o in all_options()}


def options_for(engine: str, given: dict[str, Any]) -> dict[str, Any]:
    """The chosen engine's own options from `given` (checked, defaults filled); an option of
    another engine that was given is refused."""
    mine = [o for o in all_options() if o.engine == engine]
    foreign = [
        o.name
        for o in all_options()
        if o.engine != engine and given.get(o.name) not in (None, o.default)
    ]
    if foreign:
        owners = sorted({o.engine for o in all_options() if o.name in foreign})
        verb = "applies" if len(foreign) == 1 else "apply"
        raise PackError(
            f"{' and '.join(name_of(n) for n in foreign)} {verb} to "
            f"{' or '.join(flag('engine', e) for e in owners)} only"
        )
    return resolve(mine, {k: v for k, v in given.items() if v is not None})


def cpu_count() -> int:
    """Cores this process may use (respects affinity masks and containers)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
