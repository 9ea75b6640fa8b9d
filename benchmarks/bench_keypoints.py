"""Keypoint augmentation: packer's NumPy executor beside albumentations with `KeypointParams`.

Data: synthetic 480x352 pictures, each with 4 people of COCO's 17 keypoints (x, y,
visibility) inside their boxes. The same operations per sample on both sides: horizontal
flip (p 0.5) with left and right swapped (COCO's flip order), then one affine warp (rotation
+-10 degrees, shift +-10%, zoom 0.9-1.1, shear +-5 degrees, constant fill); boxes as their
corners' hull, clipped, dropped below a visible fraction of 0.3 with their keypoints; a
point that leaves the frame keeps its coordinates with visibility 0. albumentations:
`BboxParams(format="pascal_voc", min_visibility=0.3)` with each box's index as a label field,
`KeypointParams(format="xy", remove_invisible=False)`, the kept boxes' points taken by that
index and the visibilities of points outside the frame set to 0 in NumPy (albumentations
keeps no visibility); the left/right swap by `KeypointParams(label_mapping=...)` where the
installed albumentations has it (2.0.12 and later), else left out on its side (the
comparison then favours albumentations). One core: the process pinned, OpenCV, OpenMP and
BLAS on one thread; alternating rounds of --seconds each, medians and ranges, in images per
wall second and per CPU second of the process.

  packer keypoints    Augment.apply(images, targets=...) on batches of 16 (boxes, labels,
                      keypoints [N, 17, 3] with a flip order)
  packer images       the same without targets: what the targets add
  albu keypoints      A.Compose([HorizontalFlip, Affine], bbox_params, keypoint_params) per
                      sample
  albu images         the same Compose on the image alone

albumentations runs in the peers' environment (`bash benchmarks/setup_peers.sh` makes
.venv-peers); this script, run by the project's .venv, starts itself there (`--peer`) and asks
it for one round at a time. Without it, only packer's rows are measured.

    .venv/bin/python benchmarks/bench_keypoints.py [--rounds 7] [--seconds 2]
"""

from __future__ import annotations

import os

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_name] = "1"  # before NumPy and OpenCV load: one core on both sides

import argparse  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import cv2  # noqa: E402
import harness  # noqa: E402
import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PEERS_PYTHON = REPO / ".venv-peers" / "bin" / "python"
HEIGHT, WIDTH = 352, 480
PEOPLE, POINTS = 4, 17
BATCH = 16
IMAGES = 48
MIN_VISIBILITY = 0.3
# COCO's 17 person keypoints: nose, then left/right pairs (eyes, ears, shoulders, elbows,
# wrists, hips, knees, ankles); a flip swaps each pair.
FLIP_ORDER = (0, 2, 1, 4, 3, 6, 5, 8, 7, 10, 9, 12, 11, 14, 13, 16, 15)
SETTINGS = dict(  # packer's arguments; the peer builds albumentations' equivalent
    rotation_range=10,
    width_shift_range=0.1,
    height_shift_range=0.1,
    zoom_range=0.1,
    shear_range=5,
    horizontal_flip=True,
    fill_mode="constant",
    min_visibility=MIN_VISIBILITY,
)
TARGET = 1.5  # packer keypoints / albu keypoints


def parse_args() -> argparse.Namespace:
    """Command-line options (--peer and --data are how the script calls itself)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds; medians")
    parser.add_argument("--seconds", type=float, default=2.0, help="seconds per round")
    parser.add_argument("--json", type=Path, help="also write the results to this JSON file")
    parser.add_argument("--peer", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args()


def synthetic(seed: int = 0) -> dict[str, np.ndarray]:
    """images [N, H, W, 3]; boxes [N, P, 4], labels [N, P], keypoints [N, P, 17, 3] (points
    inside their boxes, a tenth hidden (1), a tenth not labelled (0, 0, 0))."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:HEIGHT, 0:WIDTH]
    texture = (25 * np.sin(xx / 9.0) + 25 * np.cos(yy / 7.0))[..., None]
    images = (rng.integers(40, 160, (IMAGES, 1, 1, 3)) + texture).clip(0, 255).astype(np.uint8)
    x1 = rng.uniform(0, WIDTH - 120, (IMAGES, PEOPLE))
    y1 = rng.uniform(0, HEIGHT - 200, (IMAGES, PEOPLE))
    w, h = rng.uniform(60, 120, (IMAGES, PEOPLE)), rng.uniform(120, 200, (IMAGES, PEOPLE))
    boxes = np.stack([x1, y1, x1 + w, y1 + h], axis=-1)
    inner = rng.uniform(0, 1, (IMAGES, PEOPLE, POINTS, 2))
    xy = boxes[..., None, :2] + inner * (boxes[..., None, 2:] - boxes[..., None, :2])
    seen = rng.choice([0, 1, 2], (IMAGES, PEOPLE, POINTS), p=[0.1, 0.1, 0.8])
    points = np.concatenate([xy * (seen[..., None] > 0), seen[..., None]], axis=-1)
    return {
        "images": images,
        "boxes": boxes.astype(np.float32),
        "labels": np.zeros((IMAGES, PEOPLE), np.int64),
        "keypoints": points.astype(np.float32),
    }


