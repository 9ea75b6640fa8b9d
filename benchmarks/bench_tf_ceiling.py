"""`packer.tf.dataset` against the copy ceiling and `PackedSequence`, side by side in one run,
and where a tf.data batch's CPU time goes.

One source (CamVid, or a synthetic CamVid-like one without ../shared/data) with each train
file listed `--tile` times (links), packed as npy and as uncompressed TFRecord at 480x352.
Contenders, each timed over whole epochs of shuffled uint8 batches of 16, shard files read
right before every timed run (warm page cache), in interleaved rounds:

  copy ceiling       np.copyto of the same bytes per batch out of a RAM array, a thread per
                     core, into two buffers in turn (the loop holds batch i, asks for i+1)
  copy, 8 buffers    the same into eight buffers in turn (what tf.data keeps in flight)
  PackedSequence     the Keras reader over the npy pack
  tf.dataset npy     `packer.tf.dataset`, a new iterator every epoch (as Keras' fit makes one):
                     its compiled read (packer.tf.compiled, a tf.data source in C++), which
                     copies the next batch on its helper threads while one is consumed
  tf.dataset npy, in a tf.function
                     the same dataset consumed by a loop inside a `tf.function`, as Keras'
                     fit takes its batches (no Python per batch on the training side)
  tf.dataset npy, tf.data prefetch (and in a tf.function)
                     the compiled read without its own read-ahead (`compiled.READ_AHEAD`
                     off) and with tf.data's `prefetch(AUTOTUNE)` after it, as before
  tf.dataset npy, numpy_function read
                     the same with the compiled read turned off (`compiled.ENABLED`): each
                     batch read by packer's shard readers in one `tf.numpy_function`
  tf.dataset tfrec (compiled)
                     the uncompressed TFRecord pack (random access, its default): the same
                     compiled read, each record's CRC32C checked once per process
  PackedSequence cls, tf.dataset tfrec cls (compiled, and in a tf.function), tf.dataset tfrec
  cls, numpy_function read
                     a classification pack of the same images (npy for PackedSequence,
                     uncompressed TFRecord for the others), class ids i % 300: varints of 1
                     and 2 bytes, so records of unequal length; compared with PackedSequence
                     cls (3 bytes a pixel and a class id, against the segmentation's 4)

Ratios are paired round by round and reported as the median and range. Every reader run also
records the process's CPU time (all threads) per batch: on a shared machine whose cores are
all busy, a reader's share of the wall clock follows its CPU time per batch, so the CPU
column says what the wall ratio converges to under load.

Then where a batch's CPU goes, each measured on its own over the same epochs: the read (the
shard readers' copy on the calling thread, inside `PackedSequence` and inside the tf.data
function of the numpy_function read), tf.data's fixed cost of one element
(`from_tensors(ready arrays).repeat`, iterated in Python) and of the one `tf.numpy_function`
per batch handing back ready arrays.

    python benchmarks/bench_tf_ceiling.py [--src DIR] [--tile 14] [--rounds 7] [--seconds 2]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import bench_read
import harness
import numpy as np

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf

import packer
import packer.tf
from packer.reading import gather
from packer.reading.loader import Loader
from packer.tf import compiled

BATCH = 16
GOALS = {"copy ceiling": 0.8, "PackedSequence": 0.9}  # tf.dataset over each, issue 39
NUMPY = "tf.dataset npy, numpy_function read"
IN_GRAPH = "tf.dataset npy, in a tf.function"
PREFETCH = "tf.dataset npy, tf.data prefetch"
PREFETCH_IN_GRAPH = "tf.dataset npy, tf.data prefetch, in a tf.function"
TFREC = "tf.dataset tfrec (compiled)"
READERS = ("PackedSequence", "tf.dataset npy", IN_GRAPH, PREFETCH, PREFETCH_IN_GRAPH, NUMPY, TFREC)
SEQ_CLS, TFREC_CLS = "PackedSequence cls", "tf.dataset tfrec cls (compiled)"
TFREC_CLS_NUMPY = "tf.dataset tfrec cls, numpy_function read"
CLS_IN_GRAPH = "tf.dataset tfrec cls, in a tf.function"
CLASSES = 300  # class ids i % 300: varints of 1 and 2 bytes

Epoch = Callable[[], int]  # reads one epoch, returns the samples read


def cpu_seconds() -> float:
    """User and system CPU time of this process, all threads."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def make_packs(src: Path, root: Path) -> dict[str, Path]:
    """The npy and uncompressed TFRecord packs of `src` at the reading benchmarks' size, and
    classification packs of the same images (`cls-npy`, `cls-tfrecord`)."""
    packs = {}
    for fmt in ("npy", "tfrecord"):
        ds = packer.pack(src, out=root / fmt, format=fmt, size=harness.SIZE, progress=False)
        packs[fmt] = Path(ds.root)
    loader = Loader(packs["npy"], "train", 64, shuffle=False)
    images = [image for i in range(len(loader)) for image in loader.batch(i, 0)[0]]
    samples = [{"image": image, "label": i % CLASSES} for i, image in enumerate(images)]
    for fmt in ("npy", "tfrecord"):
        out = root / f"cls-{fmt}"
        ds = packer.pack(samples, out=out, format=fmt, fields={"image": "image"}, progress=False)
        packs[f"cls-{fmt}"] = Path(ds.root)
    return packs


