"""What a new user hits (issue 13): mistakes without tracebacks, packs inside their source,
folders of masks alone, dry runs that predict rejections, the default size, the Python API,
lists, and the wording of messages and docs; and in the first hour (issue 29): README blocks
that did not run, a script without its `__main__` guard, readers that failed at the first
batch, and the ImageDataGenerator user's arguments."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

import packer
from packer import storage
from packer.cli import main
from packer.cli.report import reason_kind
from packer.errors import PackError, SourceError, StorageError
from packer.synthetic import color_mask, make_classification, make_segmentation, shapes_scene
from tests.fixtures.corpus import write_classification_corpus
from tests.fixtures.packs import REPO

README = REPO / "README.md"
DOCS = REPO / "docs"


def cli(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> dict[str, Path]:
    """Sources and packs the wrong invocations are aimed at."""
    root = tmp_path_factory.mktemp("new_user")
    src = make_segmentation(root / "src", {"train": 6, "val": 2}, (32, 24))
    packed = root / "packed"
    packer.pack(src, out=packed, size=(16, 12), workers=1)
    gz = root / "gz"
    packer.pack(src, out=gz, format="tfrecord", compression="gzip", size=(16, 12), workers=1)
    masks_only = root / "masks_only"
    (masks_only / "train_labels").mkdir(parents=True)
    for i in range(3):
        _, mask = shapes_scene(np.random.default_rng(i), 32, 24)
        Image.fromarray(color_mask(mask)).save(masks_only / "train_labels" / f"f{i}_L.png")
    shutil.copy(src / "class_dict.csv", masks_only / "class_dict.csv")
    (root / "empty").mkdir()
    (root / "notes").mkdir()
    (root / "notes" / "todo.txt").write_text("mine\n")
    (root / "bad_classes.csv").write_text("colour\nred\n")
    (root / "list.txt").write_text("a.png 1\n")
    broken = root / "broken"
    shutil.copytree(packed, broken)
    (broken / "dataset.json").write_text("{ not json")
    future = root / "future"
    shutil.copytree(packed, future)
    data = json.loads((future / "dataset.json").read_text())
    (future / "dataset.json").write_text(json.dumps(data | {"format_version": 99}))
    gone = root / "gone"
    shutil.copytree(packed, gone)
    next(gone.glob("train/*.images.npy")).unlink()
    corpus = root / "corpus"
    write_classification_corpus(corpus)
    return {
        "root": root,
        "src": src,
        "packed": packed,
        "gz": gz,
        "masks_only": masks_only,
        "empty": root / "empty",
        "notes": root / "notes",
        "bad_classes": root / "bad_classes.csv",
        "list_txt": root / "list.txt",
        "broken": broken,
        "future": future,
        "gone": gone,
        "corpus": corpus,
    }


# -- item 2: no traceback for a user's mistake ---------------------------------------------------


# case: (the command line, what its one error line must say)
WRONG = {
    "missing SRC": (["pack", "{root}/nowhere"],
                    "Invalid value for 'SRC': {root}/nowhere: no such file or folder"),
    "zero size": (["pack", "{src}", "--size", "0x10"],
                  "'0x10': width and height must be positive"),
    "size not a size": (["pack", "{src}", "--size", "big"],
                        "'big' is not WIDTHxHEIGHT (e.g. 480x352) or one number"),
    "shard size not bytes": (["pack", "{src}", "--shard-size", "lots"],
                             "'lots' is not a size in bytes"),
    "split fractions": (["pack", "{src}", "--split", "train=2"],
                        "split fractions sum to 2, not 1"),
    "unknown format": (["pack", "{src}", "--format", "zip"],
                       "Invalid value for '--format': 'zip' is not one of"),
    "quality without jpeg": (["pack", "{src}", "--out", "{root}/q", "--format", "recordio",
                              "--quality", "50"],
                             "--quality applies only with --encoding jpeg"),
    "option of another format": (["pack", "{src}", "--out", "{root}/o", "--compression", "gzip"],
                                 "--compression do not apply to --format npy"),
    "index with gzip": (["pack", "{src}", "--out", "{root}/i", "--format", "tfrecord",
                         "--compression", "gzip", "--index"],
                        "--index with --compression gzip"),
    "remote --out": (["pack", "{src}", "--out", "s3://bucket/x"], "Error: s3://bucket/x: "),
    "remote SRC": (["pack", "gs://bucket/raw"], "Error: gs://bucket/raw: "),
    "masks without images": (["pack", "{masks_only}", "--out", "{root}/m"],
                             "holds only mask folders (train_labels/) and class_dict.csv, "
                             "but no images"),
    "a different pack in --out": (["pack", "{src}", "--out", "{packed}", "--size", "8x8"],
                                  "{packed} already holds a different pack (other options: "
                                  "--size 16x12 there, 8x8 here)"),
    "a folder that is no pack": (["pack", "{src}", "--out", "{notes}"],
                                 "{notes} exists and is not a packer dataset"),
    "missing --masks": (["pack", "{src}", "--masks", "{root}/nomasks"],
                        "Invalid value for '--masks': Directory '{root}/nomasks' does not exist"),
    "empty SRC": (["pack", "{empty}"],
                  "cannot recognise the layout of {empty}: it holds 0 folders and 0 images"),
    "bad class table": (["pack", "{src}", "--classes", "{bad_classes}"],
                        "{bad_classes}: expected a header 'name,r,g,b', found 'colour'"),
    "list layout of a folder": (["pack", "{src}", "--layout", "list"],
                                "--layout list needs the .lst or .csv file itself as SRC"),
    "ignore index is a class": (["pack", "{src}", "--out", "{root}/x", "--ignore-index", "1"],
                                "--ignore-index 1 is a class id ('disc')"),
    "a pack as SRC": (["pack", "{packed}"], "{packed} is a pack made by packer"),
    "SRC a text file": (["pack", "{list_txt}"],
                        "{list_txt}: SRC must be a folder, a .lst/.csv/.tsv/.jsonl list "
                        "file or a .parquet file"),
    "--root for a folder": (["pack", "{src}", "--root", "{root}"],
                            "--root applies to a .lst/.csv list as SRC, not to a folder"),
    "zero workers": (["pack", "{src}", "--workers", "0"],
                     "Invalid value for '--workers': 0 is not in the range x>=1"),
    "strict on bad input": (["pack", "{corpus}", "--out", "{root}/c", "--strict", "--size", "8"],
                            "2 input(s) rejected, more than the 0 allowed"),
    "info of no pack": (["info", "{notes}"], "{notes}: no dataset.json here"),
    "info of a remote pack": (["info", "s3://bucket/packed"], "Error: s3://bucket/packed/"),
    "info of a future pack": (["info", "{future}"], "format_version 99, this packer reads 1"),
    "verify of no pack": (["verify", "{empty}"], "{empty}: no dataset.json here"),
    "verify of a broken manifest": (["verify", "{broken}"],
                                    "{broken}/dataset.json: unreadable (Expecting property"),
    "verify --sources of a missing pack": (["verify", "{root}/nowhere", "--sources"],
                                           "Invalid value for 'PATH': {root}/nowhere: no such"),
    "bench of a missing split": (["bench", "{packed}", "--split", "nope"],
                                 "{packed}: no split 'nope'; splits: train, val"),
    "bench of a pack missing a shard": (["bench", "{gone}", "--seconds", "0.1"],
                                        "check the pack with `packer verify {gone}`"),
    "preview into a missing folder": (["preview", "{packed}", "--out",
                                       "{root}/no/such/grid.png"],
                                      "folder {root}/no/such does not exist; create it first"),
    "preview without an extension": (["preview", "{packed}", "--out", "{root}/grid"],
                                     "{root}/grid: give the picture a file name with an image "
                                     "extension"),
    "preview of a missing split": (["preview", "{packed}", "--out", "{root}/g.png", "--split",
                                    "x"],
                                   "{packed}: no split 'x'; splits: train, val"),
    "preview of a pack missing a shard": (["preview", "{gone}", "--out", "{root}/g.png"],
                                          "cannot be opened as an npy memmap"),
    "--out the source folder": (["pack", "{src}", "--out", "{src}", "--overwrite"],
                                "--out {src} is the source folder {src}"),
    "--out empty": (["pack", "{src}", "--out", ""], "--out is empty; name a folder"),
    "--out a URL without a bucket": (["pack", "{src}", "--out", "s3://"],
                                     "--out s3://: the URL names no bucket"),
    "--out a file": (["pack", "{src}", "--out", "{list_txt}"], "--out {list_txt} is a file"),
    "a class table as SRC": (["pack", "{src}/class_dict.csv"],
                             "class_dict.csv is a class table (name,r,g,b), not a list of "
                             "images"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(WRONG))
def test_a_wrong_invocation_is_one_error_line_never_a_traceback(work, case, monkeypatch):
    monkeypatch.chdir(work["root"])
    command, message = WRONG[case]
    result = CliRunner().invoke(main, [a.format(**work) for a in command])
    assert result.exit_code != 0, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1 and message.format(**work) in errors[0], result.output
    assert not (work["root"] / "s3:").exists() and not (work["root"] / "gs:").exists()


def test_at_least_25_wrong_invocations():
    assert len(WRONG) >= 25


def test_an_output_folder_without_write_permission_says_so(work, tmp_path, monkeypatch):
    def refuse(path: Path) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(storage.local, "make_dirs", refuse)
    result = cli("pack", work["src"], "--out", tmp_path / "out", "--size", "8")
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert f"Error: cannot write {tmp_path / 'out'}: permission denied" in result.output
    assert "choose an --out folder you can write to" in result.output


def test_a_read_only_file_system_says_so(work, tmp_path):
    disk = tmp_path / "ro"
    disk.mkdir()
    mounted = (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(disk)], capture_output=True
        ).returncode
        == 0
    )
    if not mounted:
        pytest.skip("cannot mount a read-only file system here")
    try:
        result = cli("pack", work["src"], "--out", disk / "out", "--size", "8")
    finally:
        subprocess.run(["umount", str(disk)], check=False)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert "read-only file system" in result.output and "--out" in result.output


def test_preview_and_bench_read_a_gzip_tfrecord_pack_in_file_order(work, tmp_path):
    grid = tmp_path / "grid.png"
    result = cli("preview", work["gz"], "--out", grid, "-n", "4")
    assert result.exit_code == 0, result.output
    assert "the first 4" in result.output and "'train'" in result.output
    streamed = packer.open(work["gz"])["train"]
    plain = packer.open(work["packed"])["train"]
    first = next(streamed.records())
    image, mask = plain[0]
    assert np.array_equal(first["images"], image) and np.array_equal(first["masks"], mask)
    assert np.array_equal(streamed[3][1], plain[3][1])
    bench = cli("bench", work["gz"], "--seconds", "0.1", "--batch-size", "2", "--json")
    assert bench.exit_code == 0, bench.output
    rates = {r["name"]: r for r in json.loads(bench.output)["rates"]}
    assert "in file order" in rates["packed reader, warm cache"]["note"]


def test_a_batch_larger_than_the_split_is_read_as_the_whole_split_and_said(work):
    result = cli("bench", work["packed"], "--batch-size", "100000", "--seconds", "0.1")
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    assert "batches of 6" in result.output
    assert "note: --batch-size 100000 is larger than split 'train': batches of all 6" in (
        result.output
    )
    as_json = cli("bench", work["packed"], "--batch-size", "7", "--seconds", "0.1", "--json")
    measured = json.loads(as_json.output)
    assert measured["batch_size"] == 6 and "batches of all 6 samples" in measured["note"]


def test_an_out_that_is_empty_a_bare_url_or_a_file_says_what_it_is(work, monkeypatch):
    monkeypatch.chdir(work["notes"])
    empty = cli("pack", work["src"], "--out", "", "--size", "8")
    assert "Error: --out is empty; name a folder" in empty.output
    assert sorted(p.name for p in work["notes"].iterdir()) == ["todo.txt"]
    with pytest.raises(PackError, match=r"out=\.\.\. is empty"):
        packer.pack(work["src"], out="", size=8)
    bare = cli("pack", work["src"], "--out", "s3://", "--size", "8")
    assert "the URL names no bucket" in bare.output and ".partial" not in bare.output
    a_file = cli("pack", work["src"], "--out", work["list_txt"], "--size", "8")
    assert f"--out {work['list_txt']} is a file" in a_file.output
    assert "choose a folder" in a_file.output and "run the same command" not in a_file.output


def test_a_class_table_given_as_src_points_to_classes(work):
    result = cli("pack", work["src"] / "class_dict.csv", "--size", "8")
    assert result.exit_code == 1 and "rejected" not in result.output
    assert "class_dict.csv is a class table (name,r,g,b), not a list of images" in result.output
    assert "pass it with --classes and give the image folder as SRC" in result.output


def _read_only_folder(folder: Path) -> bool:
    """Make `folder` unwritable: by its mode, or (for root, whom modes do not stop) by a
    read-only mount; False when neither can be done here."""
    folder.mkdir()
    folder.chmod(0o555)
    if not os.access(folder, os.W_OK):
        return True
    mount = ["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(folder)]
    return subprocess.run(mount, capture_output=True).returncode == 0


def test_preview_into_a_read_only_folder_says_the_folder_is_not_writable(work, tmp_path):
    folder = tmp_path / "ro"
    if not _read_only_folder(folder):
        pytest.skip("cannot make a read-only folder here")
    try:
        result = cli("preview", work["packed"], "--out", folder / "x.png", "-n", "2")
    finally:
        subprocess.run(["umount", str(folder)], capture_output=True, check=False)
        folder.chmod(0o755)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert f"folder {folder} is not writable" in result.output
    assert "try a .png name" not in result.output


def test_info_json_names_every_shard_file_with_its_hash(work):
    summary = json.loads(cli("info", work["packed"], "--json").output)
    manifest = json.loads((work["packed"] / "dataset.json").read_text())
    for name, split in manifest["splits"].items():
        listed = summary["splits"][name]["shard_files"]
        assert [s["name"] for s in listed] == [s["name"] for s in split["shards"]]
        assert sum(s["count"] for s in listed) == split["count"]
        for shard in listed:
            for f in shard["files"]:
                data = (work["packed"] / f["path"]).read_bytes()
                assert f["sha256"] == hashlib.sha256(data).hexdigest()
                assert f["bytes"] == len(data)


def test_a_pack_piped_to_files_has_no_progress_updates_and_no_doubled_line(work, tmp_path):
    out = tmp_path / "piped"
    args = ["pack", work["src"], "--out", out, "--size", "8", "--workers", "1"]
    done = subprocess.run(
        [sys.executable, "-m", "packer", *map(str, args)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "\r" not in done.stderr and "packing" not in done.stderr, done.stderr
    lines = (done.stdout + done.stderr).splitlines()
    assert len(lines) == len(set(lines)), lines
    assert sum(line.startswith("packed 8 samples") for line in lines) == 1


# -- item 3: --out inside SRC --------------------------------------------------------------------


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_an_out_that_is_or_holds_the_sources_is_refused_and_overwrite_is_never_offered(
    tmp_path,
):
    src = make_segmentation(tmp_path / "data" / "src", {"train": 3}, (32, 24))
    before = _files(src)
    for out, overwrite in [(src, ()), (src, ("--overwrite",)), (tmp_path, ("--overwrite",))]:
        result = cli("pack", src, "--out", out, "--size", "8", "--workers", "1", *overwrite)
        assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
        assert "beside its sources, never among them" in result.output
        assert "--overwrite" not in result.output
        assert _files(src) == before and not (tmp_path / "dataset.json").exists()
    listed = tmp_path / "listed"
    listed.mkdir()
    (listed / "a.png").write_bytes(b"")
    (listed / "all.csv").write_text("a.png,cat\n")
    result = cli("pack", listed / "all.csv", "--out", listed, "--overwrite")
    assert "is the source folder" in result.output
    with pytest.raises(PackError, match="holds the source folder"):
        packer.pack(src, out=tmp_path / "data", overwrite=True, size=8)
    assert _files(src) == before
    ds = packer.pack(src, size=8, workers=1)  # the sources still pack, beside themselves
    assert ds["train"].count == 3 and ds.root == tmp_path / "data" / "src-npy"


def test_an_output_folder_inside_the_source_is_left_out_of_every_scan(tmp_path):
    src = make_classification(tmp_path / "photos", {"ants": 4, "bees": 4}, (32, 24))
    ds = packer.pack(src, out=src / "packed", size=16, workers=1)
    assert ds.class_names == ["ants", "bees"]
    dry = cli("pack", src, "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "classes: 2: ants, bees" in dry.output
    assert "not scanned: packed/ (a pack made by packer" in dry.output
    again = packer.pack(src, out=src / "packed", size=16, workers=1)  # nothing to do
    assert again.class_names == ["ants", "bees"] and again["train"].count == 8
    (src / "empty_out").mkdir()  # an --out that exists, empty, inside SRC
    plan = packer.packing.make_plan(src, src / "empty_out", size=16)
    assert plan.scan.class_names == ["ants", "bees"]


# -- item 4: a folder holding only masks ---------------------------------------------------------


def test_a_folder_of_masks_alone_is_an_error_that_says_so(work, tmp_path):
    with pytest.raises(SourceError, match=r"only mask folders \(train_labels/\).*train/"):
        packer.packing.make_plan(work["masks_only"], size=8)
    other = tmp_path / "labels_only"
    shutil.copytree(work["masks_only"] / "train_labels", other / "labels")
    shutil.copy(work["masks_only"] / "class_dict.csv", other)
    with pytest.raises(SourceError, match="colour table for segmentation masks"):
        packer.packing.make_plan(other, size=8)


# -- item 5: the dry run predicts what the pack rejects ------------------------------------------


def test_the_dry_run_predicts_every_rejection_of_the_pack(work, tmp_path):
    # the corpus holds a 16-bit PNG among 8-bit pictures: one kind per pack, asked for
    dry = cli("pack", work["corpus"], "--dry-run", "--size", "8", "--dtype", "uint8")
    assert dry.exit_code == 0, dry.output
    predicted = int(re.search(r"^rejected: (\d+)", dry.output, re.M)[1])
    assert "only packing finds damaged compressed data" in dry.output
    ds = packer.pack(work["corpus"], out=tmp_path / "c", size=8, workers=1, dtype="uint8")
    rejected = ds.manifest["rejected"]
    assert predicted == len(rejected) == 8  # 7 broken files + one loop, as the pack finds them
    shown = set(re.findall(r"^  (\S.*?): ", dry.output, re.M))
    assert shown == {r["path"] for r in rejected}


def test_the_dry_run_predicts_a_mask_of_the_wrong_size(tmp_path):
    src = make_segmentation(tmp_path / "src", {"train": 3}, (32, 24))
    mask = src / "train_labels" / "scene_0001.png"
    Image.open(mask).resize((30, 24)).save(mask)
    dry = cli("pack", src, "--dry-run", "--size", "8")
    assert "rejected: 1 (1 x mask is NxN pixels but its image train/scene_0001.png is NxN)" in (
        dry.output
    )
    assert "split train: 3 samples (1 would be rejected)" in dry.output


# -- item 6: the default size --------------------------------------------------------------------


def test_without_a_size_the_median_rounded_to_16_is_chosen_and_said(tmp_path):
    src = tmp_path / "mixed"
    for name, (w, h) in {"a": (100, 80), "b": (200, 150), "c": (300, 200)}.items():
        (src / "cls").mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (w, h), (9, 9, 9)).save(src / "cls" / f"{name}.png")
    result = cli("pack", src, "--out", tmp_path / "out", "--workers", "1", "--no-progress")
    assert result.exit_code == 0, result.output
    assert packer.open(tmp_path / "out").image_shape == (144, 208, 3)
    assert "208x144, the median image size (200x150) rounded to multiples of 16" in result.output
    assert "from 100x80 to 300x200" in result.output
    same = make_classification(tmp_path / "same", {"x": 2}, (40, 30))
    plan = packer.packing.make_plan(same)
    assert plan.config.geometry.size == (40, 30) and "the size of all 2 images" in plan.size_rule


def test_a_pack_far_larger_than_the_free_space_is_refused_unless_forced(
    work, tmp_path, monkeypatch
):
    monkeypatch.setattr(storage, "free_space", lambda path: 1000)
    out = tmp_path / "out"
    result = cli("pack", work["src"], "--out", out, "--size", "16x12")
    assert result.exit_code == 1 and "1.0 MB" not in result.output
    assert "needs about" in result.output and "--force" in result.output
    assert not out.exists()
    monkeypatch.setattr(storage, "free_space", lambda path: 5000)  # needs 6.1 KB: a warning
    warned = cli("pack", work["src"], "--out", out, "--size", "16x12", "--no-progress")
    assert warned.exit_code == 0, warned.output
    assert "warning: the pack needs about 0.0 MB" in warned.output
    monkeypatch.setattr(storage, "free_space", lambda path: 1000)
    forced = cli("pack", work["src"], "--out", out / "f", "--size", "16x12", "--force")
    assert forced.exit_code == 0, forced.output


# -- item 9: the Python API ----------------------------------------------------------------------


def test_splits_have_len_repr_and_samples_by_index(work):
    ds = packer.open(work["packed"])
    train = ds["train"]
    assert len(train) == 6
    assert repr(train).startswith("<Split 'train' of ") and "6 samples" in repr(train)
    assert "images 12x16x3 uint8" in repr(train)
    image, mask = train[2]
    batch = train.reader.read(np.arange(6))
    assert np.array_equal(image, batch["images"][2]) and np.array_equal(mask, batch["masks"][2])
    assert np.array_equal(train[-1][0], batch["images"][5])
    with pytest.raises(IndexError):
        train[6]


def test_read_can_keep_the_order_asked(work):
    reader = packer.open(work["packed"])["train"].reader
    everything = {k: v.copy() for k, v in reader.read(np.arange(6)).items()}
    asked = np.array([4, 1, 4, 0])
    got = reader.read(asked, ordered=True)
    assert np.array_equal(got["images"], everything["images"][asked])
    assert np.array_equal(got["masks"], everything["masks"][asked])


def test_class_weights_from_the_stored_counts(work, tmp_path):
    ds = packer.open(work["packed"])
    counts = np.array([ds.manifest["stats"]["class_pixels"][n] for n in ds.class_names], float)
    weights = ds.class_weights()
    present = counts > 0
    expected = np.zeros_like(counts)
    expected[present] = counts.sum() / (present.sum() * counts[present])
    assert np.allclose(np.asarray(weights), expected) and np.asarray(weights).dtype == np.float32
    assert set(weights) == set(range(len(ds.classes)))  # Keras' class_weight: a dict by index
    median = ds.class_weights("median_frequency")
    frequency = counts / counts.sum()
    assert np.isclose(median[0], np.median(frequency[present]) / frequency[0])
    with pytest.raises(ValueError, match="inverse"):
        ds.class_weights("balanced")
    cls = packer.pack(
        make_classification(tmp_path / "c", {"a": 6, "b": 2}, (16, 16)), out=tmp_path / "o",
        size=8, workers=1,
    )  # fmt: skip
    assert cls.class_weights() == {0: 8 / (2 * 6), 1: 8 / (2 * 2)}


# -- item 10: lists ------------------------------------------------------------------------------


def _images(folder: Path, names: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        Image.new("RGB", (16, 12), (50, 60, 70)).save(folder / name)


def test_a_csv_split_column_header_detection_and_root(tmp_path):
    _images(tmp_path / "pics", ["a.png", "b.png", "c.png", "d.png"])
    lists = tmp_path / "lists"
    lists.mkdir()
    (lists / "all.csv").write_text(
        "file,class,split\na.png,cat,train\nb.png,dog,train\nc.png,cat,val\nd.png,dog,test\n"
    )
    scan = packer.packing.make_plan(lists / "all.csv", size=8, root=tmp_path / "pics").scan
    assert {s.image: s.split for s in scan.samples} == {
        "a.png": "train", "b.png": "train", "c.png": "val", "d.png": "test"
    }  # fmt: skip
    assert scan.class_names == ["cat", "dog"] and scan.root == tmp_path / "pics"
    (lists / "noheader.csv").write_text("cat,a.png\ndog,b.png\n")  # path in the second column
    scan = packer.packing.make_plan(lists / "noheader.csv", size=8, root=tmp_path / "pics").scan
    assert [(s.image, s.label) for s in scan.samples] == [("a.png", 0), ("b.png", 1)]
    result = cli("pack", lists / "all.csv", "--root", tmp_path / "pics", "--dry-run", "--size", "8")
    assert result.exit_code == 0 and "split val: 1 samples" in result.output, result.output


# -- item 11: docs and messages ------------------------------------------------------------------


def test_the_readme_use_block_runs_after_make_sample(tmp_path, monkeypatch):
    text = README.read_text()
    block = re.search(r"## Use\n.*?```sh\n(.*?)```", text, re.S)[1]
    monkeypatch.chdir(tmp_path)
    make_segmentation(Path("data/sample"), {"train": 6, "val": 2}, (64, 48))  # as `make sample`
    commands = [line.split("#")[0].split() for line in block.splitlines()]
    assert len(commands) == 6
    for line, command in zip(block.splitlines(), commands, strict=True):
        if command[:2] == ["packer", "bench"]:
            command += ["--seconds", "0.1"]
        args = command[1:] if command[0] == "packer" else command
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, (line, result.output)


def test_the_readme_shows_ignore_class_for_keras():
    text = README.read_text()
    assert "SparseCategoricalCrossentropy(ignore_class=255)" in text


def test_messages_say_what_a_new_user_needs(work, tmp_path):
    assert reason_kind("no mask found for this image (looked for train/R0_f1.*)") == (
        "no mask found for this image"
    )
    assert reason_kind("image is 30000x30000 pixels, over the limit") == (
        "image is NxN pixels, over the limit"
    )
    assert "must be positive" in cli("pack", work["src"], "--size", "0x10").output
    with pytest.raises(PackError, match=r"unknown option resise; did you mean resize\?"):
        packer.pack(work["src"], out=tmp_path / "r", resise="fit")
    with pytest.raises(PackError) as caught:
        packer.pack(work["src"], out=tmp_path / "s", shard_size=0)
    assert "shard_size=0" in str(caught.value) and "--" not in str(caught.value)
    with pytest.raises(StorageError, match="remote paths"):
        packer.open("gs://bucket/packed")
    one = cli("pack", work["src"], "--out", tmp_path / "one", "--size", "8", "--workers", "1")
    assert "1 worker)" in one.output
    preview = cli("preview", work["packed"], "--out", tmp_path / "g.png", "-n", "2")
    assert "2 drawn with seed 0 of the 6 samples of split 'train'" in preview.output


def test_help_shows_every_option_with_its_default():
    for command in (["pack"], ["info"], ["verify"], ["bench"], ["preview"]):
        text = CliRunner().invoke(main, [*command, "--help"]).output
        options = re.split(r"\n  (?=-)", text.split("Options:")[1].strip("\n"))
        for option in options:
            if option.strip().startswith("--help"):
                continue
            assert "[default:" in option or "[required]" in option, (command, option)


def test_info_shows_the_ignore_share_more_and_json_details(tmp_path):
    src = make_segmentation(tmp_path / "src", {"train": 12}, (32, 24))
    for i in range(12):  # an unknown colour in every mask
        path = src / "train_labels" / f"scene_{i:04d}.png"
        rgb = np.asarray(Image.open(path)).copy()
        rgb[:2, :2] = (1, 2, 3)
        Image.fromarray(rgb).save(path)
    packer.pack(src, out=tmp_path / "out", size=(32, 24), workers=1)
    text = cli("info", tmp_path / "out").output
    assert "ignore index 255: 0.52% of pixels" in text
    assert "... and 2 more (info --json lists them all)" in text
    details = json.loads(cli("info", tmp_path / "out", "--json").output)["unknown_labels"]
    assert len(details) == 12 and details[0]["values"] == {"colour (1,2,3)": 4}


def test_the_readme_keras_loss_and_metric_train_a_conv_head_and_leave_ignore_pixels_out(
    tmp_path,
):
    """The README's loss and metric lines, run as written on a raw convolution head: a step
    trains, and the metric is the same whatever the model says on ignore pixels."""
    import keras

    text = README.read_text()
    lines = [
        line
        for line in re.search(r"```python\nimport keras\n(.*?)```", text, re.S)[1].splitlines()
        if line.startswith(("loss = ", "miou = "))
    ]
    assert len(lines) == 2
    src = make_segmentation(tmp_path / "src", {"train": 4}, (32, 24))
    ds = packer.pack(src, out=tmp_path / "out", size=(32, 24))
    scope: dict = {"keras": keras, "ds": ds}
    exec("\n".join(lines), scope)
    model = keras.Sequential([keras.Input((24, 32, 3)), keras.layers.Conv2D(len(ds.classes), 1)])
    model.compile(optimizer="adam", loss=scope["loss"], metrics=[scope["miou"]])
    seq = packer.keras.PackedSequence(tmp_path / "out", batch_size=4)
    history = model.fit(seq, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    miou = scope["miou"]
    y_true = np.array([[0, 1, 255]])
    for guess in (0, 3):  # anything at the ignored pixel
        miou.reset_state()
        miou.update_state(y_true, np.eye(len(ds.classes))[[0, 1, guess]][None])
        assert float(miou.result()) == pytest.approx(1.0)


# -- issue 29: a new user's first hour -----------------------------------------------------------

UNGUARDED_TRAINING = """
import os
import keras
import numpy as np
import packer

