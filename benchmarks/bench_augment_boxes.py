"""Augmentation with boxes and per-object masks: packer's NumPy executor beside albumentations.

Data: the CamVid train images from ../shared/data at 480x352, each with its 7 largest
connected regions of one class as objects (box, label, mask); synthetic ellipses where
CamVid is absent. The same operations per sample on both sides: horizontal flip (p 0.5),
then one affine warp (rotation +-10 degrees, shift +-10%, zoom 0.9-1.1, shear +-5 degrees,
constant fill), boxes as the corners' hull, clipped, dropped below a visible fraction of 0.3
with their labels and masks (albumentations: `BboxParams(format="pascal_voc",
min_visibility=0.3)` with the object's index as a label field, then the masks indexed by it,
as its users keep masks and boxes together). One core: the process pinned, OpenCV, OpenMP and
BLAS on one thread; alternating rounds of --seconds each, medians and ranges, in images per
wall second and per CPU second of the process (the machine may be shared: CPU time counts
only what the core gave each side).

  packer targets      Augment.apply(images, targets=...) on batches of 16 (images, boxes,
                      labels, masks)
  packer images       the same without targets: what the targets add
  albu targets        A.Compose([HorizontalFlip, Affine], bbox_params=...) per sample
  albu images         the same Compose on the image alone

albumentations runs in the peers' environment (`bash benchmarks/setup_peers.sh` makes
.venv-peers); this script, run by the project's .venv, starts itself there (`--peer`) and asks
it for one round at a time.

    .venv/bin/python benchmarks/bench_augment_boxes.py [--synthetic] [--rounds 7] [--seconds 2]
"""

from __future__ import annotations

import os

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_name] = "1"  # before NumPy and OpenCV load: one core on both sides

import argparse  # noqa: E402
import sys  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import cv2  # noqa: E402
import harness  # noqa: E402
import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CAMVID = REPO.parent / "shared" / "data" / "camvid"
HEIGHT, WIDTH = 352, 480
OBJECTS = 7
BATCH = 16
MIN_VISIBILITY = 0.3
SETTINGS = {**harness.AUGMENT, "min_visibility": MIN_VISIBILITY}  # packer's arguments
PEER_RUNS = ("albu targets", "albu images")  # the peer's contenders
TARGET = 1.5  # packer targets / albu targets


def parse_args() -> argparse.Namespace:
    """Command-line options (--peer and --data are how the script calls itself)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--synthetic", action="store_true", help="synthetic shapes, not CamVid")
    parser.add_argument("--camvid", type=Path, default=CAMVID, help="CamVid folder")
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds; medians")
    parser.add_argument("--seconds", type=float, default=2.0, help="seconds per round")
    parser.add_argument("--json", type=Path, help="also write the results to this JSON file")
    parser.add_argument("--peer", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args()


def objects_of(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The OBJECTS largest one-class connected regions: boxes [K, 4], labels [K], masks."""
    found = []
    for cls in np.unique(labels):
        count, regions, stats, _ = cv2.connectedComponentsWithStats((labels == cls).view(np.uint8))
        for r in range(1, count):
            x, y, w, h, area = stats[r]
            found.append((area, cls, r, regions, (x, y, x + w, y + h)))
    found.sort(key=lambda f: -f[0])
    chosen = found[:OBJECTS]
    boxes = np.array([f[4] for f in chosen], np.float32).reshape(-1, 4)
    masks = np.stack([(f[3] == f[2]).astype(np.uint8) for f in chosen])
    return boxes, np.array([f[1] for f in chosen], np.int64), masks