def pin() -> None:
    """This process on one core, OpenCV on one thread."""
    os.sched_setaffinity(0, {0})
    cv2.setNumThreads(1)


def wall_and_cpu(step: Callable[[], int], seconds: float) -> dict[str, float]:
    """Repeat `step` (returning images done) for `seconds`: images per wall second and per
    CPU second of this process."""
    step()  # warm-up
    done, start, cpu = 0, time.perf_counter(), time.process_time()
    while (elapsed := time.perf_counter() - start) < seconds:
        done += step()
    return {"wall": done / elapsed, "cpu": done / (time.process_time() - cpu)}


def following(count: int) -> Callable[[], tuple[int, np.ndarray]]:
    """Successive (epoch, indices) of BATCH samples over `count`, wrapping into new epochs."""
    state = {"next": 0}

    def step() -> tuple[int, np.ndarray]:
        start = state["next"]
        state["next"] += BATCH
        return start // count, np.arange(start, start + BATCH) % count

    return step


# --- packer, in the project's environment ----------------------------------------------------


def packer_step(data: dict, with_targets: bool) -> Callable[[], int]:
    """Augment.apply on batches, images into a reused buffer as a reader does; the keypoints
    move as points with COCO's flip order."""
    from packer.augment import Augment
    from packer.augment.moves import Move

    aug, nxt = Augment(**SETTINGS, seed=0), following(len(data["images"]))
    out = (np.empty((BATCH, HEIGHT, WIDTH, 3), np.uint8), None)
    geometries = {
        "boxes": "boxes",
        "labels": "none",
        "keypoints": Move("points", ragged=True, flip_order=FLIP_ORDER),
    }
    targets = [
        {"boxes": b, "labels": c, "keypoints": k}
        for b, c, k in zip(data["boxes"], data["labels"], data["keypoints"], strict=True)
    ]

    def step() -> int:
        epoch, indices = nxt()
        batch_targets = [targets[i] for i in indices] if with_targets else None
        aug.apply(
            data["images"][indices], None, epoch=epoch, indices=indices, out=out,
            targets=batch_targets, geometries=geometries if with_targets else None,
        )  # fmt: skip
        return BATCH

    return step


# --- albumentations, in the peers' environment -----------------------------------------------