def epochs(packs: dict[str, Path]) -> dict[str, Epoch]:
    """One epoch of each reader, returning the samples read."""
    seq = harness.open_sequence(packs["npy"], BATCH)
    seq_cls = harness.open_sequence(packs["cls-npy"], BATCH)
    datasets = {
        name: packer.tf.dataset(packs[fmt], batch_size=BATCH, seed=0)
        for name, fmt in (
            ("tf.dataset npy", "npy"),
            (TFREC, "tfrecord"),
            (TFREC_CLS, "cls-tfrecord"),
        )
    }
    datasets[NUMPY] = numpy_read(packs["npy"])
    datasets[TFREC_CLS_NUMPY] = numpy_read(packs["cls-tfrecord"])
    datasets[PREFETCH] = prefetched(packs["npy"])
    print("reads:", {name: d.packer_read for name, d in datasets.items()})

    def tf_epoch(dataset: tf.data.Dataset) -> Epoch:
        def epoch() -> int:
            return sum(int(images.shape[0]) for images, _ in dataset)

        return epoch

    @tf.function
    def consume(dataset: tf.data.Dataset) -> tf.Tensor:
        samples = tf.constant(0, tf.int64)
        for images, _ in dataset:
            samples += tf.shape(images, out_type=tf.int64)[0]
        return samples

    def in_graph(name: str) -> Epoch:
        return lambda: int(consume(datasets[name]))

    return (
        {"PackedSequence": lambda: harness.sequence_epoch(seq)}
        | {SEQ_CLS: lambda: harness.sequence_epoch(seq_cls)}
        | {name: tf_epoch(ds) for name, ds in datasets.items()}
        | {IN_GRAPH: in_graph("tf.dataset npy"), PREFETCH_IN_GRAPH: in_graph(PREFETCH)}
        | {CLS_IN_GRAPH: in_graph(TFREC_CLS)}
    )


def numpy_read(pack: Path) -> tf.data.Dataset:
    """`packer.tf.dataset` over `pack` with the compiled read turned off."""
    compiled.ENABLED = False
    try:
        return packer.tf.dataset(pack, batch_size=BATCH, seed=0)
    finally:
        compiled.ENABLED = True


def prefetched(npy: Path) -> tf.data.Dataset:
    """`packer.tf.dataset` over `npy` with the compiled read's own read-ahead turned off (so
    tf.data's prefetch follows it, as before)."""
    compiled.READ_AHEAD = False
    try:
        return packer.tf.dataset(npy, batch_size=BATCH, seed=0)
    finally:
        compiled.READ_AHEAD = True


def side_by_side(packs: dict[str, Path], rounds: int, seconds: float) -> tuple[dict, dict]:
    """img/s per contender per round, and each reader's CPU microseconds per batch."""
    readers = epochs(packs)
    count = readers["PackedSequence"]()  # every train sample once (of the segmentation pack)
    sample = harness.SIZE[0] * harness.SIZE[1] * 4  # RGB image + 1-byte mask
    source = np.random.default_rng(1).integers(0, 256, count * sample, dtype=np.uint8)
    threads = gather.thread_count()
    copies = {"copy ceiling": 2, "copy, 8 buffers": 8}
    cpu: dict[str, list[float]] = {name: [] for name in readers}

    def measure(name: str, seconds: float) -> float:
        if name in copies:
            return harness.copy_rate(source, sample, BATCH, seconds, threads, copies[name])
        start = cpu_seconds()
        samples, begin = 0, time.perf_counter()
        while time.perf_counter() - begin < seconds or samples == 0:
            samples += readers[name]()
        rate = samples / (time.perf_counter() - begin)
        cpu[name].append((cpu_seconds() - start) / (samples / BATCH) * 1e6)
        return rate

    files = [f for p in packs.values() for f in p.rglob("*") if f.is_file()]
    for epoch in readers.values():  # start-up (graphs, pools, first reads) untimed
        epoch()
    names = [*copies, *readers]
    rates = harness.side_by_side(
        {name: name for name in names},
        seconds,
        rounds,
        before_each=lambda: harness.warm(files),
        measure=lambda name, s: measure(name, s),
    )
    return rates, cpu


