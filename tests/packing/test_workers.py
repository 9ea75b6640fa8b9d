"""Converter workers: no TensorFlow, a safe start method, list-file and hashed-split sources."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
from PIL import Image

import packer


def _python(code: str) -> str:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_worker_code_never_imports_tensorflow():
    loaded = _python(
        "import sys, packer.packing, packer.engines.local, packer.formats.npy, "
        "packer.formats.tfrecord, packer.formats.recordio; "
        "print(sorted(m for m in ('tensorflow', 'keras', 'torch', 'jax') if m in sys.modules))"
    )
    assert loaded == "[]"


def test_workers_are_spawned_not_forked_once_tensorflow_is_loaded():
    code = "import packer.processes as e; print(e.start_method())"
    assert _python(code) == "fork"
    assert _python("import tensorflow; " + code) == "spawn"


def test_pack_from_a_csv_list_with_class_names(tmp_path):
    rows = ["path,label"]
    for i in range(6):
        name = f"img_{i}.png"
        Image.fromarray(np.full((20, 30, 3), 40 * i, np.uint8)).save(tmp_path / name)
        rows.append(f"{name},{'cat' if i % 2 else 'dog'}")
    (tmp_path / "list.csv").write_text("\n".join(rows) + "\n")
    ds = packer.pack(tmp_path / "list.csv", out=tmp_path / "p", size=(30, 20))
    split = ds["train"]
    labels = split.reader.read(np.arange(split.count))["labels"]
    assert ds.class_names == ["cat", "dog"] and split.count == 6
    for i in range(6):
        index = int(split.source(i).rsplit("_", 1)[1].split(".")[0])
        assert ds.class_names[labels[i]] == ("cat" if index % 2 else "dog")


def test_hashed_split_is_stable_when_files_are_added(cls_src, tmp_path):
    first = packer.pack(cls_src, out=tmp_path / "a", size=16, split={"train": 0.7, "val": 0.3})
    assert set(first.splits) == {"train", "val"}
    before = {first[s].source(i): s for s in first.splits for i in range(first[s].count)}
    extra = cls_src.parent / "grown"
    subprocess.run(["cp", "-r", str(cls_src), str(extra)], check=True)
    Image.fromarray(np.zeros((36, 48, 3), np.uint8)).save(extra / "cats" / "new_cat.jpg")
    second = packer.pack(extra, out=tmp_path / "b", size=16, split={"train": 0.7, "val": 0.3})
    after = {
        second[s].source(i).replace(str(extra), str(cls_src)): s
        for s in second.splits
        for i in range(second[s].count)
    }
    assert all(after[path] == split for path, split in before.items())
    assert len(after) == len(before) + 1


_TRAINING_SCRIPT = """
print("main script imported", flush=True)
import sys
import tensorflow  # a training script imports it before it packs
import packer

if __name__ == "__main__":
    packer.pack(sys.argv[1], out=sys.argv[2], size=(16, 16), workers=2)
    print("packed", flush=True)
"""


def test_spawned_workers_do_not_re_import_the_training_script(cls_src, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(_TRAINING_SCRIPT)
    result = subprocess.run(
        [sys.executable, str(script), str(cls_src), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    assert result.stdout.splitlines() == ["main script imported", "packed"]


def test_workers_start_after_the_caller_ran_opencvs_thread_pool(tmp_path):
    """A script that resized big images with OpenCV (whose pool then has threads), then packs
    with workers, as a compressed pack's plan does itself (its stored-size estimate): the forked
    workers start and the pack ends, where setting OpenCV's threads in a fork of a running pool
    hung about half the workers (each try in a fresh process, with a deadline)."""
    for i in range(6):
        picture = np.random.default_rng(i).integers(0, 256, (720, 960, 3), np.uint8)
        Image.fromarray(picture).save(tmp_path / f"{'ab'[i % 2]}_{i}.png")
        (tmp_path / "list.csv").open("a").write(f"{'ab'[i % 2]}_{i}.png,{'ab'[i % 2]}\n")
    code = (
        "import cv2, numpy as np, packer\n"
        "big = np.zeros((720, 960, 3), np.uint8)\n"
        "for _ in range(3): cv2.resize(big, (480, 352), interpolation=cv2.INTER_AREA)\n"
        f"ds = packer.pack({str(tmp_path / 'list.csv')!r}, out={str(tmp_path / 'p')!r}, "
        "size=(480, 352), encoding='jpeg', workers=2, progress=False)\n"
        "print(ds['train'].count)\n"
    )
    for attempt in range(3):
        shutil.rmtree(tmp_path / "p", ignore_errors=True)
        try:
            done = subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
            )
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the pack hung (try {attempt + 1})") from None
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.split()[-1] == "6"
