"""packer beside its peers, in one run on the same images: pack img/s, size on disk, read img/s.

Datasets: CamVid (segmentation, 12 classes, packed to 480x352) and the ants/bees JPEGs
(classification, 224x224) from ../shared/data, or synthetic look-alikes where absent. Every
contender that packs, packs train + val from the original files (decode and resize included,
one process per core); every contender reads the train split in shuffled batches of 16, uint8
where it allows, after one untimed epoch (whose first batch gives the first-batch seconds) and
with its files read once right before the timing (warm page cache). Contenders:

  naive loop       cv2.imread, resize, float32, one-hot (bench_read's loop), one process
  tf.data          the original files: decode_png / decode_image, resize, float32, one-hot
  keras            keras.utils.image_dataset_from_directory (classification only)
  packer <format>  packer.pack, read by PackedSequence (npy, recordio) or packer.tf.dataset;
                   the npy pack also by packer.tf.dataset and packer.torch (0 workers)
  WebDataset       tar shards of .npy entries (TarWriter), read in-process by wds.WebDataset
  LitData          litdata.optimize, read in-process by StreamingDataset + StreamingDataLoader
  FFCV             RGBImageField(write_mode="raw") + NDArrayField / IntField, Loader, 2 workers
  np.copyto        the same bytes per batch out of a RAM array: the memory-bandwidth limit,
                   by one thread and by one thread per core the process may use (all cores)

Below the table, the goals of reading on every core: each packer reader of the npy pack at
>= 0.9 x the all-core copy and >= 1.3 x FFCV, in the same run.

The peers run in their own environment (`bash benchmarks/setup_peers.sh` makes .venv-peers):
this script, run by the project's .venv, re-invokes itself there (`--peer NAME`) and collects
their JSON; the chart is drawn there too (`--chart`), so matplotlib never enters .venv.

    .venv/bin/python benchmarks/bench_peers.py [--synthetic] [--seconds 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import itertools
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from pathlib import Path

import cv2
import numpy as np

# bench_read (the side-by-side helpers) beside this file; packer from this checkout in either
# environment (the peers' one does not install it).
sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]
import bench_read  # noqa: E402
import harness  # noqa: E402
from harness import linked_copy  # noqa: E402

import packer  # noqa: E402
from packer.reading import gather  # noqa: E402
from packer.reading.dataset import PackedDataset  # noqa: E402
from packer.synthetic import shapes_scene  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
PEERS_PYTHON = REPO / ".venv-peers" / "bin" / "python"
RESULTS = REPO / "benchmarks" / "results"
PEERS = ("webdataset", "litdata", "ffcv")
PACKER_FORMATS = ("npy", "tfrecord", "recordio")
ORDER = (
    "naive",
    "tf.data",
    "keras",
    *(f"packer-{f}" for f in PACKER_FORMATS),
    "packer-npy-tf",
    "packer-npy-torch",
    *PEERS,
    "copyto",
    "copyto-all",
    "copyto-all-8",
)
# The goals of reading on every core, for every packer reader of the npy pack in one run:
# read img/s over the all-core copy of the same bytes, and over FFCV's loader.
GOALS = {"copyto-all": 0.9, "ffcv": 1.3}
NPY_READERS = ("packer-npy", "packer-npy-tf", "packer-npy-torch")
CLASSIFICATION_SIZE = (224, 224)
SHUFFLE_BUFFER = 1000  # WebDataset samples; more than a split holds here: a full shuffle
FFCV_WORKERS = 2
PEER_TIMEOUT_S = 300
SYNTHETIC_CLASSES = {"train": 120, "val": 75}  # images per class, as many as ants/bees has

NUMBERS = ("pack_img_s", "size_mb", "read_img_s", "first_batch_s")

Items = list[list]  # [image path, mask path] or [image path, class id] per sample
Reader = Callable[[], Iterable]  # a call gives one epoch of (images, targets) batches


def parse_args() -> argparse.Namespace:
    """Command-line options (those without help are how the script calls itself)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--synthetic", action="store_true", help="synthetic look-alike datasets")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=3.0, help="minimum time per read test")
    parser.add_argument(
        "--tile", type=int, default=1, help="list each train image N times (longer epochs)"
    )
    parser.add_argument("--peers", nargs="*", default=list(PEERS), choices=PEERS)
    parser.add_argument("--results", type=Path, default=RESULTS, help="where peers.md/png go")
    parser.add_argument("--json", type=Path, help="also write the results to this JSON file")
    parser.add_argument("--peer", choices=PEERS, help=argparse.SUPPRESS)
    parser.add_argument("--job", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--chart", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--png", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args()


# --- shared by both environments -------------------------------------------------------------


def result(kind: str, contender: str, dataset: str, **values) -> dict:
    """One table row; numbers left out are None (not measured or not applicable)."""
    row = {"kind": kind, "contender": contender, "dataset": dataset, "note": ""}
    return {**row, **dict.fromkeys(NUMBERS), **values}


def brief(exc: BaseException) -> str:
    """An exception as one short line for the table."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:140]


def files_under(root: Path) -> list[Path]:
    """Every file below `root`."""
    return sorted(p for p in root.rglob("*") if p.is_file())


def megabytes(paths: Iterable[Path]) -> float:
    """Total size of `paths` in MB."""
    return sum(p.stat().st_size for p in paths) / 1e6


def time_reads(open_reader: Callable[[], Reader], files: list[Path], seconds: float) -> dict:
    """Seconds to the first batch (opening included), then img/s over whole warm epochs."""
    start = time.perf_counter()
    epochs = open_reader()
    batches = iter(epochs())
    next(batches)
    first = time.perf_counter() - start
    for _ in batches:  # the rest of the untimed epoch
        pass
    harness.warm(files)
    rate = harness.run_for(lambda: sum(len(images) for images, _ in epochs()), seconds)
    return {"first_batch_s": first, "read_img_s": rate}


# --- the peers (their environment) -----------------------------------------------------------


def fill(array: np.ndarray, size: tuple[int, int], interpolation: int) -> np.ndarray:
    """Scale to cover (W, H), then centre-crop the excess (packer's default `fill`)."""
    width, height = size
    rows, cols = array.shape[:2]
    scale = max(width / cols, height / rows)
    scaled = (max(width, round(cols * scale)), max(height, round(rows * scale)))
    if scaled != (cols, rows):
        array = cv2.resize(array, scaled, interpolation=interpolation)
    top, left = (scaled[1] - height) // 2, (scaled[0] - width) // 2
    return np.ascontiguousarray(array[top : top + height, left : left + width])


def decoded(item: list, task: str, size: tuple[int, int]) -> tuple[np.ndarray, np.ndarray | int]:
    """One sample as a peer's user would pack it: OpenCV decode, area resize, centre crop."""
    image = fill(cv2.imread(item[0], cv2.IMREAD_COLOR_RGB), size, cv2.INTER_AREA)
    if task == "classification":
        return image, int(item[1])
    return image, fill(cv2.imread(item[1], cv2.IMREAD_GRAYSCALE), size, cv2.INTER_NEAREST)


class Samples:
    """Decoded samples by index, for writers that pull them (FFCV)."""

    def __init__(self, items: Items, task: str, size: tuple[int, int]) -> None:
        self.items, self.task, self.size = items, task, size

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray | int]:
        return decoded(self.items[index], self.task, self.size)


def webdataset_shard(task: tuple[Items, str, tuple[int, int], Path]) -> None:
    """Write one tar shard of .npy entries (image, target) with `webdataset.TarWriter`."""
    import webdataset as wds  # already loaded by the parent: the workers are forked

    items, kind, size, path = task
    with wds.TarWriter(str(path)) as sink:
        for i, item in enumerate(items):
            image, target = decoded(item, kind, size)
            sink.write({"__key__": f"{i:06d}", "image.npy": image, "target.npy": np.array(target)})


def webdataset_pack(spec: dict, out: Path, workers: int) -> None:
    """One tar shard per split per process, each process writing its own."""
    import webdataset  # noqa: F401  (loaded once, before the fork)

    out.mkdir(parents=True)
    size = tuple(spec["size"])
    tasks = [
        (items[i::workers], spec["task"], size, out / f"{split}-{i:05d}.tar")
        for split, items in spec["splits"].items()
        for i in range(workers)
    ]
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        pool.map(webdataset_shard, tasks)


def webdataset_reader(spec: dict, out: Path, batch: int) -> Reader:
    """Shuffled shards, a shuffle buffer, .npy decoding and batching, in this process."""
    import webdataset as wds

    urls = sorted(str(p) for p in out.glob("train-*.tar"))

    def epoch() -> Iterable:
        return (
            wds.WebDataset(urls, shardshuffle=len(urls), empty_check=False)
            .shuffle(SHUFFLE_BUFFER)
            .decode()
            .to_tuple("image.npy", "target.npy")
            .batched(batch)
        )

    return epoch


def litdata_sample(job: tuple[list, str, tuple[int, int]]) -> dict:
    """LitData's per-input function: one decoded sample as a dict of arrays."""
    image, target = decoded(*job)
    return {"image": image, "target": target}


def litdata_pack(spec: dict, out: Path, workers: int) -> None:
    """`litdata.optimize` each split into its own folder of chunks."""
    from litdata import optimize

    size = tuple(spec["size"])
    for split, items in spec["splits"].items():
        optimize(
            fn=litdata_sample,
            inputs=[(item, spec["task"], size) for item in items],
            output_dir=str(out / split),
            num_workers=workers,
            chunk_bytes="64MB",
        )


def litdata_reader(spec: dict, out: Path, batch: int) -> Reader:
    """`StreamingDataset(shuffle=True)` batched by `StreamingDataLoader`, in this process."""
    from litdata import StreamingDataLoader, StreamingDataset

    dataset = StreamingDataset(str(out / "train"), shuffle=True)
    loader = StreamingDataLoader(dataset, batch_size=batch, num_workers=0)
    return lambda: ((b["image"], b["target"]) for b in loader)


def ffcv_pack(spec: dict, out: Path, workers: int) -> None:
    """One .beton per split: raw RGB image field, uint8 mask array or int label."""
    from ffcv.fields import IntField, NDArrayField, RGBImageField
    from ffcv.writer import DatasetWriter

    out.mkdir(parents=True)
    width, height = spec["size"]
    for split, items in spec["splits"].items():
        target = (
            IntField()
            if spec["task"] == "classification"
            else NDArrayField(np.dtype("uint8"), (height, width))
        )
        fields = {"image": RGBImageField(write_mode="raw"), "target": target}
        writer = DatasetWriter(str(out / f"{split}.beton"), fields, num_workers=workers)
        writer.from_indexed_dataset(Samples(items, spec["task"], (width, height)))


def ffcv_reader(spec: dict, out: Path, batch: int) -> Reader:
    """FFCV's `Loader` in random order, uint8 NumPy batches, its own worker threads."""
    from ffcv.fields.decoders import IntDecoder, NDArrayDecoder, SimpleRGBImageDecoder
    from ffcv.loader import Loader, OrderOption

    target = IntDecoder() if spec["task"] == "classification" else NDArrayDecoder()
    loader = Loader(
        str(out / "train.beton"),
        batch_size=batch,
        num_workers=FFCV_WORKERS,
        order=OrderOption.RANDOM,
        drop_last=False,
        pipelines={"image": [SimpleRGBImageDecoder()], "target": [target]},
    )
    return lambda: loader


PEER_CODE = {  # pack, reader, name, how
    "webdataset": (webdataset_pack, webdataset_reader, "WebDataset", "tar of .npy"),
    "litdata": (litdata_pack, litdata_reader, "LitData", "optimize + StreamingDataLoader"),
    "ffcv": (ffcv_pack, ffcv_reader, "FFCV", f"raw fields, Loader {FFCV_WORKERS} workers"),
}


def peer_version(peer: str) -> str | None:
    """The installed version of a peer's package, or None."""
    try:
        return importlib.metadata.version(peer)
    except importlib.metadata.PackageNotFoundError:
        return None


def not_installed(peer: str) -> str:
    """Why a peer is missing: the last error its install log recorded, if there is one."""
    log = Path(sys.prefix) / f"{peer}-install.log"
    lines = log.read_text().splitlines() if log.exists() else []
    errors = [line.strip() for line in lines if "error" in line.lower()]
    return "not installed" + (f": {errors[-1][:120]}" if errors else "")


def peer_result(peer: str, spec: dict, job: dict) -> dict:
    """Pack and read one dataset with one peer; a failure becomes the row's note."""
    pack, reader, name, how = PEER_CODE[peer]
    version = peer_version(peer)
    row = result(peer, f"{name} {version or ''}".strip() + f": {how}", spec["name"])
    if version is None:
        return {**row, "note": not_installed(peer)}
    out = Path(job["out"]) / peer / Path(spec["src"]).name
    try:
        start = time.perf_counter()
        pack(spec, out, job["workers"])
        seconds = time.perf_counter() - start
        row["pack_img_s"] = sum(len(items) for items in spec["splits"].values()) / seconds
        row["size_mb"] = megabytes(files_under(out))
        open_reader = partial(reader, spec, out, job["batch"])
        row.update(time_reads(open_reader, files_under(out), job["seconds"]))
    except Exception as exc:  # a peer that breaks says why in the table
        row["note"] = brief(exc)
    return row


def run_peer(peer: str, job_path: Path, out: Path) -> None:
    """The peer side of the run: the job's dataset packed and read, its row as JSON."""
    import torch

    # One intra-op thread, as packer's readers use: on a busy 2-core machine torch's OpenMP
    # threads thrash (the collate's torch.stack of a CamVid batch: 130 ms with 2, 6 ms with 1).
    torch.set_num_threads(1)
    job = json.loads(job_path.read_text())
    out.write_text(json.dumps(peer_result(peer, job["dataset"], job)))


def draw_chart(results_path: Path, png: Path) -> None:
    """Horizontal bars of read img/s per contender, one colour per dataset, log scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = json.loads(results_path.read_text())
    rows = sorted(
        (r for r in results["rows"] if r["read_img_s"]), key=lambda r: ORDER.index(r["kind"])
    )
    contenders = list(dict.fromkeys(r["contender"] for r in rows))
    datasets = list(dict.fromkeys(r["dataset"] for r in results["rows"]))
    height = 0.8 / len(datasets)
    fig, ax = plt.subplots(figsize=(11, 1.6 + 0.55 * len(contenders)))
    for d, name in enumerate(datasets):
        values = {r["contender"]: r["read_img_s"] for r in rows if r["dataset"] == name}
        shown = [c for c in contenders if c in values]
        places = [contenders.index(c) + d * height for c in shown]
        bars = ax.barh(places, [values[c] for c in shown], height, label=name)
        ax.bar_label(bars, [f"{values[c]:,.0f}" for c in shown], padding=3, fontsize=8)
    ax.set_yticks([i + 0.4 - height / 2 for i in range(len(contenders))], contenders)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlim(right=5 * max(r["read_img_s"] for r in rows))  # room for the value labels
    batches = f"shuffled batches of {results['batch']}, warm page cache"
    ax.set_xlabel(f"read img/s (log scale; {batches})")
    ax.set_title(f"packer beside its peers: {results['machine']}, {results['date']}", fontsize=10)
    ax.legend(loc="upper right")
    ax.grid(axis="x", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


# --- the orchestrator (the project's environment) --------------------------------------------


def make_synthetic_classes(root: Path, seed: int = 0) -> Path:
    """An ants/bees-like source: <split>/<class>/*.jpg of mixed sizes and orientations."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    for split, count in SYNTHETIC_CLASSES.items():
        for name in ("ants", "bees"):
            (root / split / name).mkdir(parents=True)
            for i in range(count):
                width, height = (500, 375) if i % 3 else (375, 500)
                image, _ = shapes_scene(rng, width, height)
                Image.fromarray(image).save(root / split / name / f"{i:04d}.jpg", quality=90)
    return root


def sources(synthetic: bool, tmp: Path, tile: int = 1) -> list[tuple[str, Path, tuple[int, int]]]:
    """(name, source folder, packed size) per dataset: the real ones, or synthetic ones; with
    `tile` > 1, each train file is listed that many times (links), for epochs of real length."""
    found = []
    for name, folder, make, size in (
        ("CamVid", "camvid", bench_read.make_synthetic, harness.SIZE),
        ("ants/bees", "hymenoptera", make_synthetic_classes, CLASSIFICATION_SIZE),
    ):
        src = DATA / folder
        if synthetic or not src.is_dir():
            src, name = make(tmp / f"synthetic-{folder}"), f"{name} (synthetic)"
        if tile > 1:
            src, name = linked_copy(src, tmp / f"tiled-{folder}", tile), f"{name} x{tile}"
        found.append((name, src, size))
    return found


def pack_formats(src: Path, size: tuple[int, int], out: Path) -> dict[str, dict]:
    """Pack `src` once per packer format: the dataset, img/s and MB, or why it could not."""
    from packer.formats import FORMATS

    packs: dict[str, dict] = {}
    for fmt in PACKER_FORMATS:
        if fmt not in FORMATS:
            packs[fmt] = {"note": "format not in this checkout (packer.formats.FORMATS)"}
            continue
        harness.warm(src)
        try:
            start = time.perf_counter()
            ds = packer.pack(src, out=out / fmt, format=fmt, size=size, overwrite=True)
            seconds = time.perf_counter() - start
        except Exception as exc:  # a format being written right now may not pack yet
            packs[fmt] = {"note": brief(exc)}
            continue
        count = sum(s.count for s in ds.splits.values())
        packs[fmt] = {
            "ds": ds,
            "pack_img_s": count / seconds,
            "size_mb": megabytes(files_under(ds.root)),
        }
    return packs


def split_items(ds: PackedDataset, split: str) -> Items:
    """The packed samples of a split, in pack order, as [image, mask] or [image, class id]."""
    part = ds[split]
    if ds.task == "segmentation":
        return [[part.source(i), part.mask_source(i)] for i in range(part.count)]
    labels = part.reader.read(np.arange(part.count))["labels"]
    return [[part.source(i), int(label)] for i, label in enumerate(labels)]


def dataset_spec(name: str, src: Path, size: tuple[int, int], ds: PackedDataset) -> dict:
    """What every contender gets: exactly the samples packer packed, per split."""
    return {
        "name": name,
        "src": str(src),
        "task": ds.task,
        "size": list(size),
        "classes": len(ds.classes),
        "splits": {split: split_items(ds, split) for split in ds.splits},
    }


def peer_row(peer: str, job: dict, tmp: Path) -> dict:
    """Run one peer on one dataset in a fresh process of the peers' environment: its row."""
    name = job["dataset"]["name"]
    if not PEERS_PYTHON.exists():
        return result(peer, peer, name, note="no .venv-peers: run benchmarks/setup_peers.sh")
    job_path, out = tmp / "job.json", tmp / "peer.json"
    job_path.write_text(json.dumps(job))
    out.unlink(missing_ok=True)
    command = [str(PEERS_PYTHON), __file__, "--peer", peer, "--job", str(job_path)]
    try:
        done = subprocess.run(
            [*command, "--json", str(out)], capture_output=True, text=True, timeout=PEER_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        return result(peer, peer, name, note=f"timed out after {PEER_TIMEOUT_S} s")
    if done.returncode != 0 or not out.exists():
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        return result(peer, peer, name, note=lines[-1][:140])
    return json.loads(out.read_text())


def naive_class_batch(
    items: Items, size: tuple[int, int], classes: int
) -> tuple[np.ndarray, np.ndarray]:
    """The classification generator way: decode, resize, float32, a one-hot row per label."""
    images = [
        cv2.resize(cv2.cvtColor(cv2.imread(path), cv2.COLOR_BGR2RGB), size).astype(np.float32)
        / 255.0
        for path, _ in items
    ]
    one_hot = np.zeros((len(items), classes), np.float32)
    for row, (_, label) in enumerate(items):
        one_hot[row, label] = 1.0
    return np.stack(images), one_hot


def naive_reader(spec: dict, batch: int) -> Reader:
    """bench_read's per-step loop (segmentation) or its classification twin, shuffled."""
    items, rng = spec["splits"]["train"], np.random.default_rng(0)
    if spec["task"] == "segmentation":
        make_batch = bench_read.naive_batch
    else:
        size, classes = tuple(spec["size"]), spec["classes"]
        make_batch = partial(naive_class_batch, size=size, classes=classes)

    def epoch() -> Iterator:
        order = rng.permutation(len(items))
        for start in range(0, len(order), batch):
            yield make_batch([items[i] for i in order[start : start + batch]])

    return epoch


def tfdata_reader(spec: dict, batch: int) -> Reader:
    """tf.data over the original files: decode, resize, float32, one-hot, AUTOTUNE parallel."""
    import tensorflow as tf

    width, height = spec["size"]
    classes = spec["classes"]

    def image(path: tf.Tensor) -> tf.Tensor:
        data = tf.io.read_file(path)
        if spec["task"] == "segmentation":
            pixels = tf.io.decode_png(data, channels=3)
        else:  # the ants/bees folder holds a GIF among the JPEGs
            pixels = tf.io.decode_image(data, channels=3, expand_animations=False)
        return tf.image.resize(pixels, (height, width)) / 255.0

    def target(value: tf.Tensor) -> tf.Tensor:
        if spec["task"] == "segmentation":
            mask = tf.io.decode_png(tf.io.read_file(value), channels=1)
            value = tf.image.resize(mask, (height, width), method="nearest")[..., 0]
        return tf.one_hot(tf.cast(value, tf.int32), classes)

    items = spec["splits"]["train"]
    paths, targets = [i[0] for i in items], [i[1] for i in items]
    dataset = (
        tf.data.Dataset.from_tensor_slices((paths, targets))
        .shuffle(len(items))
        .map(lambda p, t: (image(p), target(t)), num_parallel_calls=tf.data.AUTOTUNE)
        .batch(batch)
        .prefetch(tf.data.AUTOTUNE)
    )
    return lambda: dataset


def keras_reader(spec: dict, batch: int) -> Reader:
    """`keras.utils.image_dataset_from_directory` over the train folder, one-hot labels."""
    import keras

    width, height = spec["size"]
    dataset = keras.utils.image_dataset_from_directory(
        Path(spec["src"]) / "train",
        label_mode="categorical",
        image_size=(height, width),
        batch_size=batch,
        shuffle=True,
        seed=0,
        verbose=False,
    )
    return lambda: dataset


def sequence_reader(root: Path, batch: int) -> Reader:
    """`PackedSequence`, shuffled, uint8 (bench_read's), one epoch per call."""
    seq = harness.open_sequence(root, batch)

    def epoch() -> Iterator:
        for i in range(len(seq)):
            yield seq[i]
        seq.on_epoch_end()

    return epoch


def packer_tf_reader(root: Path, batch: int) -> Reader:
    """`packer.tf.dataset` over a pack, shuffled, uint8."""
    import packer.tf

    dataset = packer.tf.dataset(root, split="train", batch_size=batch, shuffle=True)
    return lambda: dataset


def packer_torch_reader(root: Path, batch: int) -> Reader:
    """`packer.torch.PackedDataset` through a DataLoader with 0 workers, shuffled, uint8."""
    import torch
    from torch.utils.data import DataLoader

    import packer.torch

    dataset = packer.torch.PackedDataset(
        root, split="train", batch_size=batch, shuffle=True, target_dtype=torch.uint8
    )
    loader = DataLoader(dataset, batch_size=None, num_workers=0)
    epochs = itertools.count(1)

    def epoch() -> Iterator:
        yield from loader
        dataset.set_epoch(next(epochs))

    return epoch


def load_frameworks() -> None:
    """Import TensorFlow and Keras before any timing, so that no first batch pays for them."""
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras  # noqa: F401
    import tensorflow  # noqa: F401


def original_files(spec: dict, split: str) -> list[Path]:
    """The source files (images and masks) of one split."""
    items = spec["splits"][split]
    return [Path(v) for item in items for v in item if isinstance(v, str)]


def original_results(spec: dict, batch: int, seconds: float) -> list[dict]:
    """Readers of the original files: the naive loop, tf.data and (classification) Keras."""
    name, files = spec["name"], original_files(spec, "train")
    size_mb = megabytes(f for split in spec["splits"] for f in original_files(spec, split))
    readers = [
        ("naive", "naive cv2 loop: float32 + one-hot", lambda: naive_reader(spec, batch)),
        ("tf.data", "tf.data on originals: float32 + one-hot", lambda: tfdata_reader(spec, batch)),
    ]
    if spec["task"] == "classification":
        label = "keras image_dataset_from_directory: float32"
        readers.append(("keras", label, lambda: keras_reader(spec, batch)))
    return [
        result(kind, label, name, size_mb=size_mb, **time_reads(open_reader, files, seconds))
        for kind, label, open_reader in readers
    ]


def packer_results(spec: dict, packs: dict[str, dict], batch: int, seconds: float) -> list[dict]:
    """packer's readers over each of its packs, and the np.copyto limit of the same bytes."""
    rows = []
    for fmt, pack in packs.items():
        reader = "packer.tf.dataset" if fmt == "tfrecord" else "PackedSequence"
        row = result(f"packer-{fmt}", f"packer {fmt}: {reader}, uint8", spec["name"])
        if "ds" not in pack:
            rows.append({**row, "note": pack["note"]})
            continue
        root = pack["ds"].root
        open_reader = packer_tf_reader if fmt == "tfrecord" else sequence_reader
        timing = time_reads(partial(open_reader, root, batch), files_under(root), seconds)
        row.update(pack_img_s=pack["pack_img_s"], size_mb=pack["size_mb"], **timing)
        rows.append(row)
    if "ds" in packs["npy"]:
        ds = packs["npy"]["ds"]
        files = files_under(ds.root)
        for kind, label, open_reader in (
            ("packer-npy-tf", "packer npy: packer.tf.dataset, uint8", packer_tf_reader),
            ("packer-npy-torch", "packer npy: packer.torch, 0 workers, uint8", packer_torch_reader),
        ):
            timing = time_reads(partial(open_reader, ds.root, batch), files, seconds)
            rows.append(result(kind, label, spec["name"], **timing))
        sample = sum(np.dtype(f.dtype).itemsize * int(np.prod(f.shape)) for f in ds.fields)
        rng = np.random.default_rng(1)
        source = rng.integers(0, 256, ds["train"].count * sample, dtype=np.uint8)
        threads = gather.thread_count()
        for kind, label, copiers, held in (
            ("copyto", "np.copyto of the same bytes, one core", 1, 1),
            (
                "copyto-all",
                f"np.copyto of the same bytes, {threads} threads (all cores)",
                threads,
                2,
            ),
            ("copyto-all-8", f"np.copyto, {threads} threads, into 8 batches in turn", threads, 8),
        ):
            rate = harness.copy_rate(source, sample, batch, seconds, copiers, held)
            rows.append(result(kind, label, spec["name"], read_img_s=rate))
    return rows


def goals(rows: list[dict]) -> list[dict]:
    """Each packer reader of the npy pack over the all-core copy and over FFCV, per dataset."""
    found = []
    for dataset in dict.fromkeys(r["dataset"] for r in rows):
        rate = {r["kind"]: r["read_img_s"] for r in rows if r["dataset"] == dataset}
        for reader, (base, target) in itertools.product(NPY_READERS, GOALS.items()):
            if rate.get(reader) and rate.get(base):
                value = rate[reader] / rate[base]
                found.append(
                    {
                        "dataset": dataset,
                        "reader": reader,
                        "over": base,
                        "value": value,
                        "target": target,
                        "ok": value >= target,
                    }
                )
    return found


def goals_table(found: list[dict]) -> str:
    """The goals as a Markdown table."""
    lines = ["| dataset | reader | over | ratio | goal | met |", "|---|---|---|---:|---:|---|"]
    for g in found:
        met = "yes" if g["ok"] else "**no**"
        lines.append(
            f"| {g['dataset']} | {g['reader']} | {g['over']} | {g['value']:.2f} "
            f"| >= {g['target']} | {met} |"
        )
    return "\n".join(lines)


def with_ratios(rows: list[dict], names: list[str]) -> list[dict]:
    """Rows in table order, each with its read img/s over packer npy's on the same dataset."""
    base = {r["dataset"]: r["read_img_s"] for r in rows if r["kind"] == "packer-npy"}
    for r in rows:
        known = r["read_img_s"] and base.get(r["dataset"])
        r["ratio"] = r["read_img_s"] / base[r["dataset"]] if known else None
    return sorted(rows, key=lambda r: (names.index(r["dataset"]), ORDER.index(r["kind"])))


def measure(args: argparse.Namespace, tmp: Path) -> dict:
    """Packs first (forking before any framework loads), then the peers, then packer's reads."""
    load_before = os.getloadavg()[0]
    specs, packs = [], {}
    for name, src, size in sources(args.synthetic, tmp, args.tile):
        print(f"packing {name} with packer ...", file=sys.stderr)
        packs[name] = pack_formats(src, size, tmp / "packer" / src.name)
        if "ds" not in packs[name]["npy"]:
            raise SystemExit(f"packer could not pack {src}: {packs[name]['npy']['note']}")
        specs.append(dataset_spec(name, src, size, packs[name]["npy"]["ds"]))
    settings = {"batch": args.batch_size, "seconds": args.seconds, "out": str(tmp / "peers")}
    settings["workers"] = os.cpu_count() or 1
    rows = []
    for spec, peer in itertools.product(specs, args.peers):
        print(f"{peer} on {spec['name']} ...", file=sys.stderr)
        rows.append(peer_row(peer, {**settings, "dataset": spec}, tmp))
    load_frameworks()
    for spec in specs:
        print(f"reading {spec['name']} ...", file=sys.stderr)
        rows += original_results(spec, args.batch_size, args.seconds)
        rows += packer_results(spec, packs[spec["name"]], args.batch_size, args.seconds)
    return {
        "machine": harness.machine(),
        "date": time.strftime("%Y-%m-%d"),
        "load_average": [load_before, os.getloadavg()[0]],
        "batch": args.batch_size,
        "seconds": args.seconds,
        "workers": settings["workers"],
        "datasets": [describe(spec) for spec in specs],
        "rows": with_ratios(rows, [spec["name"] for spec in specs]),
        "goals": goals(rows),
    }


def describe(spec: dict) -> str:
    """One line about a dataset: name, task, size, samples per split."""
    counts = ", ".join(f"{len(items)} {split}" for split, items in spec["splits"].items())
    width, height = spec["size"]
    return f"{spec['name']}: {spec['task']}, {spec['classes']} classes, {width}x{height}, {counts}"


def cell(value: float | None, digits: int = 0) -> str:
    """A number for the table, or a dash."""
    return "—" if value is None else f"{value:,.{digits}f}"


def table(rows: list[dict]) -> str:
    """The results as a Markdown table."""
    lines = [
        "| contender | dataset | pack img/s | size on disk MB | read img/s "
        "| read / packer-npy | first batch s | note |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        ratio = "—" if r["ratio"] is None else f"{r['ratio']:.3g}"
        numbers = [cell(r["pack_img_s"]), cell(r["size_mb"], 1), cell(r["read_img_s"])]
        lines.append(
            f"| {r['contender']} | {r['dataset']} | {' | '.join(numbers)} | {ratio} "
            f"| {cell(r['first_batch_s'], 2)} | {r['note']} |"
        )
    return "\n".join(lines)


def markdown(results: dict) -> str:
    """peers.md: when, where, on what, how, then the table."""
    before, after = results["load_average"]
    datasets = "\n".join(f"- {d}" for d in results["datasets"])
    return f"""# packer beside its peers

Measured by `.venv/bin/python benchmarks/bench_peers.py` (peers installed by
`bash benchmarks/setup_peers.sh`) on {results["date"]}: {results["machine"]},
1-minute load average {before:.1f} before the run and {after:.1f} after. The machine is shared:
numbers drift between runs; compare them within one run.

Data, the same samples for every contender (those packer packed):

{datasets}

How:

- **Pack**: train + val from the original files, decode and resize included,
  {results["workers"]} processes. packer runs its converter. Each peer runs in a fresh
  process, decodes with OpenCV (full decode, area resize, centre crop) and writes with its own
  writer, so LitData's worker start-up (spawn) and FFCV's numba compilation count: on a few
  hundred images they dominate.
- **Read**: the train split, shuffled batches of {results["batch"]}, uint8 unless the row says
  float32. The naive loop, PackedSequence, WebDataset and LitData read in the calling thread
  (the peers with one torch thread: two thrash on a busy 2-core machine); tf.data pipelines
  use TensorFlow's thread pools, FFCV its worker threads. One untimed epoch first (first batch
  s: from opening the reader, JIT compilation included), then whole epochs for at least
  {results["seconds"]:g} s, the files read once right before (warm page cache).
- **Size**: every file the contender wrote; the originals for the readers of original files.

{table(results["rows"])}

Reading on every core: each packer reader of the npy pack over the copy of the same bytes by
every core, and over FFCV's loader, in this run.

{goals_table(results["goals"])}
"""


def chart(results_path: Path, png: Path) -> None:
    """Draw the chart in the peers' environment (matplotlib lives there only)."""
    if not PEERS_PYTHON.exists():
        print("no .venv-peers: no chart (run `bash benchmarks/setup_peers.sh`)", file=sys.stderr)
        return
    command = [str(PEERS_PYTHON), __file__, "--chart", str(results_path), "--png", str(png)]
    done = subprocess.run(command, capture_output=True, text=True)
    print(f"chart: {png}" if done.returncode == 0 else f"no chart: {done.stderr.strip()}")


def main() -> None:
    """Orchestrate (default), or run one peer / draw the chart when called as a helper."""
    args = parse_args()
    if args.peer:
        run_peer(args.peer, args.job, args.json)
    elif args.chart:
        draw_chart(args.chart, args.png)
    else:
        orchestrate(args)


def orchestrate(args: argparse.Namespace) -> None:
    """Measure everything, print and write the table, draw the chart."""
    with tempfile.TemporaryDirectory(prefix="packer-peers-") as tmp:
        results = json.loads(scrub(json.dumps(measure(args, Path(tmp))), Path(tmp)))
        results_path = Path(tmp) / "results.json"
        results_path.write_text(json.dumps(results, indent=2))
        args.results.mkdir(parents=True, exist_ok=True)
        text = markdown(results)
        (args.results / "peers.md").write_text(text)
        print(text)
        chart(results_path, args.results / "peers.png")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


def scrub(text: str, tmp: Path) -> str:
    """Text without this machine's paths (error messages may name files)."""
    for path, shown in ((tmp, "<tmp>"), (DATA, "../shared/data"), (REPO, ".")):
        text = text.replace(str(path.resolve()), shown).replace(str(path), shown)
    return text


if __name__ == "__main__":
    main()
