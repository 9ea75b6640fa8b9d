"""packer.augment beside albumentations, ImageDataGenerator and Keras' layers, in one run.

Data: the CamVid train pairs from ../shared/data resized to 224x224 (synthetic shapes where
absent). Settings: the issue's cats-vs-dogs ImageDataGenerator arguments (rotation 10,
shifts 0.05, zoom 0.05, shear 5 degrees, channel shift 10, horizontal flip). One core
(process pinned, OpenCV/torch one thread), image + mask unless said, alternating rounds of
--seconds each, medians:

  packer numpy       Augment.apply (draw, one warpAffine per image and per mask, colour)
  bare cv2           cv2.warpAffine of image and mask + cv2.flip of both, no draw, no
                     colour: the plain OpenCV loop
  albumentations     Affine + HorizontalFlip + RGBShift on image and mask
  IDG image+mask     ImageDataGenerator random_transform, then apply_transform on the mask
                     with the same parameters (a second, nearest-neighbour generator)
  IDG image          random_transform alone (the issue's 145 img/s figure)
  packer torch       torch_exec.apply, batches of 32 on the CPU, one thread (its place is
                     the GPU; on the CPU the NumPy executor is the one to use)

Then packer numpy in 2 processes vs 1 (each pinned to its own core; bare cv2 beside it
shows what the machine's two cores give at that moment), the tf executor
against Keras' RandomFlip + RandomRotation + RandomZoom + RandomTranslation in tf.data
(images only, as the layers cannot move a mask along; all cores), and the mean absolute
difference between ImageDataGenerator.apply_transform and packer for IDG's own draws.

The baselines run in the peers' environment (`bash benchmarks/setup_peers.sh` makes
.venv-peers; Keras there on the torch backend): this script, run by the project's .venv,
starts itself there (`--peer`) and asks it for one round at a time.

    .venv/bin/python benchmarks/bench_augment.py [--synthetic] [--rounds 5] [--seconds 2]
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import cv2
import harness
import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from packer.augment import Augment, numpy_exec  # noqa: E402
from packer.augment.idg import from_idg  # noqa: E402

CAMVID = REPO.parent / "shared" / "data" / "camvid"
PEERS_PYTHON = REPO / ".venv-peers" / "bin" / "python"
TORCH_KERAS = {"KERAS_BACKEND": "torch"}  # the peers' Keras
SIZE = 224
BATCH = 32
SETTINGS = dict(
    rotation_range=10,
    width_shift_range=0.05,
    height_shift_range=0.05,
    zoom_range=0.05,
    shear_range=5,
    channel_shift_range=10,
    horizontal_flip=True,
)
ONE_CORE = ("packer numpy", "bare cv2", "albumentations", "IDG image+mask", "IDG image")
PEER_RUNS = ("albumentations", "IDG image+mask", "IDG image")
TARGETS = {
    "packer numpy / albumentations": 1.5,
    "packer numpy / IDG image": 20.0,
    "packer numpy 2 processes / 1": 1.7,
    "packer tf / Keras layers": 1.0,
}


def parse_args() -> argparse.Namespace:
    """Command-line options (--peer and --data are how the script calls itself)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--synthetic", action="store_true", help="synthetic shapes, not CamVid")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds; medians")
    parser.add_argument("--seconds", type=float, default=2.0, help="seconds per round")
    parser.add_argument("--json", type=Path, help="also write the results to this JSON file")
    parser.add_argument("--peer", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args()


def load_pairs(synthetic: bool) -> tuple[np.ndarray, np.ndarray, str]:
    """uint8 images [N, 224, 224, 3] and masks [N, 224, 224], and where they came from."""
    train = CAMVID / "train"
    if not synthetic and train.is_dir():
        images, masks = [], []
        for path in sorted(train.glob("*.png")):
            image = cv2.cvtColor(cv2.imread(str(path)), cv2.COLOR_BGR2RGB)
            mask = cv2.imread(str(CAMVID / "trainannot" / path.name), cv2.IMREAD_GRAYSCALE)
            images.append(cv2.resize(image, (SIZE, SIZE), interpolation=cv2.INTER_AREA))
            masks.append(cv2.resize(mask, (SIZE, SIZE), interpolation=cv2.INTER_NEAREST))
        return np.stack(images), np.stack(masks), f"CamVid train, {len(images)} pairs"
    from packer.synthetic import shapes_scene

    rng = np.random.default_rng(0)
    pairs = [shapes_scene(rng, SIZE, SIZE) for _ in range(150)]
    images = np.stack([p[0] for p in pairs]).astype(np.uint8)
    return images, np.stack([p[1] for p in pairs]), "synthetic shapes, 150 pairs"


def pin(cpu: int) -> None:
    """This process on one core, its libraries on one thread."""
    os.sched_setaffinity(0, {cpu % os.cpu_count()})
    cv2.setNumThreads(1)


def batches(count: int) -> Callable[[], tuple[int, np.ndarray]]:
    """Successive (epoch, indices) of BATCH samples over `count`, wrapping into new epochs."""
    state = {"next": 0}

    def following() -> tuple[int, np.ndarray]:
        start = state["next"]
        state["next"] += BATCH
        indices = np.arange(start, start + BATCH)
        return start // count, indices % count

    return following


# --- the contenders in packer's environment --------------------------------------------------


def packer_numpy(images: np.ndarray, masks: np.ndarray) -> Callable[[], int]:
    """Augment.apply on batches, writing into reused buffers as a reader does.

    Batches are views of the data where they can be (the baselines copy nothing either)."""
    aug, following = Augment(**SETTINGS, seed=0), batches(len(images))
    out = (np.empty((BATCH, SIZE, SIZE, 3), np.uint8), np.empty((BATCH, SIZE, SIZE), np.uint8))

    def step() -> int:
        epoch, indices = following()
        take = slice(indices[0], indices[0] + BATCH) if indices[-1] > indices[0] else indices
        aug.apply(images[take], masks[take], epoch=epoch, indices=indices, out=out)
        return BATCH

    return step


def bare_cv2(images: np.ndarray, masks: np.ndarray) -> Callable[[], int]:
    """A fixed rotation warp and a flip per image and mask: no draw, no colour."""
    matrix = cv2.getRotationMatrix2D((SIZE / 2 - 0.5, SIZE / 2 - 0.5), 7.0, 1.02)
    warped_image = np.empty((SIZE, SIZE, 3), np.uint8)
    warped_mask = np.empty((SIZE, SIZE), np.uint8)
    following = batches(len(images))

    def step() -> int:
        _, indices = following()
        for i in indices:
            cv2.warpAffine(images[i], matrix, (SIZE, SIZE), dst=warped_image)
            cv2.warpAffine(masks[i], matrix, (SIZE, SIZE), dst=warped_mask, flags=cv2.INTER_NEAREST)
            cv2.flip(warped_image, 1, dst=warped_image)
            cv2.flip(warped_mask, 1, dst=warped_mask)
        return BATCH

    return step


def packer_torch(images: np.ndarray, masks: np.ndarray) -> Callable[[], int]:
    """torch_exec.apply on whole batches on the CPU."""
    import torch

    from packer.augment import torch_exec

    torch.set_num_threads(1)
    aug, following = Augment(**SETTINGS, seed=0), batches(len(images))

    def step() -> int:
        epoch, indices = following()
        params = aug.draw(epoch, indices, (SIZE, SIZE))
        torch_exec.apply(images[indices], masks[indices], params, device="cpu")
        return BATCH

    return step


def _worker(kind: str, data: Path, cpu: int, start_at: float, seconds: float) -> int:
    """One process of a multi-process run: images done between two wall times."""
    pin(cpu)
    loaded = np.load(data)
    step = (packer_numpy if kind == "packer numpy" else bare_cv2)(loaded["images"], loaded["masks"])
    step()
    while time.time() < start_at:
        time.sleep(0.001)
    done = 0
    while time.time() < start_at + seconds:
        done += step()
    return done


def processes_rate(pool, kind: str, data: Path, processes: int, seconds: float) -> float:
    """img/s of `processes` pinned workers running `kind` together for `seconds`."""
    start_at = time.time() + 0.5
    jobs = [
        pool.apply_async(_worker, (kind, data, cpu, start_at, seconds)) for cpu in range(processes)
    ]
    return sum(job.get() for job in jobs) / seconds


# --- TensorFlow: packer's tf executor vs Keras' preprocessing layers ------------------------


def tf_rates(images: np.ndarray, masks: np.ndarray, rounds: int, seconds: float) -> dict:
    """Median img/s of tf.data pipelines augmenting batches of BATCH images."""
    import tensorflow as tf

    from packer.augment import tf_exec

    aug = Augment(**SETTINGS, seed=0)
    layers = tf.keras.Sequential(
        [
            tf.keras.layers.RandomFlip("horizontal", seed=0),
            tf.keras.layers.RandomRotation(10 / 360, fill_mode="nearest", seed=1),
            tf.keras.layers.RandomZoom(0.05, fill_mode="nearest", seed=2),
            tf.keras.layers.RandomTranslation(0.05, 0.05, fill_mode="nearest", seed=3),
        ]
    )
    n = len(images)
    base = tf.data.Dataset.from_tensor_slices((images, masks, np.arange(n))).repeat()
    base = base.batch(BATCH, drop_remainder=True)
    auto = tf.data.AUTOTUNE
    pipelines = {
        "packer tf image": base.map(
            lambda i, m, k: tf_exec.augment(aug, i, None, 0, k)[0], num_parallel_calls=auto
        ),
        "packer tf image+mask": base.map(
            lambda i, m, k: tf_exec.augment(aug, i, m, 0, k), num_parallel_calls=auto
        ),
        "Keras layers image": base.map(
            lambda i, m, k: tf.cast(layers(tf.cast(i, tf.float32), training=True), tf.uint8),
            num_parallel_calls=auto,
        ),
    }
    iterators = {name: iter(ds.prefetch(auto)) for name, ds in pipelines.items()}

    def stepper(it) -> Callable[[], int]:
        def step() -> int:
            next(it)
            return BATCH

        return step

    steps = {name: stepper(it) for name, it in iterators.items()}
    times = harness.side_by_side(steps, seconds, rounds, warmup=1)
    return {name: statistics.median(v) for name, v in times.items()}


# --- the peers' environment ------------------------------------------------------------------


def peer_main(data: Path) -> None:
    """Serve rounds of the baselines: one JSON request per line in, one JSON answer out."""
    os.environ.setdefault("KERAS_BACKEND", "torch")
    import albumentations as A
    from keras.src.legacy.preprocessing.image import ImageDataGenerator

    pin(0)
    import torch

    torch.set_num_threads(1)
    loaded = np.load(data)
    images, masks = loaded["images"], loaded["masks"]
    albu = A.Compose(
        [
            A.Affine(
                rotate=(-10, 10),
                translate_percent=(-0.05, 0.05),
                scale=(0.95, 1.05),
                shear=(-5, 5),
                interpolation=cv2.INTER_LINEAR,
                mask_interpolation=cv2.INTER_NEAREST,
                border_mode=cv2.BORDER_REPLICATE,
                p=1.0,
            ),
            A.HorizontalFlip(p=0.5),
            A.RGBShift(10, 10, 10, p=1.0),
        ]
    )
    idg = ImageDataGenerator(**SETTINGS)
    geometry = {k: v for k, v in SETTINGS.items() if k != "channel_shift_range"}
    idg_mask = ImageDataGenerator(**geometry, interpolation_order=0)
    following = batches(len(images))

    def albumentations_step() -> int:
        for i in following()[1]:
            albu(image=images[i], mask=masks[i])
        return BATCH

    def idg_pair_step() -> int:
        for i in following()[1]:
            x = images[i].astype(np.float32)
            params = idg.get_random_transform(x.shape)
            idg.apply_transform(x, params)
            idg_mask.apply_transform(masks[i][..., None].astype(np.float32), params)
        return BATCH

    def idg_image_step() -> int:
        for i in following()[1]:
            idg.random_transform(images[i].astype(np.float32))
        return BATCH

    steps = {
        "albumentations": albumentations_step,
        "IDG image+mask": idg_pair_step,
        "IDG image": idg_image_step,
    }
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if "run" in request:
            answer = {"img_s": harness.run_for(steps[request["run"]], request["seconds"], 1)}
        else:
            answer = {"mae": idg_mae(idg, images)}
        print(json.dumps(answer), flush=True)


def idg_mae(idg, images: np.ndarray) -> float:
    """Mean |ImageDataGenerator.apply_transform - packer| over IDG's own random draws."""
    errors = []
    for i, image in enumerate(images[:64]):
        x = image.astype(np.float32)
        params = idg.get_random_transform(x.shape, seed=i)
        want = idg.apply_transform(x, params)
        got, _ = numpy_exec.apply(image[None], None, from_idg(params, x.shape[:2]))
        errors.append(np.abs(got[0] - want).mean())
    return float(np.mean(errors))


# --- the run ---------------------------------------------------------------------------------


def measure(args: argparse.Namespace, tmp: Path) -> dict:
    """Every number of the table, in one run."""
    images, masks, source = load_pairs(args.synthetic)
    data = tmp / "pairs.npz"
    np.savez(data, images=images, masks=masks)
    results: dict = {"data": source, "rates": {}, "notes": []}
    peer = None
    if PEERS_PYTHON.exists():
        peer = harness.Peer(PEERS_PYTHON, __file__, ["--data", str(data)], TORCH_KERAS)
    else:
        results["notes"].append("no .venv-peers: run benchmarks/setup_peers.sh for the baselines")
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:  # started before this process pins itself
        pin(0)
        local = {
            "packer numpy": packer_numpy(images, masks),
            "bare cv2": bare_cv2(images, masks),
            "packer torch": packer_torch(images, masks),
        }
        runs = {
            name: functools.partial(harness.run_for, step, warmup=1) for name, step in local.items()
        }
        for name in PEER_RUNS if peer else ():
            runs[name] = lambda seconds, n=name: peer.ask({"run": n, "seconds": seconds})["img_s"]
        times = harness.side_by_side(runs, args.seconds, args.rounds, measure=lambda run, s: run(s))
        if peer:
            results["idg_mae"] = peer.ask({"mae": True})["mae"]
            peer.close()
        os.sched_setaffinity(0, range(os.cpu_count()))
        together = {
            f"{kind}, {n} process{'es' if n > 1 else ''}": functools.partial(
                processes_rate, pool, kind, data, n
            )
            for kind in ("packer numpy", "bare cv2")
            for n in (1, 2)
        }
        times |= harness.side_by_side(
            together, args.seconds, args.rounds, measure=lambda run, s: run(s)
        )
    results["rates"] = {name: statistics.median(v) for name, v in times.items()}
    cv2.setNumThreads(-1)
    results["rates"].update(tf_rates(images, masks, args.rounds, args.seconds))
    return results


def ratios(rates: dict) -> dict:
    """The issue's ratios from the medians."""
    pairs = {
        "packer numpy / albumentations": ("packer numpy", "albumentations"),
        "packer numpy / IDG image": ("packer numpy", "IDG image"),
        "packer numpy / IDG image+mask": ("packer numpy", "IDG image+mask"),
        "packer numpy / bare cv2": ("packer numpy", "bare cv2"),
        "packer numpy 2 processes / 1": ("packer numpy, 2 processes", "packer numpy, 1 process"),
        "bare cv2 2 processes / 1 (the machine's ceiling now)": (
            "bare cv2, 2 processes",
            "bare cv2, 1 process",
        ),
        "packer tf / Keras layers": ("packer tf image", "Keras layers image"),
    }
    return {k: rates[a] / rates[b] for k, (a, b) in pairs.items() if a in rates and b in rates}


def report(results: dict, args: argparse.Namespace) -> None:
    """The tables, as the README shows them."""
    where = {name: " (1 core)" for name in ONE_CORE} | {"packer torch": " (CPU, 1 thread)"}
    rows = [[name + where.get(name, ""), rate] for name, rate in results["rates"].items()]
    notes = (
        f"224x224, {results['data']}, batches of {BATCH}, median of {args.rounds} interleaved "
        f"rounds of {args.seconds:g} s; shared machine, compare within a run."
    )
    harness.report("packer.augment beside its peers", ["contender", "img/s"], rows, notes)
    targets = [
        [name, f"{value:.2f} x", f">= {TARGETS[name]:g} x" if name in TARGETS else ""]
        for name, value in ratios(results["rates"]).items()
    ]
    print(harness.table(["ratio", "measured", "target"], targets))
    if "idg_mae" in results:
        print(
            "\nImageDataGenerator.apply_transform vs packer on IDG's own draws "
            f"(64 images, 0..255 scale): mean absolute difference {results['idg_mae']:.3f}"
        )
    for note in results["notes"]:
        print(f"note: {note}")


def main() -> None:
    args = parse_args()
    if args.peer:
        peer_main(args.data)
        return
    with tempfile.TemporaryDirectory() as tmp:
        results = measure(args, Path(tmp))
    results["ratios"] = ratios(results["rates"])
    report(results, args)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