with open("runs.txt", "a") as runs:  # every import of this script, workers' included
    runs.write(f"{{os.getpid()}}\\n")


class Noise(keras.utils.PyDataset):
    def __len__(self):
        return 4

    def __getitem__(self, index):
        return np.zeros((2, 8, 8, 3), np.float32), np.zeros(2)


ds = packer.pack({src!r}, out="again", size=(16, 12), workers=2)
print("pack workers:", ds["train"].count, flush=True)
seq = packer.keras.PackedSequence("again", batch_size=2, workers=2)
print("packer's own workers:", seq[0][0].shape, flush=True)
fast = packer.parallel(Noise(), workers=4)
"""


def test_packer_parallel_in_a_script_without_main_guard_stops_at_once_in_one_line(work, tmp_path):
    """The README's packer.parallel block run as a script without `if __name__ ==
    "__main__":` took 21 s and printed 5 tracebacks of workers that ran the script again. Now
    no worker starts: one line says why and what to write; PackedSequence's own workers,
    and the pack's, which need nothing from the script, work without the guard."""
    script = tmp_path / "train.py"
    script.write_text(UNGUARDED_TRAINING.format(src=str(work["src"])))
    env = {**os.environ, "PYTHONPATH": str(README.parent), "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 1
    assert (
        "pack workers: 6" in done.stdout and "packer's own workers: (2, 12, 16, 3)" in done.stdout
    )
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("packer.reading.pipeline.WorkerError: packer's worker processes")
    assert "import train.py" in last and "run its line 23 again" in last
    assert 'under `if __name__ == "__main__":`' in last
    assert "bootstrapping" not in done.stderr and done.stderr.count("Traceback") == 1
    assert len((tmp_path / "runs.txt").read_text().split()) == 1  # no worker ran the script
    block = re.search(
        r"## Your own Sequence, in parallel\n+```python\n(.*?)```",
        (DOCS / "readers.md").read_text(),
        re.S,
    )[1]
    assert 'if __name__ == "__main__":' in block and "packer.parallel(" in block


def test_every_reader_refuses_a_gzip_tfrecord_pack_it_cannot_index_when_made(work):
    """PackedSequence on a gzip TFRecord pack answered len() and failed at the first batch."""
    import packer.keras
    import packer.tf
    import packer.torch

    readers = {
        "PackedSequence": lambda: packer.keras.PackedSequence(work["gz"], batch_size=2),
        "PackedDataset": lambda: packer.torch.PackedDataset(work["gz"], batch_size=2),
        "PackedIterable": lambda: packer.torch.PackedIterable(work["gz"], batch_size=2),
    }
    for name, make in readers.items():
        with pytest.raises(PackError) as refused:
            make()
        message = str(refused.value)
        assert "gzip-compressed TFRecord pack, which has no random access" in message, name
        assert "packer.tf.dataset" in message and "without --compression gzip" in message
        assert "\n" not in message
    with pytest.raises(ValueError, match="leave stream unset to stream it"):
        packer.tf.dataset(work["gz"], batch_size=2, stream=False)
    streamed = packer.tf.dataset(work["gz"], batch_size=2, shuffle=False)  # the alternative
    images, masks = next(iter(streamed))
    assert images.shape == (2, 12, 16, 3) and masks.shape == (2, 12, 16)


IDG_ELSEWHERE = {
    "rescale": 'normalize="unit" on the reader',
    "featurewise_center": 'normalize="dataset" on the reader',
    "featurewise_std_normalization": 'normalize="dataset" on the reader',
    "samplewise_center": "not in packer: normalise each image in the model",
    "samplewise_std_normalization": "not in packer: normalise each image in the model",
    "zca_whitening": "not in packer: whiten in the model",
    "zca_epsilon": "not in packer: whiten in the model",
    "validation_split": '--split train=0.8,val=0.2 (packer.pack(..., split=...)), then read split="val"',  # noqa: E501
    "subset": 'PackedSequence(pack, split="val")',
    "preprocessing_function": "apply it to whole batches: a layer at the model's input",
    "data_format": 'packer.torch takes layout="NCHW"',
    "dtype": "readers give uint8 images, float32 with normalize=...; cast in the model",
    "interpolation_order": "bilinear for images and nearest for masks",
    "target_size": "pack SRC --size WIDTHxHEIGHT",
    "interpolation": "pack SRC --interpolation",
    "color_mode": "packs hold RGB images",
    "class_mode": "one_hot=True",
    "batch_size": "PackedSequence(pack, split, batch_size)",
    "shuffle": "PackedSequence(..., shuffle=True)",
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(IDG_ELSEWHERE))
def test_augment_given_an_image_data_generator_argument_says_where_it_goes(name):
    """`packer.Augment(rescale=1/255)` and `Augment(validation_split=0.2)` were bare TypeErrors."""
    with pytest.raises(TypeError) as refused:
        packer.Augment(**{name: 1}, seed=0)
    message = str(refused.value)
    assert message.startswith(f"Augment takes no {name} (from ImageDataGenerator): ")
    assert IDG_ELSEWHERE[name] in message and "\n" not in message


def test_augment_takes_image_data_generator_names_it_has_and_spells_out_a_typo():
    aug = packer.Augment(brightness_range=(0.8, 1.2), fill_mode="reflect", cval=3, seed=0)
    assert aug.brightness_range == (0.8, 1.2) and aug.fill_mode == "reflect"
    with pytest.raises(
        TypeError, match="unexpected argument rotaton_range; did you mean rotation_range"
    ):
        packer.Augment(rotaton_range=10)


def test_the_readme_shows_the_image_data_generator_user_the_way_in():
    section = (DOCS / "from-imagedatagenerator.md").read_text()
    for old, new in {
        "flow_from_directory": "PackedSequence(pack, split, batch_size)",
        "rescale=1/255": 'normalize="unit"',
        "featurewise_std_normalization": 'normalize="dataset"',
        "validation_split=0.2": "--split train=0.8,val=0.2",
        "fit(workers=N)": "PackedSequence(..., workers=N)",
        "preprocessing_function=f": "a layer at the model's input",
    }.items():
        row = next(line for line in section.splitlines() if line.startswith("|") and old in line)
        assert new in row, row
    assert "```sh\npack photos/" in section and "```python\nimport keras" in section


def _block(heading: str, first: str) -> str:
    """The README or docs/ block under `heading` whose first line starts with `first`."""
    from tests.fixtures.readme_blocks import pages, runnable

    found = [
        b
        for page in pages(REPO)
        for b in runnable(page)
        if b.heading == heading and b.first_line.startswith(first)
    ]
    assert len(found) == 1, (heading, first)
    return found[0].code


def test_the_readme_blocks_a_new_user_found_broken_are_fixed():
    """What a new user met copying the README (tests/end_to_end/test_readme.py runs every block;
    this names each finding): the Keras block's undefined model and `class_weight=weights`
    of a segmentation pack, the augmentation block without imports and only for CUDA, the
    COCO block writing one default folder twice, the VOC example's missing names file and
    `void`, the S3 block's cache at the filesystem root."""
    keras_block = _block("Use", "import keras")
    assert keras_block.index("model = keras.Sequential(") < keras_block.index("model.compile(")
    assert "classification_seq" not in keras_block
    assert "\nmodel.fit(" not in keras_block.split("class_weights(")[1]
    augment = _block("Augmentation, images and masks together", "import packer")
    assert "import torch\n" in augment
    assert 'device = "cuda" if torch.cuda.is_available() else "cpu"' in augment
    assert 'augment_device="cuda"' not in augment
    published = _block("Segmentation data as it is published: COCO, Cityscapes, ADE20K", "pack")
    outputs = []
    for line in published.splitlines():
        args = line.split("#")[0].split()
        if args[:1] != ["pack"]:
            continue
        fmt = args[args.index("--format") + 1] if "--format" in args else "npy"
        out = args[args.index("--out") + 1] if "--out" in args else f"{args[1].rstrip('/')}-{fmt}"
        outputs.append(out.rstrip("/"))
    assert len(outputs) >= 6 and len(set(outputs)) == len(outputs), outputs  # none refused
    classes = _block("Classes by name: ignore, rename, merge (every layout)", "pack camvid/")
    assert "> voc/class_names.txt" in classes and "--ignore-class void" not in classes
    scale = _block("Scale out: Ray, object storage, the shard cache", "import packer")
    assert re.search(r'cache_dir="[^/"]', scale) and 'cache_dir="/' not in scale
    cluster = _block("Scale out: Ray, object storage, the shard cache", "pack s3://")
    assert "--address auto  # needs: cluster" in cluster and "--engine ray   #" in cluster
