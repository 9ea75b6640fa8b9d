"""A/B: this checkout against an earlier revision, packing and reading the same images in one run.

A refactor must leave bytes and speed alone. The earlier revision is checked out into a
temporary git worktree and this checkout's files (tracked and untracked, not ignored) are
copied beside it, so both sides run from alike fresh folders; each round runs both versions
in fresh processes in alternating order (same venv, each side's `packer` first on
PYTHONPATH), on the same synthetic segmentation source:

  pack   `packer.pack(SRC, OUT, workers=W)`, seconds in-process (imports excluded)
  read   `PackedSequence` shuffled uint8 batches of 16 over the npy pack, img/s over
         whole epochs for `--seconds` after a warm-up epoch
  torch  `packer.torch.PackedDataset` in a DataLoader with 0 workers, the same way
  tf     `packer.tf.dataset` over the npy pack, the same way

`--cores N` runs every process on the first N cores the machine has (its CPU affinity): with
1, how the versions compare on one core.

It also checks that both versions wrote the same shard bytes (the manifests' SHA-256s).
Ratios are B (this checkout) / A (the revision), taken within each round (the two sides ran
seconds apart) and reported as their median and range over rounds; `--before HEAD` shows the
noise of the machine (same code both sides).

    python benchmarks/bench_ab.py --before REV [--images 300] [--rounds 5] [--seconds 2]
        [--cores N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SIZE = (480, 352)

PACK = """
import json, sys, time, packer
t = time.perf_counter()
packer.pack(sys.argv[1], sys.argv[2], workers=int(sys.argv[3]), size=(480, 352), progress=False)
print(json.dumps({"seconds": time.perf_counter() - t, "file": packer.__file__}))
"""

READ = """
import json, sys, time
reader = sys.argv[2]
if reader == "keras":
    from packer.keras import PackedSequence
    data = PackedSequence(sys.argv[1], "train", batch_size=16, seed=0)
    def epoch(e):
        data.on_epoch_end()
        return sum(len(data[i][0]) for i in range(len(data)))
elif reader == "tf":
    import packer.tf
    data = packer.tf.dataset(sys.argv[1], "train", batch_size=16, seed=0, stream=False)
    def epoch(e):
        return sum(len(images) for images, _ in data)
else:
    import torch
    from packer.torch import PackedDataset
    data = PackedDataset(sys.argv[1], "train", batch_size=16, seed=0)
    loader = torch.utils.data.DataLoader(data, batch_size=None, num_workers=0)
    def epoch(e):
        data.set_epoch(e)
        return sum(len(images) for images, _ in loader)
epoch(0)
seconds, images, e = float(sys.argv[3]), 0, 1
t = time.perf_counter()
while time.perf_counter() - t < seconds:
    images += epoch(e)
    e += 1
print(json.dumps({"img_s": images / (time.perf_counter() - t)}))
"""


def run(tree: Path, script: str, *args: str, cores: set[int] | None = None) -> dict:
    """Run `script` in `tree` (whose packer `python -c` then imports first, before an editable
    install's), on `cores` when given; its last output line as JSON."""
    env = {**os.environ, "PYTHONPATH": str(tree), "TF_CPP_MIN_LOG_LEVEL": "3"}
    command = [sys.executable, "-c", script, *args]
    pin = (lambda: os.sched_setaffinity(0, cores)) if cores else None
    done = subprocess.run(
        command, cwd=tree, env=env, capture_output=True, text=True, check=False, preexec_fn=pin
    )
    if done.returncode:
        sys.exit(f"{tree}: {done.stderr.strip().splitlines()[-1]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def copy_checkout(dest: Path) -> Path:
    """This checkout's working files (committed or not, ignored ones left out) copied to `dest`."""
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "-co", "--exclude-standard"],
        check=True, capture_output=True,
    ).stdout.decode()  # fmt: skip
    for name in filter(None, listed.split("\0")):
        if (REPO / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, dest / name)
    return dest


def shard_hashes(pack: Path) -> list[str]:
    """The SHA-256 of every shard file the pack's manifest lists, in order."""
    data = json.loads((pack / "dataset.json").read_text())
    shards = [s for split in data["splits"].values() for s in split["shards"]]
    return [f["sha256"] for s in shards for f in s["files"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="git revision to compare against")
    parser.add_argument("--images", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=2.0, help="of reading, per reader")
    parser.add_argument("--cores", type=int, help="run every process on this many cores")
    args = parser.parse_args()
    cores = set(sorted(os.sched_getaffinity(0))[: args.cores]) if args.cores else None
    sys.path.insert(0, str(REPO))
    from packer.synthetic import make_segmentation

    with tempfile.TemporaryDirectory(prefix="packer-ab-") as tmp:
        root = Path(tmp)
        before = root / "before"
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(before), args.before],
            check=True,
        )
        try:
            src = make_segmentation(root / "src", {"train": args.images}, size=(512, 384))
            sides = {"A": before, "B": copy_checkout(root / "after")}
            times: dict[str, dict[str, list[float]]] = {
                side: {"pack": [], "read": [], "torch": [], "tf": []} for side in sides
            }
            for round_ in range(args.rounds):
                order = list(sides) if round_ % 2 == 0 else list(reversed(sides))
                for side in order:
                    out = root / f"pack-{side}-{round_}"
                    packed = run(
                        sides[side], PACK, str(src), str(out), str(args.workers), cores=cores
                    )
                    assert Path(packed["file"]).is_relative_to(sides[side]), packed["file"]
                    times[side]["pack"].append(args.images / packed["seconds"])
                    for reader, row in (("keras", "read"), ("torch", "torch"), ("tf", "tf")):
                        rate = run(
                            sides[side], READ, str(out), reader, str(args.seconds), cores=cores
                        )["img_s"]
                        times[side][row].append(rate)
                same = shard_hashes(root / f"pack-A-{round_}") == shard_hashes(
                    root / f"pack-B-{round_}"
                )
                print(f"round {round_ + 1}: same shard bytes: {same}", flush=True)
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(before)])
    on = f", on {len(cores)} core(s)" if cores else ""
    print(
        f"\nA = {args.before}, B = this checkout; {args.images} images, {args.rounds} rounds, "
        f"{args.seconds:g} s of reading per reader{on}\n"
    )
    print("| row | A img/s | B img/s | B / A, median of rounds | range |")
    print("|---|---:|---:|---:|---:|")
    labels = {"pack": f"pack, {args.workers} workers", "read": "PackedSequence",
              "torch": "packer.torch, 0 workers", "tf": "packer.tf.dataset"}  # fmt: skip
    for row, label in labels.items():
        a, b = (statistics.median(times[side][row]) for side in sides)
        ratios = [y / x for x, y in zip(times["A"][row], times["B"][row], strict=True)]
        spread = f"{min(ratios):.3f}-{max(ratios):.3f}"
        print(f"| {label} | {a:,.0f} | {b:,.0f} | {statistics.median(ratios):.3f} | {spread} |")


if __name__ == "__main__":
    main()