def synthetic_scene(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A textured picture of OBJECTS overlapping ellipses and its class-index map."""
    yy, xx = np.mgrid[0:HEIGHT, 0:WIDTH]
    image = (rng.integers(40, 120, 3) + 25 * np.sin(xx / 9.0)[..., None]).astype(np.uint8)
    regions = np.zeros((HEIGHT, WIDTH), np.uint8)
    for k in range(OBJECTS):
        cx, cy = rng.integers(0, WIDTH), rng.integers(0, HEIGHT)
        rx, ry = rng.integers(15, 90), rng.integers(15, 70)
        inside = ((xx - cx) / rx) ** 2 + ((yy - cy) / ry) ** 2 < 1
        regions[inside] = k + 1
        image[inside] = rng.integers(0, 256, 3)
    return image, regions


def load(synthetic: bool, camvid: Path) -> tuple[dict, str]:
    """images [N, H, W, 3], boxes [N, K, 4], labels [N, K], masks [N, K, H, W]; the source."""
    train = camvid / "train"
    pairs = []
    if not synthetic and train.is_dir():
        for path in sorted(train.glob("*.png"))[:48]:
            image = cv2.cvtColor(cv2.imread(str(path)), cv2.COLOR_BGR2RGB)
            mask = cv2.imread(str(camvid / "trainannot" / path.name), cv2.IMREAD_GRAYSCALE)
            pairs.append(
                (
                    cv2.resize(image, (WIDTH, HEIGHT), interpolation=cv2.INTER_AREA),
                    cv2.resize(mask, (WIDTH, HEIGHT), interpolation=cv2.INTER_NEAREST),
                )
            )
        source = "CamVid train images"
    else:
        rng = np.random.default_rng(0)
        pairs = [synthetic_scene(rng) for _ in range(48)]
        source = "synthetic ellipses"
    per_image = [objects_of(m) for _, m in pairs]
    keep = [i for i, o in enumerate(per_image) if len(o[0]) == OBJECTS]
    data = {"images": np.stack([pairs[i][0] for i in keep])}
    for j, name in enumerate(("boxes", "labels", "masks")):
        data[name] = np.stack([per_image[i][j] for i in keep])
    return data, f"{source}, {len(keep)} with {OBJECTS} objects each"


# --- packer, in the project's environment ----------------------------------------------------


def packer_step(data: dict, with_targets: bool) -> Callable[[], int]:
    """Augment.apply on batches, images into a reused buffer as a reader does."""
    return harness.packer_augment_step(
        data, ("boxes", "labels", "masks"), SETTINGS, BATCH, with_targets
    )


def local_steps(data: dict) -> dict[str, Callable[[], int]]:
    """packer's contenders: with the targets, and on the images alone."""
    return {"packer targets": packer_step(data, True), "packer images": packer_step(data, False)}


# --- albumentations, in the peers' environment -----------------------------------------------


def peer_main(data_path: Path) -> None:
    """Serve rounds of albumentations: one JSON request per line in, one JSON answer out."""
    import albumentations as A

    harness.pin_one_core()
    data = dict(np.load(data_path))
    operations = harness.albumentations_warp(A, mask_interpolation=cv2.INTER_NEAREST)
    with_targets = A.Compose(
        operations,
        bbox_params=A.BboxParams(
            format="pascal_voc", min_visibility=MIN_VISIBILITY, label_fields=["labels", "index"]
        ),
    )
    images_only = A.Compose(operations)
    nxt = harness.following(len(data["images"]), BATCH)
    index = np.arange(OBJECTS)

    def targets_step() -> int:
        for i in nxt()[1]:
            out = with_targets(
                image=data["images"][i],
                masks=data["masks"][i],
                bboxes=data["boxes"][i],
                labels=data["labels"][i],
                index=index,
            )
            out["masks"] = out["masks"][np.asarray(out["index"], np.int64)]  # masks follow boxes
        return BATCH

    def images_step() -> int:
        for i in nxt()[1]:
            images_only(image=data["images"][i])
        return BATCH

    steps = dict(zip(PEER_RUNS, (targets_step, images_step), strict=True))
    harness.serve_rounds(steps, {"ready": True, "version": A.__version__})


# --- the run ---------------------------------------------------------------------------------


def measure(args: argparse.Namespace, tmp: Path) -> dict:
    """Every number of the table, in one run: per-round rates of each contender."""
    data, source = load(args.synthetic, args.camvid)
    results: dict = {"data": source, "rounds": {}, "notes": []}
    harness.measure_with_peer(
        __file__, data, tmp, lambda: local_steps(data), PEER_RUNS, args, results
    )
    return results


RATIOS = {
    "packer / albumentations, targets": ("packer targets", "albu targets"),
    "packer / albumentations, images only": ("packer images", "albu images"),
    "packer targets / packer images (the targets' cost)": ("packer targets", "packer images"),
    "albu targets / albu images": ("albu targets", "albu images"),
}
TARGETED = "packer / albumentations, targets"  # the ratio with a target (TARGET)


def report(results: dict, args: argparse.Namespace) -> None:
    """The tables, as the README shows them: medians and ranges of rounds, ratios per round."""
    notes = (
        f"{WIDTH}x{HEIGHT}, {results['data']}, batches of {BATCH}, min_visibility "
        f"{MIN_VISIBILITY}; {args.rounds} interleaved rounds of {args.seconds:g} s on one core; "
        f"albumentations {results.get('albumentations', 'absent')}; shared machine, compare "
        "within a run."
    )
    harness.wall_cpu_report(
        "Boxes and masks beside albumentations",
        results,
        RATIOS,
        notes,
        {TARGETED: f">= {TARGET:g} x"},
    )


def main() -> None:
    harness.main_with_peer(parse_args(), peer_main, measure, report)


if __name__ == "__main__":
    main()
