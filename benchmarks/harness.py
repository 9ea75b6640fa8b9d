"""What every benchmark here shares: warm (or evict) the page cache, time a step for seconds,
run contenders side by side in interleaved rounds and pair them as per-round ratios, describe
the machine, print a Markdown table, and count CPU time across forked processes.

Standard library only at import, so that scripts running in the peers' environment can import
it too; the few helpers for packer's own reading workload import packer when called.
docs/design.md's "Measuring" says why: ratios within one run, workloads that last seconds, the
page cache state named beside every number.
"""

from __future__ import annotations

import itertools
import json
import multiprocessing
import os
import platform
import re
import resource
import statistics
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

SIZE = (480, 352)  # (W, H) of the segmentation samples the reading benchmarks read
CAMVID = Path(__file__).resolve().parents[2] / "shared" / "data" / "camvid"

Step = Callable[[], int]  # does some work, returns how many units (images, batches, bytes) it did


def files_of(paths: Iterable[str | Path]) -> list[Path]:
    """Every file under `paths` (files as given, folders walked), in a stable order."""
    found: list[Path] = []
    for path in map(Path, paths):
        found.extend(sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path])
    return found


def warm(*paths: str | Path | Iterable[str | Path]) -> int:
    """Read files (folders walked) once so that the timed run finds them in the page cache;
    the bytes read. Call it right before the measurement: idle pages get evicted in ~30 s."""
    total = 0
    for path in files_of(_flat(paths)):
        with open(path, "rb") as f:
            while chunk := f.read(1 << 24):
                total += len(chunk)
    return total


def evict(*paths: str | Path | Iterable[str | Path]) -> None:
    """Drop files (folders walked) from the page cache, for a cold-cache measurement."""
    for path in files_of(_flat(paths)):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def _flat(paths: tuple) -> list:
    """warm("a", "b") and warm(["a", "b"]) alike."""
    flat: list = []
    for p in paths:
        flat.extend([p] if isinstance(p, (str, Path)) else p)
    return flat


def linked_copy(src: Path, dest: Path, repeat: int, suffixes: Iterable[str] | None = None) -> Path:
    """`src`'s tree with every file hard-linked `repeat` times under new names (.csv, .txt and
    .json once, under their own names), so a pack runs for seconds on the same bytes; with
    `suffixes`, only the files of those suffixes."""
    wanted = None if suffixes is None else {s.lower() for s in suffixes}
    for path in sorted(src.rglob("*")):
        if not path.is_file() or (wanted is not None and path.suffix.lower() not in wanted):
            continue
        rel = path.relative_to(src)
        (dest / rel.parent).mkdir(parents=True, exist_ok=True)
        if path.suffix.lower() in {".csv", ".txt", ".json"}:
            os.link(path, dest / rel)
            continue
        for k in range(repeat):
            os.link(path, dest / rel.parent / f"r{k}_{rel.name}")
    return dest


def endless(make_epoch: Callable[[int], Iterable]) -> Iterator[int]:
    """Batch sizes of epoch after epoch of (images, ...) batches; `make_epoch` gets the epoch
    number (for set_epoch). `endless(f).__next__` is a step for `side_by_side`."""
    epoch = 0
    while True:
        for batch in make_epoch(epoch):
            yield len(batch[0])
        epoch += 1


def run_for(step: Step, seconds: float, warmup: int = 0) -> float:
    """Units per second of `step`, repeated until `seconds` passed (at least once), after
    `warmup` untimed calls (start-up: workers, graphs, first reads)."""
    for _ in range(warmup):
        step()
    units, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds or units == 0:
        units += step()
    return units / elapsed


def timed(function: Callable[[], object]) -> float:
    """Wall seconds of one call."""
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def rounds(step: Step, seconds: float, count: int) -> list[float]:
    """`count` rates of `step`, each over `seconds`."""
    return [run_for(step, seconds) for _ in range(count)]


def rotate(names: Sequence[str], r: int) -> list[str]:
    """`names` starting at position r: each round runs the contenders in another order."""
    k = r % len(names) if names else 0
    return [*names[k:], *names[:k]]