def peer_main(data_path: Path) -> None:
    """Serve rounds of albumentations: one JSON request per line in, one JSON answer out."""
    import albumentations as A

    pin()
    data = dict(np.load(data_path))
    operations = [
        A.HorizontalFlip(p=0.5),
        A.Affine(
            rotate=(-10, 10),
            translate_percent=(-0.1, 0.1),
            scale=(0.9, 1.1),
            shear=(-5, 5),
            interpolation=cv2.INTER_LINEAR,
            border_mode=cv2.BORDER_CONSTANT,
            p=1.0,
        ),
    ]
    names = list(range(POINTS))
    keypoint_options = dict(format="xy", remove_invisible=False, label_fields=["point"])
    swapped = {"HorizontalFlip": {"point": dict(zip(names, FLIP_ORDER, strict=True))}}
    try:
        keypoint_params = A.KeypointParams(**keypoint_options, label_mapping=swapped)
        swaps = True
    except TypeError:  # before albumentations 2.0.12: no label_mapping
        keypoint_params, swaps = A.KeypointParams(**keypoint_options), False
    with_targets = A.Compose(
        operations,
        bbox_params=A.BboxParams(
            format="pascal_voc", min_visibility=MIN_VISIBILITY, label_fields=["labels", "index"]
        ),
        keypoint_params=keypoint_params,
    )
    images_only = A.Compose(operations)
    nxt = following(len(data["images"]))
    index = np.arange(PEOPLE)
    point_names = np.tile(names, PEOPLE)

    def targets_step() -> int:
        for i in nxt()[1]:
            points = data["keypoints"][i]
            out = with_targets(
                image=data["images"][i],
                bboxes=data["boxes"][i],
                labels=data["labels"][i],
                index=index,
                keypoints=points[..., :2].reshape(-1, 2),
                point=point_names,
            )
            moved = np.asarray(out["keypoints"], np.float32).reshape(PEOPLE, POINTS, 2)
            kept = np.asarray(out["index"], np.int64)  # the kept boxes' people
            x, y = moved[kept, :, 0], moved[kept, :, 1]
            inside = (x >= 0) & (x <= WIDTH) & (y >= 0) & (y <= HEIGHT)
            seen = np.where(inside, points[kept, :, 2], 0)
            np.concatenate([moved[kept], seen[..., None]], axis=-1)
        return BATCH

    def images_step() -> int:
        for i in nxt()[1]:
            images_only(image=data["images"][i])
        return BATCH

    steps = {"albu keypoints": targets_step, "albu images": images_step}
    print(json.dumps({"ready": True, "version": A.__version__, "swaps": swaps}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        print(json.dumps(wall_and_cpu(steps[request["run"]], request["seconds"])), flush=True)


# --- the run ---------------------------------------------------------------------------------


def measure(args: argparse.Namespace, tmp: Path) -> dict:
    """Every number of the table, in one run: per-round rates of each contender."""
    data = synthetic()
    path = tmp / "keypoints.npz"
    np.savez(path, **data)
    results: dict = {"rounds": {}, "notes": []}
    peer = None
    if PEERS_PYTHON.exists():
        peer = harness.Peer(PEERS_PYTHON, __file__, ["--data", str(path)])
    if peer is None:
        results["notes"].append("no .venv-peers: run benchmarks/setup_peers.sh for the baseline")
    else:
        results["albumentations"] = peer.hello["version"]
        if not peer.hello["swaps"]:
            results["notes"].append(
                "this albumentations has no label_mapping: its flips do not swap left and right"
            )
    pin()
    local = {
        "packer keypoints": packer_step(data, True),
        "packer images": packer_step(data, False),
    }
    runs = {name: functools.partial(wall_and_cpu, step) for name, step in local.items()}
    for name in ("albu keypoints", "albu images") if peer else ():
        runs[name] = lambda seconds, n=name: peer.ask({"run": n, "seconds": seconds})
    results["rounds"] = harness.side_by_side(
        runs, args.seconds, args.rounds, measure=lambda run, s: run(s)
    )
    if peer:
        peer.close()
    return results


RATIOS = {
    "packer / albumentations, keypoints": ("packer keypoints", "albu keypoints"),
    "packer / albumentations, images only": ("packer images", "albu images"),
    "packer keypoints / packer images (the targets' cost)": ("packer keypoints", "packer images"),
}


def report(results: dict, args: argparse.Namespace) -> None:
    """The tables: medians and ranges of rounds, ratios per round."""
    by = {
        k: {n: [r[k] for r in runs] for n, runs in results["rounds"].items()}
        for k in ("wall", "cpu")
    }
    rows = [
        [name, harness.spread(by["wall"][name], 0), harness.spread(by["cpu"][name], 0)]
        for name in results["rounds"]
    ]
    notes = (
        f"{WIDTH}x{HEIGHT} synthetic, {PEOPLE} people x {POINTS} keypoints, batches of {BATCH}, "
        f"min_visibility {MIN_VISIBILITY}; {args.rounds} interleaved rounds of {args.seconds:g} s "
        f"on one core; albumentations {results.get('albumentations', 'absent')}; shared "
        "machine, compare within a run."
    )
    harness.report(
        "Keypoints beside albumentations",
        ["contender", "img/s (wall)", "img per CPU second"],
        rows,
        notes,
    )
    ratios = []
    for label, (a, b) in RATIOS.items():
        if a in results["rounds"] and b in results["rounds"]:
            cells = [harness.spread(harness.ratios(by[k], b)[a]) for k in ("wall", "cpu")]
            target = f">= {TARGET:g} x" if label.endswith("albumentations, keypoints") else ""
            ratios.append([label, *cells, target])
    print(harness.table(["ratio, per round", "wall", "CPU time", "target"], ratios))
    for note in results["notes"]:
        print(f"note: {note}")


def main() -> None:
    args = parse_args()
    if args.peer:
        peer_main(args.data)
        return
    with tempfile.TemporaryDirectory() as tmp:
        results = measure(args, Path(tmp))
    report(results, args)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
