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
import sys  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import harness  # noqa: E402
import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

HEIGHT, WIDTH = 352, 480
PEOPLE, POINTS = 4, 17
BATCH = 16
IMAGES = 48
MIN_VISIBILITY = 0.3
# COCO's 17 person keypoints: nose, then left/right pairs (eyes, ears, shoulders, elbows,
# wrists, hips, knees, ankles); a flip swaps each pair.
FLIP_ORDER = (0, 2, 1, 4, 3, 6, 5, 8, 7, 10, 9, 12, 11, 14, 13, 16, 15)
SETTINGS = {**harness.AUGMENT, "min_visibility": MIN_VISIBILITY}  # packer's arguments
PEER_RUNS = ("albu keypoints", "albu images")  # the peer's contenders
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


# --- packer, in the project's environment ----------------------------------------------------


def packer_step(data: dict, with_targets: bool) -> Callable[[], int]:
    """Augment.apply on batches, images into a reused buffer as a reader does; the keypoints
    move as points with COCO's flip order."""
    from packer.augment.moves import Move

    geometries = {
        "boxes": "boxes",
        "labels": "none",
        "keypoints": Move("points", ragged=True, flip_order=FLIP_ORDER),
    }
    return harness.packer_augment_step(
        data, ("boxes", "labels", "keypoints"), SETTINGS, BATCH, with_targets, geometries
    )


def local_steps(data: dict) -> dict[str, Callable[[], int]]:
    """packer's contenders: with the targets, and on the images alone."""
    return {"packer keypoints": packer_step(data, True), "packer images": packer_step(data, False)}


# --- albumentations, in the peers' environment -----------------------------------------------


def peer_main(data_path: Path) -> None:
    """Serve rounds of albumentations: one JSON request per line in, one JSON answer out."""
    import albumentations as A

    harness.pin_one_core()
    data = dict(np.load(data_path))
    operations = harness.albumentations_warp(A)
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
    nxt = harness.following(len(data["images"]), BATCH)
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

    steps = dict(zip(PEER_RUNS, (targets_step, images_step), strict=True))
    harness.serve_rounds(steps, {"ready": True, "version": A.__version__, "swaps": swaps})


# --- the run ---------------------------------------------------------------------------------


def measure(args: argparse.Namespace, tmp: Path) -> dict:
    """Every number of the table, in one run: per-round rates of each contender."""
    data = synthetic()
    results: dict = {"rounds": {}, "notes": []}
    hello = harness.measure_with_peer(
        __file__, data, tmp, lambda: local_steps(data), PEER_RUNS, args, results
    )
    if hello is not None and not hello["swaps"]:
        results["notes"].append(
            "this albumentations has no label_mapping: its flips do not swap left and right"
        )
    return results


RATIOS = {
    "packer / albumentations, keypoints": ("packer keypoints", "albu keypoints"),
    "packer / albumentations, images only": ("packer images", "albu images"),
    "packer keypoints / packer images (the targets' cost)": ("packer keypoints", "packer images"),
}
TARGETED = "packer / albumentations, keypoints"  # the ratio with a target (TARGET)


def report(results: dict, args: argparse.Namespace) -> None:
    """The tables: medians and ranges of rounds, ratios per round."""
    notes = (
        f"{WIDTH}x{HEIGHT} synthetic, {PEOPLE} people x {POINTS} keypoints, batches of {BATCH}, "
        f"min_visibility {MIN_VISIBILITY}; {args.rounds} interleaved rounds of {args.seconds:g} s "
        f"on one core; albumentations {results.get('albumentations', 'absent')}; shared "
        "machine, compare within a run."
    )
    harness.wall_cpu_report(
        "Keypoints beside albumentations", results, RATIOS, notes, {TARGETED: f">= {TARGET:g} x"}
    )


def main() -> None:
    harness.main_with_peer(parse_args(), peer_main, measure, report)


if __name__ == "__main__":
    main()