def side_by_side(
    contenders: Mapping[str, Callable],
    seconds: float,
    count: int,
    before_each: Callable[[], object] | None = None,
    measure: Callable[[Step, float], float] = run_for,
    warmup: int = 0,
) -> dict[str, list[float]]:
    """Per contender, `count` rates measured in interleaved rounds (every contender once per
    round, the order rotating) so that the machine's noise hits all of them alike.
    `before_each` runs before every timed run (e.g. warm the page cache again); `warmup`
    untimed steps start each run. A custom `measure(contender, seconds)` may time contenders
    of another shape (a function of the seconds, an epoch timed once)."""
    names = list(contenders)
    rates: dict[str, list[float]] = {name: [] for name in names}
    for r in range(count):
        for name in rotate(names, r):
            if before_each is not None:
                before_each()
            for _ in range(warmup):
                contenders[name]()
            rates[name].append(measure(contenders[name], seconds))
    return rates


def ratios(rates: Mapping[str, Sequence[float]], base: str) -> dict[str, list[float]]:
    """Per contender, its rate over `base`'s in the same round (round i paired with round i)."""
    base_rates = rates[base]
    return {
        name: [mine / theirs for mine, theirs in zip(values, base_rates, strict=True)]
        for name, values in rates.items()
    }


def median_ratios(rates: Mapping[str, Sequence[float]], base: str) -> dict[str, float]:
    """The median of each contender's per-round ratios over `base`."""
    return {name: statistics.median(r) for name, r in ratios(rates, base).items()}


def spread(values: Sequence[float], digits: int = 2) -> str:
    """'median (min-max)' of a few values, for a table cell."""
    if len(values) == 1:
        return f"{values[0]:,.{digits}f}"
    return (
        f"{statistics.median(values):,.{digits}f} "
        f"({min(values):,.{digits}f}-{max(values):,.{digits}f})"
    )


def machine() -> str:
    """CPU model and core count (of the machine, whatever this process is pinned to)."""
    model = platform.processor() or "unknown CPU"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return f"{model}, {os.cpu_count()} cores"


def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A Markdown table: columns of numbers (or of cells that start with one, like "1.2 x")
    right-aligned; floats to 2, 1 or 0 decimals (below 10, below 100, above), thousands
    separated."""
    rows = [list(row) for row in rows]
    numeric = [
        any(row[i] != "" for row in rows) and all(_numeric(row[i]) for row in rows)
        for i in range(len(headers))
    ]
    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---:" if n else "---" for n in numeric) + "|",
    ]
    lines += ["| " + " | ".join(_cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _numeric(value: object) -> bool:
    """A number, an empty cell, or text that starts with a number."""
    return _is_number(value) or (
        isinstance(value, str) and re.match(r"^(\*\*)?-?\d|^$", value) is not None
    )


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.{2 if abs(value) < 10 else 1 if abs(value) < 100 else 0}f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def report(
    title: str,
    headers: Sequence[str],
    rows: Iterable[Sequence[object]],
    notes: str = "",
    json_path: str | Path | None = None,
) -> str:
    """Print (and return) a titled Markdown table with the machine line and notes; with
    `json_path`, also write the rows there as JSON."""
    rows = [list(row) for row in rows]
    text = "\n\n".join(
        part
        for part in (f"## {title}", f"Machine: {machine()}.", notes, table(headers, rows))
        if part
    )
    print(text + "\n", flush=True)
    if json_path is not None:
        records = [dict(zip(headers, row, strict=True)) for row in rows]
        Path(json_path).write_text(
            json.dumps({"title": title, "machine": machine(), "rows": records}, indent=1)
        )
    return text


def segmentation_source(root: Path, data: Path = CAMVID, synthetic: bool = False) -> Path:
    """`data` (CamVid layout) if it is there and not `synthetic`, else a synthetic set of 150
    train and 50 val 480x360 scenes made under `root`."""
    if data.is_dir() and not synthetic:
        return data
    from packer.synthetic import make_segmentation  # the project's environment only

    return make_segmentation(root, {"train": 150, "val": 50}, (480, 360))


def open_sequence(root: Path, batch: int, split: str = "train"):
    """A shuffled `PackedSequence` (imports Keras only when called)."""
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from packer.keras import PackedSequence

    return PackedSequence(root, split=split, batch_size=batch, shuffle=True, seed=0)


def sequence_epoch(seq) -> int:
    """One epoch of a `PackedSequence`, each batch held until the next is read; the samples."""
    samples = 0
    for i in range(len(seq)):
        images, _ = seq[i]
        samples += len(images)
    seq.on_epoch_end()
    return samples


def copyto_epoch(source, buffers: list, batch_bytes: int) -> int:
    """Copy the NumPy array `source` chunk by chunk into `buffers` in turn; the bytes copied.
    One buffer stays in the CPU cache (the memcpy limit); two in turn are what a reader must
    use while the training loop still holds batch i when it asks for batch i+1."""
    import numpy as np  # the project's environment only

    for k, start in enumerate(range(0, source.size, batch_bytes)):
        chunk = source[start : start + batch_bytes]
        np.copyto(buffers[k % len(buffers)][: chunk.size], chunk)
    return source.size


def copy_rate(
    source, sample_bytes: int, batch: int, seconds: float, threads: int = 1, held: int = 1
) -> float:
    """Images/s of np.copyto moving the bytes of the uint8 array `source` (the same bytes as a
    split's samples) batch by batch, by `threads`
    threads at once (each its part of the batch) into `held` buffers in turn: one thread and
    one buffer is one core's memcpy limit; a thread per core and two buffers (a training loop
    holds batch i while it asks for i+1) is the copy ceiling of every core."""
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np  # the project's environment only

    buffers = [np.empty(batch * sample_bytes, np.uint8) for _ in range(held)]
    step = batch * sample_bytes

    def epoch(pool: ThreadPoolExecutor) -> int:
        for k, start in enumerate(range(0, source.size, step)):
            chunk, buffer = source[start : start + step], buffers[k % held]
            cuts = np.linspace(0, chunk.size, threads + 1).astype(int)
            parts = [(buffer[a:b], chunk[a:b]) for a, b in itertools.pairwise(cuts)]
            futures = [pool.submit(np.copyto, *part) for part in parts[1:]]
            np.copyto(*parts[0])
            for future in futures:
                future.result()
        return source.size // sample_bytes

    with ThreadPoolExecutor(max(1, threads - 1)) as pool:
        return run_for(lambda: epoch(pool), seconds)


def shard_files(ds, split: str = "train") -> list[Path]:
    """The files of a packed split's shards (to warm or evict)."""
    return [ds.root / f["path"] for s in ds[split].shards for f in s["files"]]