def breakdown(packs: dict[str, Path], rounds: int) -> dict[str, list[float]]:
    """CPU microseconds per batch of a batch's parts, each measured over whole epochs."""
    seq = harness.open_sequence(packs["npy"], BATCH)
    dataset = numpy_read(packs["npy"])
    passes = dataset.packer_position
    batches = len(seq)
    reads: list[float] = []

    def timed(read: Callable) -> Callable:
        def call(*args, **kwargs):
            start = time.thread_time()
            out = read(*args, **kwargs)
            reads.append((time.thread_time() - start) * 1e6)
            return out

        return call

    passes._read = timed(passes._read)  # instrumentation: the read inside the numpy_function
    seq.loader.read = timed(seq.loader.read)
    ready = [np.asarray(a) for a in passes._read(0, 0)]
    dtypes = [tf.as_dtype(a.dtype) for a in ready]
    element = tf.data.Dataset.from_tensors(tuple(tf.constant(a) for a in ready)).repeat(batches)
    function = (
        tf.data.Dataset.range(batches)
        .map(lambda i: tuple(tf.numpy_function(lambda _: ready, [i], dtypes, stateful=True)))
        .prefetch(tf.data.AUTOTUNE)
    )

    def over(dataset: tf.data.Dataset) -> Epoch:
        return lambda: sum(1 for _ in dataset)

    def sequence() -> int:
        for i in range(batches):
            seq[i]
        return batches

    parts = {
        "read inside PackedSequence": sequence,
        "read inside tf.dataset (numpy_function read)": over(dataset),
        "tf.data element (from_tensors.repeat)": over(element),
        "tf.data element + numpy_function of ready arrays": over(function),
    }
    found: dict[str, list[float]] = {name: [] for name in parts}
    for r in range(rounds):
        for name in harness.rotate(list(parts), r):
            reads.clear()
            start = cpu_seconds()
            done = parts[name]()
            per_batch = (cpu_seconds() - start) / done * 1e6
            found[name].append(statistics.median(reads) if reads else per_batch)
    return found


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", type=Path, help="a CamVid-like folder (default: CamVid)")
    parser.add_argument("--tile", type=int, default=14)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        src, name = args.src or harness.CAMVID, "CamVid"
        if not src.is_dir():
            src, name = bench_read.make_synthetic(tmp / "synthetic"), "CamVid-like (synthetic)"
        name = name if args.src is None else src.name
        src = harness.linked_copy(src, tmp / "tiled", args.tile) if args.tile > 1 else src
        packs = make_packs(src, tmp)
        load = os.getloadavg()[0]
        rates, cpu = side_by_side(packs, args.rounds, args.seconds)
        parts = breakdown(packs, args.rounds)
        load = f"load average {load:.1f} before, {os.getloadavg()[0]:.1f} after"
    rows = [
        [name, statistics.median(r), statistics.median(cpu[name]) if name in cpu else ""]
        for name, r in rates.items()
    ]
    harness.report(
        f"Reading {name} x{args.tile}: img/s and CPU per batch",
        ["contender", "img/s (median)", "CPU us/batch (median)"],
        rows,
        f"Interleaved rounds: {args.rounds} x {args.seconds} s; {load}.",
    )
    goal_rows = []
    for reader in READERS[1:]:
        for base, goal in GOALS.items():
            paired = harness.ratios(rates, base)[reader]
            goal_rows.append([reader, base, spread(paired), f">= {goal}"])
    goal_rows += [
        [reader, "PackedSequence, by CPU per batch", spread(
            [s / t for s, t in zip(cpu["PackedSequence"], cpu[reader], strict=True)]
        ), ""]
        for reader in READERS[1:]
    ]  # fmt: skip
    for reader in (TFREC_CLS, CLS_IN_GRAPH, TFREC_CLS_NUMPY):
        cls_cpu = [s / t for s, t in zip(cpu[SEQ_CLS], cpu[reader], strict=True)]
        goal_rows += [
            [reader, SEQ_CLS, spread(harness.ratios(rates, SEQ_CLS)[reader]), ">= 0.9"],
            [reader, f"{SEQ_CLS}, by CPU per batch", spread(cls_cpu), ""],
        ]
    harness.report(
        "Ratios, paired round by round: median (range)",
        ["reader", "over", "ratio", "goal"],
        goal_rows,
    )
    harness.report(
        "Where a batch's CPU goes (us per batch, median over rounds)",
        ["part", "CPU us/batch"],
        [[name, statistics.median(v)] for name, v in parts.items()],
        "The reads are the calling thread's CPU inside each call; the tf.data rows are the "
        "whole process's CPU per element over ready arrays (no read).",
    )
    os._exit(0)  # TensorFlow's iterators may wait on the GIL at interpreter exit


if __name__ == "__main__":
    main()
