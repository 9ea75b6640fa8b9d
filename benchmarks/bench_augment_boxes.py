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

CAMVID = REPO.parent / "shared" / "data" / "camvid"
PEERS_PYTHON = REPO / ".venv-peers" / "bin" / "python"
HEIGHT, WIDTH = 352, 480
OBJECTS = 7
BATCH = 16
MIN_VISIBILITY = 0.3
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


def pin() -> None:
    """This process on one core, OpenCV on one thread."""
    os.sched_setaffinity(0, {0})
    cv2.setNumThreads(1)


def wall_and_cpu(step: Callable[[], int], seconds: float) -> dict[str, float]:
    """Repeat `step` (returning images done) for `seconds`: images per wall second and per
    CPU second of this process (one thread: what the core gave it, whatever else ran)."""
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
    """Augment.apply on batches, images into a reused buffer as a reader does."""
    from packer.augment import Augment

    aug, nxt = Augment(**SETTINGS, seed=0), following(len(data["images"]))
    out = (np.empty((BATCH, HEIGHT, WIDTH, 3), np.uint8), None)
    targets = [
        {"boxes": b, "labels": c, "masks": m}
        for b, c, m in zip(data["boxes"], data["labels"], data["masks"], strict=True)
    ]

    def step() -> int:
        epoch, indices = nxt()
        batch_targets = [targets[i] for i in indices] if with_targets else None
        aug.apply(
            data["images"][indices], None, epoch=epoch, indices=indices, out=out,
            targets=batch_targets,
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
            mask_interpolation=cv2.INTER_NEAREST,
            border_mode=cv2.BORDER_CONSTANT,
            p=1.0,
        ),
    ]
    with_targets = A.Compose(
        operations,
        bbox_params=A.BboxParams(
            format="pascal_voc", min_visibility=MIN_VISIBILITY, label_fields=["labels", "index"]
        ),
    )
    images_only = A.Compose(operations)
    nxt = following(len(data["images"]))
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

    steps = {"albu targets": targets_step, "albu images": images_step}
    print(json.dumps({"ready": True, "version": A.__version__}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        print(json.dumps(wall_and_cpu(steps[request["run"]], request["seconds"])), flush=True)


# --- the run ---------------------------------------------------------------------------------


def measure(args: argparse.Namespace, tmp: Path) -> dict:
    """Every number of the table, in one run: per-round rates of each contender."""
    data, source = load(args.synthetic, args.camvid)
    path = tmp / "objects.npz"
    np.savez(path, **data)
    results: dict = {"data": source, "rounds": {}, "notes": []}
    peer = None
    if PEERS_PYTHON.exists():
        peer = harness.Peer(PEERS_PYTHON, __file__, ["--data", str(path)])
    if peer is None:
        results["notes"].append("no .venv-peers: run benchmarks/setup_peers.sh for the baseline")
    else:
        results["albumentations"] = peer.hello["version"]
    pin()
    local = {
        "packer targets": packer_step(data, True),
        "packer images": packer_step(data, False),
    }
    runs = {name: functools.partial(wall_and_cpu, step) for name, step in local.items()}
    for name in ("albu targets", "albu images") if peer else ():
        runs[name] = lambda seconds, n=name: peer.ask({"run": n, "seconds": seconds})
    results["rounds"] = harness.side_by_side(
        runs, args.seconds, args.rounds, measure=lambda run, s: run(s)
    )
    if peer:
        peer.close()
    return results


RATIOS = {
    "packer / albumentations, targets": ("packer targets", "albu targets"),
    "packer / albumentations, images only": ("packer images", "albu images"),
    "packer targets / packer images (the targets' cost)": ("packer targets", "packer images"),
    "albu targets / albu images": ("albu targets", "albu images"),
}


def report(results: dict, args: argparse.Namespace) -> None:
    """The tables, as the README shows them: medians and ranges of rounds, ratios per round."""
    by = {
        k: {n: [r[k] for r in runs] for n, runs in results["rounds"].items()}
        for k in ("wall", "cpu")
    }
    rows = [
        [name, harness.spread(by["wall"][name], 0), harness.spread(by["cpu"][name], 0)]
        for name in results["rounds"]
    ]
    notes = (
        f"{WIDTH}x{HEIGHT}, {results['data']}, batches of {BATCH}, min_visibility "
        f"{MIN_VISIBILITY}; {args.rounds} interleaved rounds of {args.seconds:g} s on one core; "
        f"albumentations {results.get('albumentations', 'absent')}; shared machine, compare "
        "within a run."
    )
    harness.report(
        "Boxes and masks beside albumentations",
        ["contender", "img/s (wall)", "img per CPU second"],
        rows,
        notes,
    )
    ratios = []
    for label, (a, b) in RATIOS.items():
        if a in results["rounds"] and b in results["rounds"]:
            cells = [harness.spread(harness.ratios(by[k], b)[a]) for k in ("wall", "cpu")]
            target = f">= {TARGET:g} x" if label.startswith("packer / albumentations, t") else ""
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
