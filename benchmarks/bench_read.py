"""Read and pack throughput, side by side in one run: naive decode loop vs packed vs memcpy.

Every number that matters is a ratio of two measurements taken in this same run on the same
images (never compare absolute times across runs or machines):

  (a) naive      per-step loop as Keras generators often do it: cv2.imread image and mask,
                 resize, float32 / 255, one-hot by a loop over the classes, np.stack a batch
  (b) packed     `PackedSequence` shuffled uint8 batches read from the .npy shards, one thread
  (c) copyto     np.copyto of the same bytes per batch from a RAM array (memory bandwidth),
                 into one buffer (stays in the CPU cache: the issue's limit) and into two in
                 turn (a loop that holds batch i while it asks for i+1 needs two);
                 (b) and (c) run in alternating rounds and their medians are compared
  (d) pack       `packer.pack` with workers=1 and workers=2
  (e) decode     the same PNGs decoded by 1 and by 2 processes: this machine's scaling ceiling
  (f) tf decode  tf.data as commonly written over the PNGs: read_file, decode_png, resize,
                 float32 / 255, tf.one_hot, batch, parallel map and prefetch
  (g) tf packed  `packer.tf.dataset` over a tfrecord pack of the same source (streamed, its
                 default, and with stream=False: random access) and over the npy pack:
                 shuffled uint8 batches (tf.data rows are endless streams, timed after a few
                 warm-up batches)

MB/s is img/s times the packed sample size (uint8 image + mask), the same for every row.

    python benchmarks/bench_read.py [--synthetic] [--seconds 3] [--json results.json]
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing
import statistics
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import cv2
import harness
import numpy as np
from PIL import Image

import packer
from packer.processes import start_method
from packer.reading import gather
from packer.reading.dataset import PackedDataset
from packer.synthetic import shapes_scene

if TYPE_CHECKING:
    pass

REPO = Path(__file__).resolve().parents[1]
CAMVID, SIZE = harness.CAMVID, harness.SIZE  # (W, H) of every sample the benchmark reads
SOURCE_SIZE = (480, 360)
NUM_CLASSES = 12
SYNTHETIC_SPLITS = {"train": 150, "val": 50}
TFRECORD_SHARD_BYTES = 16_000_000  # several files, so that tf.data interleaves reads
TARGETS = {
    "packed / naive": 100.0,
    "packed / copyto": 0.8,
    "packed / copyto, two buffers": 0.8,
    "packed / copyto, every core": 0.9,
    "pack workers 2 / 1": 1.7,
    "tf tfrecord / tf decode": 20.0,
    "tf tfrecord / PackedSequence": 0.5,
    "tf tfrecord random access / tf decode": 20.0,
    "tf tfrecord random access / PackedSequence": 0.5,
    "tf npy / PackedSequence": 0.5,
}


def parse_args(description: str = __doc__, rounds: bool = True) -> argparse.Namespace:
    """Command-line options (shared with bench_recordio.py, which has no alternating rounds)."""
    parser = argparse.ArgumentParser(description=description.splitlines()[0])
    parser.add_argument("--data", type=Path, default=CAMVID, help="CamVid-layout source folder")
    parser.add_argument("--synthetic", action="store_true", help="use a synthetic CamVid-like set")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=3.0, help="minimum time per read test")
    if rounds:
        parser.add_argument(
            "--rounds", type=int, default=5, help="alternating rounds of (b) and (c); medians"
        )
    parser.add_argument("--json", type=Path, help="also write the results to this JSON file")
    return parser.parse_args()


def make_synthetic(root: Path, seed: int = 0) -> Path:
    """A CamVid-like source: <split>/ PNGs, <split>annot/ grayscale index masks, class_dict.csv."""
    rng = np.random.default_rng(seed)
    for split, count in SYNTHETIC_SPLITS.items():
        (root / split).mkdir(parents=True)
        (root / f"{split}annot").mkdir()
        for i in range(count):
            image, mask = shapes_scene(rng, *SOURCE_SIZE)
            Image.fromarray(image).save(root / split / f"scene_{i:04d}.png")
            Image.fromarray(mask).save(root / f"{split}annot" / f"scene_{i:04d}.png")
    rows = [f"class_{c},{20 * c},{255 - 20 * c},{(97 * c) % 256}" for c in range(NUM_CLASSES)]
    (root / "class_dict.csv").write_text("\n".join(["name,r,g,b", *rows]) + "\n")
    return root


def time_pack(src: Path, out: Path, workers: int) -> tuple[PackedDataset, float]:
    """Pack `src` into `out` with `workers` processes; returns the dataset and wall seconds."""
    start = time.perf_counter()
    ds = packer.pack(src, out=out, format="npy", size=SIZE, workers=workers, overwrite=True)
    return ds, time.perf_counter() - start


def naive_sample(image_path: Path, mask_path: Path) -> tuple[np.ndarray, np.ndarray]:
    """One sample the usual generator way: decode, resize, scale, one-hot class by class."""
    image = cv2.cvtColor(cv2.imread(str(image_path)), cv2.COLOR_BGR2RGB)
    image = cv2.resize(image, SIZE).astype(np.float32) / 255.0
    mask = cv2.imread(str(mask_path), cv2.IMREAD_GRAYSCALE)
    mask = cv2.resize(mask, SIZE, interpolation=cv2.INTER_NEAREST)
    one_hot = np.stack([(mask == c) for c in range(NUM_CLASSES)], axis=-1).astype(np.float32)
    return image, one_hot


def naive_batch(pairs: list[tuple[Path, Path]]) -> tuple[np.ndarray, np.ndarray]:
    """A batch of naive samples, stacked."""
    samples = [naive_sample(*pair) for pair in pairs]
    return np.stack([s[0] for s in samples]), np.stack([s[1] for s in samples])


def naive_epoch(pairs: list[tuple[Path, Path]], batch: int, rng: np.random.Generator) -> int:
    """One shuffled epoch of naive batches; returns the number of samples."""
    order = rng.permutation(len(pairs))
    samples = 0
    for start in range(0, len(order), batch):
        images, _ = naive_batch([pairs[i] for i in order[start : start + batch]])
        samples += len(images)
    return samples


def row(name: str, images_per_s: float, sample_bytes: int, base: float) -> dict:
    """One result row: img/s, MB/s at the packed sample size, and the ratio to `base` img/s."""
    return {
        "name": name,
        "img_per_s": images_per_s,
        "mb_per_s": images_per_s * sample_bytes / 1e6,
        "ratio": images_per_s / base,
    }


def table(rows: list[dict], base_name: str) -> str:
    """A Markdown table of rows."""
    lines = [f"| name | img/s | MB/s | ratio (vs {base_name}) |", "|---|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r['name']} | {r['img_per_s']:,.0f} | {r['mb_per_s']:,.0f} | {r['ratio']:,.2f} |"
        )
    return "\n".join(lines)


def check(name: str, value: float) -> dict:
    """A measured ratio against its target."""
    return {"name": name, "value": value, "target": TARGETS[name], "ok": value >= TARGETS[name]}


def source_pairs(src: Path, split: str) -> list[tuple[Path, Path]]:
    """(image, mask) paths of one split of a CamVid-layout source."""
    names = sorted(p.name for p in (src / split).glob("*.png"))
    return [(src / split / n, src / f"{split}annot" / n) for n in names]


def decode_pairs(pairs: list[tuple[Path, Path]]) -> int:
    """Decode image and mask of each pair with one OpenCV thread; returns the pairs decoded."""
    cv2.setNumThreads(1)
    for image, mask in pairs:
        cv2.imread(str(image))
        cv2.imread(str(mask), cv2.IMREAD_GRAYSCALE)
    return len(pairs)


def decode_rates(pairs: list[tuple[Path, Path]]) -> dict[str, float]:
    """(e) Pairs/s decoded by 1 and by 2 forked processes, best of two runs each."""
    rates: dict[str, float] = {}
    for workers in (1, 2, 1, 2):
        harness.warm([p for pair in pairs for p in pair])
        start = time.perf_counter()
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(workers, mp_context=context) as pool:
            done = sum(pool.map(decode_pairs, [pairs[i::workers] for i in range(workers)]))
        name = f"(e) decode only, {workers} process(es)"
        rates[name] = max(rates.get(name, 0.0), done / (time.perf_counter() - start))
    return rates


def pack_rates(src: Path, tmp: Path) -> tuple[PackedDataset, dict[str, float]]:
    """(d) Pack `src` with 1 then 2 workers; returns the last pack and images/s per run."""
    sources = sorted(src.rglob("*.png"))
    rates = {}
    for workers in (1, 2):
        harness.warm(sources)
        method = start_method()
        ds, seconds = time_pack(src, tmp / f"pack-w{workers}", workers)
        count = sum(s.count for s in ds.splits.values())
        rates[f"(d) pack workers={workers} ({method})"] = count / seconds
    return ds, rates


def naive_rate(pairs: list[tuple[Path, Path]], batch: int, seconds: float) -> float:
    """(a) Images/s of the naive loop over `pairs`, shuffled, sources in the page cache."""
    rng = np.random.default_rng(0)
    harness.warm([p for pair in pairs for p in pair])
    return harness.run_for(lambda: naive_epoch(pairs, batch, rng), seconds)


def read_rates(
    ds: PackedDataset, sample_bytes: int, batch: int, seconds: float, rounds: int
) -> tuple[float, float, float, float]:
    """(b) and (c): images/s of `PackedSequence` on the train split and of np.copyto moving
    the same bytes per batch out of a RAM array into one buffer and into two in turn, and by
    a thread per core the process may use into two buffers (the all-core ceiling), in
    alternating rounds (drift and busy neighbours hit all alike); the medians. Shard files
    are warmed before each round."""
    seq = harness.open_sequence(ds.root, batch)
    harness.sequence_epoch(seq)  # untimed: opens the memmaps
    shard_files = [ds.root / f["path"] for s in ds["train"].shards for f in s["files"]]
    source = np.random.default_rng(1).integers(
        0, 256, ds["train"].count * sample_bytes, dtype=np.uint8
    )
    buffers = [np.empty(batch * sample_bytes, np.uint8) for _ in range(2)]
    rates: dict[str, list[float]] = {"packed": [], "copyto": [], "copyto_2": [], "all": []}
    threads = gather.thread_count()
    for _ in range(rounds):
        harness.warm(shard_files)
        rate = harness.run_for(lambda: harness.sequence_epoch(seq), seconds / rounds)
        rates["packed"].append(rate)
        for key, used in (("copyto", buffers[:1]), ("copyto_2", buffers)):
            copy = functools.partial(harness.copyto_epoch, source, used, batch * sample_bytes)
            rates[key].append(harness.run_for(copy, seconds / rounds) / sample_bytes)
        rate = harness.copy_rate(source, sample_bytes, batch, seconds / rounds, threads, held=2)
        rates["all"].append(rate)
    packed, copyto, copyto_2, every = (statistics.median(rates[k]) for k in rates)
    return packed, copyto, copyto_2, every


def packed_rate(ds: PackedDataset, batch: int, seconds: float) -> float:
    """(b) Images/s of `PackedSequence` on the train split, shard files warmed just before."""
    seq = harness.open_sequence(ds.root, batch)
    harness.sequence_epoch(seq)  # untimed: opens the memmaps
    harness.warm([ds.root / f["path"] for s in ds["train"].shards for f in s["files"]])
    return harness.run_for(lambda: harness.sequence_epoch(seq), seconds)


def stream_rate(batches, seconds: float) -> float:
    """Images/s of an endless tf.data pipeline, after a few untimed warm-up batches."""
    iterator = iter(batches)
    for _ in range(4):
        next(iterator)
    return harness.run_for(lambda: len(next(iterator)[0]), seconds)


def tf_decode_rate(pairs: list[tuple[Path, Path]], batch: int, seconds: float) -> float:
    """(f) Images/s of the usual tf.data pipeline decoding the source PNGs every step."""
    import tensorflow as tf

    width, height = SIZE

    def load(image_path: tf.Tensor, mask_path: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        image = tf.io.decode_png(tf.io.read_file(image_path), channels=3)
        mask = tf.io.decode_png(tf.io.read_file(mask_path), channels=1)
        image = tf.image.resize(image, (height, width)) / 255.0
        mask = tf.image.resize(mask, (height, width), method="nearest")[..., 0]
        return image, tf.one_hot(tf.cast(mask, tf.int32), NUM_CLASSES)

    paths = ([str(i) for i, _ in pairs], [str(m) for _, m in pairs])
    harness.warm([p for pair in pairs for p in pair])
    batches = (
        tf.data.Dataset.from_tensor_slices(paths)
        .shuffle(len(pairs), seed=0)
        .repeat()
        .map(load, num_parallel_calls=tf.data.AUTOTUNE)
        .batch(batch)
        .prefetch(tf.data.AUTOTUNE)
    )
    return stream_rate(batches, seconds)


def tf_packed_rate(
    ds: PackedDataset, batch: int, seconds: float, stream: bool | None = None
) -> float:
    """(g) Images/s of `packer.tf.dataset` on the train split, shard files warmed just before."""
    import packer.tf

    batches = packer.tf.dataset(ds.root, "train", batch, shuffle=True, repeat=True, stream=stream)
    harness.warm([ds.root / f["path"] for s in ds["train"].shards for f in s["files"]])
    return stream_rate(batches, seconds)


def measure(args: argparse.Namespace, tmp: Path) -> dict:
    """(e) and (d) first, then (a), (b), (c), (f) and (g) on the train split; the results."""
    synthetic = args.synthetic or not args.data.is_dir()
    src = make_synthetic(tmp / "src") if synthetic else args.data
    pairs = source_pairs(src, "train")
    # Forked processes start fast only while no framework (TensorFlow) is loaded yet.
    decode = decode_rates(pairs + source_pairs(src, "val"))
    ds, pack = pack_rates(src, tmp)
    tfrecords = packer.pack(
        src, tmp / "pack-tfrecord", "tfrecord", SIZE, shard_size=TFRECORD_SHARD_BYTES
    )
    train = ds["train"]
    size = sum(np.dtype(f.dtype).itemsize * int(np.prod(f.shape)) for f in ds.fields)
    batch, seconds = args.batch_size, args.seconds
    naive = naive_rate(pairs, batch, seconds)
    packed, copyto, copyto_2, every = read_rates(ds, size, batch, 2 * seconds, args.rounds)
    tf_decode = tf_decode_rate(pairs, batch, seconds)
    tf_tfrecord = tf_packed_rate(tfrecords, batch, seconds)
    tf_random = tf_packed_rate(tfrecords, batch, seconds, stream=False)
    tf_npy = tf_packed_rate(ds, batch, seconds)
    shards = len(tfrecords["train"].shards)
    label = "synthetic CamVid-like" if synthetic else f"{src.name} (real)"
    count = sum(s.count for s in ds.splits.values())
    (d1, d2), (e1, e2) = pack.values(), decode.values()
    return {
        "machine": harness.machine(),
        "dataset": f"{label}: {train.count} train samples read, {count} packed",
        "image_size": f"{SIZE[0]}x{SIZE[1]}",
        "sample_bytes": size,
        "cache": "warm (files read once right before each timing)",
        "read": [
            row(name, rate, size, naive)
            for name, rate in (
                (f"(a) naive cv2 loop, float32 + one-hot, batch {batch}", naive),
                (f"(b) PackedSequence uint8, batch {batch}", packed),
                ("(c) np.copyto, same bytes per batch, one buffer", copyto),
                ("(c) np.copyto, same bytes per batch, two buffers in turn", copyto_2),
                ("(c) np.copyto, same bytes, a thread per core, two buffers in turn", every),
                (f"(f) tf.data decode_png, resize, float32 + one-hot, batch {batch}", tf_decode),
                (f"(g) packer.tf.dataset, tfrecord ({shards} shards), uint8", tf_tfrecord),
                ("(g) packer.tf.dataset, tfrecord, stream=False, uint8", tf_random),
                ("(g) packer.tf.dataset, npy, uint8", tf_npy),
            )
        ],
        "pack": [row(n, r, size, d1) for n, r in pack.items()]
        + [row(n, r, size, e1) for n, r in decode.items()],
        "checks": [
            check("packed / naive", packed / naive),
            check("packed / copyto", packed / copyto),
            check("packed / copyto, two buffers", packed / copyto_2),
            check("packed / copyto, every core", packed / every),
            check("pack workers 2 / 1", d2 / d1),
            check("tf tfrecord / tf decode", tf_tfrecord / tf_decode),
            check("tf tfrecord / PackedSequence", tf_tfrecord / packed),
            check("tf tfrecord random access / tf decode", tf_random / tf_decode),
            check("tf tfrecord random access / PackedSequence", tf_random / packed),
            check("tf npy / PackedSequence", tf_npy / packed),
        ],
        "decode_scaling_2_1": e2 / e1,
    }


def report(results: dict) -> None:
    """Print the run's context, the two tables and the ratio checks."""
    for key in ("machine", "dataset", "image_size", "sample_bytes", "cache"):
        print(f"{key}: {results[key]}")
    print()
    print(table(results["read"], "naive"))
    print()
    print(table(results["pack"], "1 process"))
    print()
    for c in results["checks"]:
        verdict = "PASS" if c["ok"] else "MISS"
        print(f"{c['name']}: {c['value']:,.2f} (target >= {c['target']}) {verdict}")
    print(
        f"decode-only scaling 2 / 1 (this machine's ceiling): {results['decode_scaling_2_1']:.2f}"
    )


def main() -> None:
    """Measure everything in one run, print it, and optionally write it as JSON."""
    args = parse_args()
    with tempfile.TemporaryDirectory(prefix="packer-bench-") as tmp:
        results = measure(args, Path(tmp))
    report(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
