"""PackedSequence(augment=..., workers=2) beside ImageDataGenerator.flow_from_directory, in one run.

Data: the ants/bees JPEGs of ../shared/data/hymenoptera/train (two class folders; --synthetic
writes 244 random JPEGs of 500x375 in two class folders instead), each hard-linked --copies
times (default 8: 1,960 files, epochs of 62 batches), at 224x224, batches of 32.
Settings: the issue's cats-vs-dogs ImageDataGenerator arguments (rotation 10 degrees, shifts
0.05, zoom 0.05, shear 0.05 degrees, channel shift 10, horizontal flip), given to both.

Each side pays what it needs per step, which is the point of the comparison:

  packer    the folder is packed once beforehand (224x224, `resize="stretch"` like IDG's
            target_size; not timed), then every step reads decoded records from the
            memory-mapped shards and augments them (packer.Augment, seed 0); uint8 images
            and one-hot labels (one_hot=True, as IDG's class_mode="categorical")
  IDG       every step opens and decodes the JPEGs (PIL), resizes them to 224x224 (IDG's
            default nearest), and runs random_transform (scipy.ndimage) per image;
            float32 images and one-hot labels

Rows (context rows in brackets):

  packer workers=1               PackedSequence(..., augment=...) in this process (OpenCV
                                 with its own threads, as a user gets it)
  packer workers=2               workers=2: packer's processes, batches in shared memory
  [packer workers=2, float32]    the same with normalize="unit" (float32 batches, as IDG's)
  [packer workers=2, shuffled batch order]   the adapter made with shuffle=True, as
                                 model.fit(shuffle=True), its default, makes it: batch
                                 indices asked in a shuffled order
  IDG workers=1                  flow_from_directory's iterator as it is
  IDG workers=2 threads          `iterator.workers = 2`: Keras' thread pool, what Keras 2's
                                 fit(workers=2) gave by default
  IDG workers=2 processes        also `use_multiprocessing = True` (batches pickled through
                                 pipes, the pool restarted every epoch)
  [IDG no augmentation]          ImageDataGenerator() with no arguments, workers=1

In Keras 3 neither flow_from_directory nor its DirectoryIterator takes `workers`, and fit
no longer does; the iterator is a keras.utils.PyDataset whose `workers` and
`use_multiprocessing` properties can be set, which is what this script does. Every row is
iterated the way model.fit iterates a PyDataset: Keras' PyDatasetAdapter, whole epochs
(on_epoch_begin, its numpy iterator, on_epoch_end), batches in order (adapter
shuffle=False: both sequences shuffle their samples themselves) unless said, each batch
dropped once received (no model). The first epoch of every row (workers starting) is timed
apart; then the rows take turns in a different order each round, each running whole epochs
for at least --seconds, and img/s is the median over --rounds rounds. CPU ms/img adds up
every process of the row (parent, threads, workers). Ratios are given of the medians, of
each row's best round (the least disturbed), and of CPU per image: on a machine shared with
other work the rates drift with the load, what each way costs does much less.

ImageDataGenerator needs scipy, which is no dependency of packer: the IDG rows run in the
peers' environment (`bash benchmarks/setup_peers.sh` makes .venv-peers; Keras there on the
torch backend). This script, run by the project's .venv, starts itself there (`--peer`) and
asks it for one row's round at a time, so only one side runs at any moment.

    .venv/bin/python benchmarks/bench_flow.py [--synthetic] [--rounds 7] [--seconds 3]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import json
import os
import random
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import harness
from harness import cpu_seconds

REPO = Path(__file__).resolve().parents[1]
HYMENOPTERA = REPO.parent / "shared" / "data" / "hymenoptera" / "train"
PEERS_PYTHON = REPO / ".venv-peers" / "bin" / "python"
SIZE = 224
BATCH = 32
SETTINGS = dict(
    rotation_range=10,
    width_shift_range=0.05,
    height_shift_range=0.05,
    zoom_range=0.05,
    shear_range=0.05,
    channel_shift_range=10,
    horizontal_flip=True,
)
PACKER_ROWS = (
    "packer workers=1",
    "packer workers=2",
    "packer workers=2, float32",
    "packer workers=2, shuffled batch order",
)
IDG_ROWS = (
    "IDG workers=1",
    "IDG workers=2 threads",
    "IDG workers=2 processes",
    "IDG no augmentation, workers=1",
)
MAIN_RATIOS = {
    "packer workers=2 / IDG workers=2 threads": ("packer workers=2", "IDG workers=2 threads"),
    "packer workers=2 / IDG workers=2 processes": (
        "packer workers=2",
        "IDG workers=2 processes",
    ),
}
CONTEXT_RATIOS = {
    "packer workers=1 / IDG workers=1": ("packer workers=1", "IDG workers=1"),
    "packer workers=2, float32 / IDG workers=2 threads": (
        "packer workers=2, float32",
        "IDG workers=2 threads",
    ),
    "packer workers=2 / packer workers=1": ("packer workers=2", "packer workers=1"),
    "packer workers=2, shuffled batch order / in order": (
        "packer workers=2, shuffled batch order",
        "packer workers=2",
    ),
    "IDG workers=2 threads / IDG workers=1": ("IDG workers=2 threads", "IDG workers=1"),
    "IDG workers=2 processes / IDG workers=1": ("IDG workers=2 processes", "IDG workers=1"),
}
TARGET = 15.0


def parse_args() -> argparse.Namespace:
    """Command-line options (--peer and --data are how the script calls itself)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--synthetic", action="store_true", help="random JPEGs, not ants/bees")
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds; medians")
    parser.add_argument("--seconds", type=float, default=3.0, help="least seconds per round")
    parser.add_argument(
        "--copies", type=int, default=8, help="hard-linked copies of each image (epoch length)"
    )
    parser.add_argument("--json", type=Path, help="also write the results to this JSON file")
    parser.add_argument("--peer", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args()


# --- timing, the same on both sides ------------------------------------------------------------


def epoch(adapter) -> int:
    """One epoch through Keras' PyDatasetAdapter, as model.fit goes (minus the model): images."""
    images = 0
    adapter.on_epoch_begin()
    for batch in adapter.get_numpy_iterator():
        images += len(batch[0])
        del batch
    adapter.on_epoch_end()
    return images


def epochs_for(adapter, seconds: float) -> dict:
    """Whole epochs until `seconds` have passed: images, wall and CPU seconds, epochs."""
    images = epochs = 0
    start, cpu = time.perf_counter(), cpu_seconds()
    while (wall := time.perf_counter() - start) < seconds or not epochs:
        images += epoch(adapter)
        epochs += 1
    wall = time.perf_counter() - start
    return {"images": images, "wall": wall, "cpu": cpu_seconds() - cpu, "epochs": epochs}


def first_epoch(adapter) -> float:
    """Seconds of the first epoch (workers start, files come into the page cache)."""
    start = time.perf_counter()
    epoch(adapter)
    return time.perf_counter() - start


# --- packer's side, in the project's environment ------------------------------------------------


def synthetic_jpegs(root: Path) -> Path:
    """244 random 500x375 JPEGs (smooth colour fields with noise) in two class folders."""
    import cv2
    import numpy as np

    rng = np.random.default_rng(0)
    for i in range(244):
        folder = root / ("ants", "bees")[i % 2]
        folder.mkdir(parents=True, exist_ok=True)
        small = rng.integers(0, 256, (6, 8, 3), np.uint8)
        image = cv2.resize(small, (500, 375), interpolation=cv2.INTER_CUBIC)
        noise = rng.integers(-20, 21, image.shape)
        image = np.clip(image.astype(np.int16) + noise, 0, 255).astype(np.uint8)
        cv2.imwrite(str(folder / f"{i:04d}.jpg"), image, [cv2.IMWRITE_JPEG_QUALITY, 90])
    return root


def enlarged(train: Path, root: Path, copies: int) -> Path:
    """`train`'s class folders with every file hard-linked `copies` times: epochs of realistic
    length, so that Keras' fixed cost per epoch (~0.1 s to start and stop its enqueuer
    threads, whoever's sequence it drives) does not pass for a cost per batch."""
    for path in sorted(train.rglob("*")):
        if path.is_file():
            folder = root / path.parent.relative_to(train)
            folder.mkdir(parents=True, exist_ok=True)
            for copy in range(copies):
                os.link(path, folder / f"{path.stem}-{copy}{path.suffix}")
    return root


def packer_adapters(train: Path, tmp: Path) -> tuple[dict, list, dict]:
    """Pack `train` at 224x224 (untimed), then the packer rows' adapters over the pack."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.path.insert(0, str(REPO))
    from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter

    import packer
    from packer.keras import PackedSequence

    start = time.perf_counter()
    dataset = packer.pack(train, tmp / "pack", size=SIZE, resize="stretch", workers=2)
    info = {
        "pack_seconds": time.perf_counter() - start,
        "packed": dataset.manifest["splits"]["train"]["count"],
        "rejected": len(dataset.manifest.get("rejected", [])),
    }

    def sequence(workers: int, **options) -> PackedSequence:
        augment = packer.Augment(**SETTINGS, seed=0)
        return PackedSequence(
            tmp / "pack", "train", BATCH, one_hot=True, augment=augment, workers=workers, **options
        )

    sequences = {
        "packer workers=1": sequence(1),
        "packer workers=2": sequence(2),
        "packer workers=2, float32": sequence(2, normalize="unit"),
        "packer workers=2, shuffled batch order": sequence(2),
    }
    adapters = {
        name: PyDatasetAdapter(seq, shuffle="shuffled" in name) for name, seq in sequences.items()
    }
    return adapters, list(sequences.values()), info


# --- ImageDataGenerator's side, in the peers' environment ---------------------------------------


def peer_main(train: Path) -> None:
    """Serve rounds of the IDG rows: one JSON request per line in, one JSON answer out."""
    os.environ.setdefault("KERAS_BACKEND", "torch")
    import keras
    import PIL
    import scipy
    from keras.src.legacy.preprocessing.image import ImageDataGenerator
    from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter

    def iterator(settings: dict, workers: int = 1, processes: bool = False):
        flow = ImageDataGenerator(**settings).flow_from_directory(
            str(train), target_size=(SIZE, SIZE), batch_size=BATCH
        )
        flow.workers, flow.use_multiprocessing = workers, processes  # PyDataset's properties
        return flow

    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")  # "Found 244 images" would break the protocol
        flows = {
            "IDG workers=1": iterator(SETTINGS),
            "IDG workers=2 threads": iterator(SETTINGS, 2),
            "IDG workers=2 processes": iterator(SETTINGS, 2, processes=True),
            "IDG no augmentation, workers=1": iterator({}),
        }
    adapters = {name: PyDatasetAdapter(flow, shuffle=False) for name, flow in flows.items()}
    first = {name: first_epoch(adapter) for name, adapter in adapters.items()}
    versions = {
        "keras": keras.__version__,
        "keras_backend": keras.backend.backend(),
        "scipy": scipy.__version__,
        "pillow": PIL.__version__,
    }
    images = flows["IDG workers=1"].samples
    print(json.dumps({"first": first, "versions": versions, "images": images}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        print(json.dumps(epochs_for(adapters[request["run"]], request["seconds"])), flush=True)


# --- the run ------------------------------------------------------------------------------------


def measure(args: argparse.Namespace, tmp: Path) -> dict:
    """Every number of the table, in one run."""
    train = HYMENOPTERA
    source = "hymenoptera train (ants/bees JPEGs)"
    if args.synthetic or not train.is_dir():
        train, source = synthetic_jpegs(tmp / "jpegs"), "244 synthetic 500x375 JPEGs"
    if args.copies > 1:
        train = enlarged(train, tmp / "copies", args.copies)
        source += f", each hard-linked {args.copies} times"
    results: dict = {"data": source, "notes": []}
    peer = None
    if PEERS_PYTHON.exists():
        env = {"KERAS_BACKEND": "torch", "PYTHONWARNINGS": "ignore"}
        peer = harness.Peer(PEERS_PYTHON, __file__, ["--data", str(train)], env)
        results["idg_images"] = peer.hello["images"]
    else:
        results["notes"].append("no .venv-peers: run benchmarks/setup_peers.sh for the IDG rows")
    adapters, sequences, results["pack"] = packer_adapters(train, tmp)
    import keras
    import tensorflow as tf

    results["versions"] = {
        "packer side": {"keras": keras.__version__, "tensorflow": tf.__version__},
        "IDG side": peer.hello["versions"] if peer else None,
    }
    results["first_epoch_s"] = {name: first_epoch(a) for name, a in adapters.items()}
    if peer:
        results["first_epoch_s"].update(peer.hello["first"])
    rows = {name: functools.partial(epochs_for, adapter) for name, adapter in adapters.items()}
    for name in IDG_ROWS if peer else ():
        rows[name] = lambda seconds, n=name: peer.ask({"run": n, "seconds": seconds})
    random.seed(0)  # the adapter's shuffled batch order
    runs = harness.side_by_side(rows, args.seconds, args.rounds, measure=lambda run, s: run(s))
    if peer:
        peer.close()
    for seq in sequences:
        seq.close()
    results["runs"] = runs
    results["rates"] = {
        name: statistics.median(run["images"] / run["wall"] for run in rs)
        for name, rs in runs.items()
    }
    results["spread"] = {
        name: [
            min(run["images"] / run["wall"] for run in rs),
            max(r["images"] / r["wall"] for r in rs),
        ]
        for name, rs in runs.items()
    }
    results["cpu_ms_per_image"] = {
        name: 1e3 * statistics.median(run["cpu"] / run["images"] for run in rs)
        for name, rs in runs.items()
    }
    results["load_average_end"] = os.getloadavg()[0]
    return results


def ratios(results: dict) -> dict:
    """Each ratio of the median img/s, of the best rounds' img/s (the least disturbed), and
    the inverse ratio of CPU per image (what each costs, whatever else the machine runs)."""
    rates, cpu = results["rates"], results["cpu_ms_per_image"]
    best = {name: high for name, (_, high) in results["spread"].items()}
    return {
        name: {"median": rates[a] / rates[b], "best": best[a] / best[b], "cpu": cpu[b] / cpu[a]}
        for name, (a, b) in {**MAIN_RATIOS, **CONTEXT_RATIOS}.items()
        if a in rates and b in rates
    }


def report(results: dict, args: argparse.Namespace) -> None:
    """The tables, as the README would show them."""
    pack = results["pack"]
    notes = (
        f"224x224, {results['data']}: {pack['packed']} images packed in "
        f"{pack['pack_seconds']:.1f} s (untimed), {results.get('idg_images', '?')} found by IDG; "
        f"batches of {BATCH}, whole epochs for >= {args.seconds:g} s per row and round, median "
        f"of {args.rounds} interleaved rounds; load average {results['load_average_end']:.1f} "
        "at the end (shared machine, compare within a run)"
    )
    rows = [
        [name, rate, "{:,.0f}..{:,.0f}".format(*results["spread"][name]),
         f"{results['cpu_ms_per_image'][name]:.2f}", f"{results['first_epoch_s'][name]:.2f}"]
        for name, rate in results["rates"].items()
    ]  # fmt: skip
    headers = ["row", "img/s", "min..max", "CPU ms/img", "first epoch s"]
    harness.report("packer beside flow_from_directory", headers, rows, notes)
    ratio_rows = [
        [name, *(f"{value[k]:.1f} x" for k in ("median", "best", "cpu")),
         f">= {TARGET:g} x" if name in MAIN_RATIOS else ""]
        for name, value in results["ratios"].items()
    ]  # fmt: skip
    headers = ["ratio", "medians", "best rounds", "CPU per image", "target"]
    print(harness.table(headers, ratio_rows))
    print("(CPU per image: the second row's CPU ms/img over the first's)")
    versions = results["versions"]
    print(f"\npacker side: {fmt(versions['packer side'])}; IDG side: {fmt(versions['IDG side'])}")
    for note in results["notes"]:
        print(f"note: {note}")


def fmt(versions: dict | None) -> str:
    """name version, name version, ..."""
    return ", ".join(f"{k} {v}" for k, v in versions.items()) if versions else "not run"


def main() -> None:
    args = parse_args()
    if args.peer:
        peer_main(args.data)
        return
    with tempfile.TemporaryDirectory() as tmp:
        results = measure(args, Path(tmp))
    results["ratios"] = ratios(results)
    report(results, args)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
