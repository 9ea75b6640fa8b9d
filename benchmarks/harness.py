"""What every benchmark here shares: warm (or evict) the page cache, time a step for seconds,
run contenders side by side in interleaved rounds and pair them as per-round ratios, describe
the machine, print a Markdown table, and count CPU time across forked processes; and the frame
of a one-core comparison beside a library in the peers' environment (pin, wall and CPU rates,
the peer's loop, the tables).

Standard library only at import, so that scripts running in the peers' environment can import
it too; the few helpers for packer's own reading workload import packer when called.
docs/design.md's "Measuring" says why: ratios within one run, workloads that last seconds, the
page cache state named beside every number.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import multiprocessing
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

SIZE = (480, 352)  # (W, H) of the segmentation samples the reading benchmarks read
CAMVID = Path(__file__).resolve().parents[2] / "shared" / "data" / "camvid"
PEERS_PYTHON = Path(__file__).resolve().parents[1] / ".venv-peers" / "bin" / "python"

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


# --- one core, packer beside a peer's library: what the augmentation comparisons share ---------


def pin_one_core(cpu: int = 0) -> None:
    """This process on core `cpu`, OpenCV on one thread (OMP_NUM_THREADS and the BLAS
    variables must be set to 1 before NumPy and OpenCV load: the scripts do it first)."""
    import cv2  # both environments have it; imported here to keep this module stdlib-only

    os.sched_setaffinity(0, {cpu})
    cv2.setNumThreads(1)


def wall_and_cpu(step: Step, seconds: float) -> dict[str, float]:
    """Repeat `step` (returning images done) for `seconds` after one warm-up call: images per
    wall second and per CPU second of this process (one thread: what the core gave it,
    whatever else ran on the machine)."""
    step()  # warm-up
    done, start, cpu = 0, time.perf_counter(), time.process_time()
    while (elapsed := time.perf_counter() - start) < seconds:
        done += step()
    return {"wall": done / elapsed, "cpu": done / (time.process_time() - cpu)}


def following(count: int, batch: int) -> Callable[[], tuple[int, np.ndarray]]:
    """Successive (epoch, indices) of `batch` samples over `count`, wrapping into new epochs."""
    import numpy as np  # both environments have it

    state = {"next": 0}

    def step() -> tuple[int, np.ndarray]:
        start = state["next"]
        state["next"] += batch
        return start // count, np.arange(start, start + batch) % count

    return step


def start_peer(python: Path, script: str, args: Sequence[str], notes: list[str]) -> Peer | None:
    """`script` started with `--peer` in the peers' environment at `python`; None, with a note
    on how to make that environment, where it is absent."""
    if not python.exists():
        notes.append("no .venv-peers: run benchmarks/setup_peers.sh for the baseline")
        return None
    return Peer(python, script, args)


def serve_rounds(steps: Mapping[str, Step], hello: dict) -> None:
    """The peer's side: print `hello` as one JSON line, then answer each request line
    {"run": name, "seconds": s} with `wall_and_cpu(steps[name], s)`, until stdin closes."""
    print(json.dumps(hello), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        print(json.dumps(wall_and_cpu(steps[request["run"]], request["seconds"])), flush=True)


def against_peer(
    local: Mapping[str, Step],
    peer: Peer | None,
    peer_names: Sequence[str],
    seconds: float,
    count: int,
) -> dict[str, list[dict[str, float]]]:
    """Wall and CPU rates of the `local` steps and (with a peer) of the peer's `peer_names`, in
    `count` interleaved rounds of `seconds` each (`side_by_side`); the peer is closed after."""
    runs: dict[str, Callable[[float], dict[str, float]]] = {
        name: functools.partial(wall_and_cpu, step) for name, step in local.items()
    }
    for name in peer_names if peer else ():
        runs[name] = lambda s, n=name: peer.ask({"run": n, "seconds": s})
    rates = side_by_side(runs, seconds, count, measure=lambda run, s: run(s))
    if peer:
        peer.close()
    return rates


def measure_with_peer(
    script: str,
    data: Mapping[str, np.ndarray],
    folder: Path,
    local: Callable[[], Mapping[str, Step]],
    peer_names: Sequence[str],
    args: argparse.Namespace,
    results: dict,
    library: str = "albumentations",
) -> dict | None:
    """The measuring part of a one-core comparison: `data` saved under `folder` for the peer
    (`script --peer --data FILE` in the peers' environment, where it exists), this process
    pinned, the steps of `local()` (made after pinning) and the peer's `peer_names` run by
    `against_peer` for `args.rounds` rounds of `args.seconds`. Into `results`: "rounds", the
    peer's version under `library`, the note of a missing peer under "notes". The peer's
    hello, or None without a peer."""
    import numpy as np  # the project's environment only (the peer loads the file itself)

    path = folder / "data.npz"
    np.savez(path, **data)
    peer = start_peer(PEERS_PYTHON, script, ["--data", str(path)], results["notes"])
    if peer is not None:
        results[library] = peer.hello["version"]
    pin_one_core()
    results["rounds"] = against_peer(local(), peer, peer_names, args.seconds, args.rounds)
    return None if peer is None else peer.hello


def wall_cpu_report(
    title: str,
    results: Mapping[str, object],
    ratio_pairs: Mapping[str, tuple[str, str]],
    notes: str,
    target_of: Mapping[str, str],
) -> None:
    """Print the tables of an `against_peer` run (`results["rounds"]`): each contender's
    median and range of images per wall and per CPU second; then, per `ratio_pairs` label
    whose two contenders both ran, the per-round ratio a / b of each, with its target from
    `target_of` (or none); then `results["notes"]`, one line each."""
    rounds = results["rounds"]
    by = {k: {n: [r[k] for r in runs] for n, runs in rounds.items()} for k in ("wall", "cpu")}
    rows = [[name, spread(by["wall"][name], 0), spread(by["cpu"][name], 0)] for name in rounds]
    report(title, ["contender", "img/s (wall)", "img per CPU second"], rows, notes)
    lines = []
    for label, (a, b) in ratio_pairs.items():
        if a in rounds and b in rounds:
            cells = [spread(ratios(by[k], b)[a]) for k in ("wall", "cpu")]
            lines.append([label, *cells, target_of.get(label, "")])
    print(table(["ratio, per round", "wall", "CPU time", "target"], lines))
    for note in results["notes"]:
        print(f"note: {note}")


def main_with_peer(
    args: argparse.Namespace,
    peer_main: Callable[[Path], None],
    measure: Callable[[argparse.Namespace, Path], dict],
    show: Callable[[dict, argparse.Namespace], None],
) -> None:
    """With --peer, serve as the peer (`peer_main(args.data)`); else `measure` (with a
    temporary folder for the data handed to the peer), `show` the results, and write them to
    --json if given."""
    if args.peer:
        peer_main(args.data)
        return
    with tempfile.TemporaryDirectory() as tmp:
        results = measure(args, Path(tmp))
    show(results, args)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


# --- the augmentation both sides run (bench_augment_boxes.py, bench_keypoints.py) -------------

AUGMENT = dict(  # packer's arguments; `albumentations_warp` is albumentations' equivalent
    rotation_range=10,
    width_shift_range=0.1,
    height_shift_range=0.1,
    zoom_range=0.1,
    shear_range=5,
    horizontal_flip=True,
    fill_mode="constant",
)


def albumentations_warp(A, **affine: object) -> list:
    """albumentations' operations for AUGMENT, given its module `A`: a horizontal flip (p 0.5),
    then one affine warp (rotation +-10 degrees, shift +-10%, zoom 0.9-1.1, shear +-5 degrees,
    bilinear, constant fill); `affine` adds arguments of the warp (e.g. mask_interpolation)."""
    import cv2

    return [
        A.HorizontalFlip(p=0.5),
        A.Affine(
            rotate=(-10, 10),
            translate_percent=(-0.1, 0.1),
            scale=(0.9, 1.1),
            shear=(-5, 5),
            interpolation=cv2.INTER_LINEAR,
            border_mode=cv2.BORDER_CONSTANT,
            p=1.0,
            **affine,
        ),
    ]


def packer_augment_step(
    data: Mapping[str, np.ndarray],
    fields: Sequence[str],
    settings: Mapping[str, object],
    batch: int,
    with_targets: bool,
    geometries: Mapping[str, object] | None = None,
) -> Step:
    """packer's side: `Augment(**settings).apply` on successive batches of data["images"],
    into a reused buffer as a reader does; `with_targets`, each sample's `fields` of `data` as
    its targets (moved as `geometries` says, or by packer's conventions)."""
    import numpy as np

    from packer.augment import Augment

    aug, nxt = Augment(**settings, seed=0), following(len(data["images"]), batch)
    out = (np.empty((batch, *data["images"].shape[1:]), np.uint8), None)
    columns = [data[name] for name in fields]
    targets = [dict(zip(fields, sample, strict=True)) for sample in zip(*columns, strict=True)]

    def step() -> int:
        epoch, indices = nxt()
        batch_targets = [targets[i] for i in indices] if with_targets else None
        aug.apply(
            data["images"][indices], None, epoch=epoch, indices=indices, out=out,
            targets=batch_targets, geometries=geometries if with_targets else None,
        )  # fmt: skip
        return batch

    return step