class Peer:
    """A benchmark's baselines in another Python environment (the peers' one): the same
    script started there with `--peer`, answering one JSON line per JSON line asked; `hello`
    is its first line."""

    def __init__(self, python: Path, script: str, args: Sequence[str], env: dict | None = None):
        command = [str(python), script, "--peer", *args]
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={**os.environ, **(env or {})},
        )  # fmt: skip
        self.hello = self.ask(None)

    def ask(self, request: dict | None) -> dict:
        if request is not None:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("the peers' process ended early (see its messages above)")
        return json.loads(line)

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=120)


def cpu_seconds() -> float:
    """CPU time of this process (threads included), its finished children and its live ones."""
    done = resource.getrusage(resource.RUSAGE_CHILDREN)
    live = 0.0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parent, used = _stat(int(entry))
            except OSError:
                continue
            if parent == os.getpid():
                live += used
    return time.process_time() + done.ru_utime + done.ru_stime + live


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) a live process has used so far."""
    return _stat(pid)[1]


def _stat(pid: int) -> tuple[int, float]:
    """A live process's parent pid and CPU seconds, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # fields[1] is the ppid; utime and stime, in clock ticks, are fields[11] and fields[12]
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def forked_together(target: Callable, arguments: Sequence[tuple]) -> list:
    """Run `target(*args, barrier, queue)` in a forked process per `args`, all released by one
    barrier once ready; the one report each puts on `queue`, in arrival order. A process that
    fails stops the benchmark."""
    context = multiprocessing.get_context("fork")
    barrier, queue = context.Barrier(len(arguments)), context.Queue()
    procs = [context.Process(target=target, args=(*args, barrier, queue)) for args in arguments]
    for p in procs:
        p.start()
    reports = [queue.get() for _ in procs]
    for p in procs:
        p.join()
        if p.exitcode:
            raise SystemExit(f"a benchmark process failed (exit code {p.exitcode})")
    return reports
