"""The Ray engine: shard tasks as Ray tasks, on a local Ray or on a cluster.

Without an address it starts a Ray instance on this machine (`ray_cpus` CPUs, default: the
cores), so it works on a laptop; with one (`auto`, `ray://HOST:PORT`, `HOST:PORT`) it joins
that cluster. A process that has already called `ray.init` keeps its own Ray: the engine
uses it and leaves it running.

The converter is shipped once (`ray.put`) and kept by each worker process. When every node
of the Ray is this machine, workers share the parent's disk and get chunk tasks (as the
local engine does); otherwise each task is a whole shard, written in the worker's own
scratch folder and published whole, so both source and OUT must then be URLs (plain paths
are refused: packer cannot know that every node mounts them). A task that fails is retried
(`retries`; a crashed worker, or an I/O error such as a dropped connection); a user error
(a PackError: bad labels, missing credentials) is not retried. A shard that still fails
stops the pack with its name and cause and leaves nothing half-written, so the same command
resumes. Stopping with `cancel` (Ctrl-C) cancels the tasks in flight.
"""

from __future__ import annotations

import contextlib
import logging
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from .. import storage
from ..errors import PackError
from ..options import Options, declared, option
from ..processes import one_opencv_thread
from . import cpu_count


@dataclass(frozen=True)
class RayOptions(Options):
    """The engine's own pack options; `pack --help` shows them through the registry."""

    address: str | None = option(
        None,
        "ray: the cluster to join (auto, ray://HOST:PORT).",
        shown="start a local Ray",
        engine="ray",
    )
    ray_cpus: int | None = option(
        None,
        "ray: CPUs of the local Ray.",
        kind="int",
        range=(1, None),
        shown="--workers, else the cores",
        engine="ray",
    )
    retries: int = option(
        3,
        "ray: tries again a shard task that failed (a lost worker, an I/O error).",
        kind="int",
        range=(0, None),
        engine="ray",
    )


OPTIONS = declared(RayOptions)

RETRIED = (OSError, ConnectionError, TimeoutError)  # transient failures worth another try
_converters: dict[str, Any] = {}  # in each worker: the converters it has received, by ref


class RayEngine:
    """Shard tasks on Ray: a local instance, or the cluster at `address`.

    `whole_shards` gives one task per shard even where workers share the disk (as on a
    cluster of several machines, where that is the only choice).
    """

    name = "ray"

    def __init__(
        self,
        workers: int | None = None,
        address: str | None = None,
        ray_cpus: int | None = None,
        retries: int = 3,
        whole_shards: bool = False,
    ) -> None:
        if retries < 0:
            raise PackError(f"--retries must be 0 or more, got {retries}")
        if address is not None and ray_cpus is not None:
            raise PackError(
                "--ray-cpus starts a local Ray; it cannot size the cluster at --address"
            )
        self.address = address
        self.ray_cpus = ray_cpus or workers
        self.retries = retries
        self.workers = self.ray_cpus or cpu_count()
        self.shares_disk = address is None and not whole_shards
        self.whole_shards = whole_shards  # one task per shard even when the disk is shared
        self._owned = False
        self._ref = None
        self._task = None
        self._running: set = set()

    def start(self, converter: Any) -> None:
        ray = _import_ray()
        if not ray.is_initialized():
            try:
                ray.init(
                    address=self.address,
                    num_cpus=None if self.address else self.workers,
                    include_dashboard=False,
                    logging_level=logging.WARNING,
                    log_to_driver=False,
                    configure_logging=True,
                )
            except (ConnectionError, RuntimeError, ValueError) as exc:
                where = self.address or "a local Ray"
                raise PackError(f"cannot start or reach Ray at {where}: {exc}") from None
            self._owned = True
        self.workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        one_host = _one_host(ray)
        if not one_host:
            _check_paths(converter)
        self.shares_disk = one_host and not self.whole_shards
        self._ref = ray.put(converter)
        self._task = ray.remote(_run).options(
            num_cpus=1, max_retries=self.retries, retry_exceptions=list(RETRIED)
        )

    def submit(self, method: str, *args: Any) -> Future:
        assert self._task is not None, "start() the engine first"
        ref = self._task.remote([self._ref], method, *args)
        self._running.add(ref)
        result: Future = Future()
        shard = getattr(args[0], "shard", "?") if args else "?"

        def done(future: Future) -> None:
            self._running.discard(ref)
            exc = future.exception()
            if exc is None:
                outcome = future.result()
                if isinstance(outcome, _UserError):
                    result.set_exception(outcome.error)
                else:
                    result.set_result(outcome)
                return
            cause = getattr(exc, "cause", None) or exc
            result.set_exception(
                PackError(
                    f"shard {shard}: Ray task {method} failed "
                    f"(tried {self.retries + 1} times): {type(cause).__name__}: {cause}"
                )
            )

        ref.future().add_done_callback(done)
        return result

    def stop(self, cancel: bool = False) -> None:
        if self._task is None:
            return
        ray = _import_ray()
        if cancel and self._running:
            # Only tasks still running: cancelling one that Ray is completing can abort the
            # driver (Ray 2.60 checks that a completed task was pending).
            running = list(self._running)
            _, running = ray.wait(running, num_returns=len(running), timeout=0)
            for ref in running:
                with contextlib.suppress(Exception):  # finished meanwhile, or Ray gone
                    ray.cancel(ref, force=True)
        self._running.clear()
        self._task = self._ref = None
        if self._owned:
            ray.shutdown()
            self._owned = False


class _UserError:
    """A PackError raised in a task: returned, not raised, so Ray does not retry it."""

    def __init__(self, error: PackError) -> None:
        self.error = error


def _run(holder: list, method: str, *args: Any) -> Any:
    """In a Ray worker: the converter (fetched once per worker) runs `method` on the task."""
    import ray

    key = holder[0].hex()
    converter = _converters.get(key)
    if converter is None:
        one_opencv_thread()  # the tasks are the parallelism
        converter = _converters[key] = ray.get(holder[0])
    try:
        return getattr(converter, method)(*args)
    except PackError as exc:
        return _UserError(exc)


def _import_ray():
    try:
        import ray
    except ImportError:
        raise PackError("--engine ray needs Ray: pip install 'packer[ray]'") from None
    return ray


def _one_host(ray) -> bool:
    """Whether every alive node of the Ray is this machine (then workers share its disk)."""
    here = ray.util.get_node_ip_address()
    return all(n["NodeManagerAddress"] == here for n in ray.nodes() if n.get("Alive"))


def _check_paths(converter: Any) -> None:
    """Workers on other machines can read and write only URLs."""
    config = getattr(converter, "config", None)
    for what, path in (
        ("SRC", getattr(config, "root", None)),
        ("--out", getattr(config, "out", None)),
    ):
        if path is not None and not storage.is_url(path):
            raise PackError(
                f"the Ray cluster has nodes other than this machine, so {what} must be a URL "
                f"that every node can reach (s3://, gs://, ...), not {path}"
            )
