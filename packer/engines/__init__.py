"""Engines run a pack's shard tasks somewhere; they schedule, they never decide.

The plan fixes every shard's samples and bytes, so any engine gives byte-identical output.
An engine is given a `Converter` once (`start`), then runs its methods on tasks (`submit`,
returning a `concurrent.futures.Future`) in its workers, and stops (`stop`). Engines whose
workers share the parent's disk (`shares_disk`) get chunk tasks and then a finalise task per
shard; the others get one task per whole shard. A new engine is one module defining a class
with this interface plus one line in ENGINES.
"""

from __future__ import annotations

import importlib
import os
from concurrent.futures import Future
from typing import Any, Protocol

from ..errors import PackError

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


def cpu_count() -> int:
    """Cores this process may use (respects affinity masks and containers)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
