"""A Hugging Face dataset at a URL: the Parquet files (and save_to_disk folder) the local tests
write, put in S3 (moto's server), pack to the same samples as the local folder, from Python and
from the command line; the dry run names the columns (of a memory:// URL too), a second run has
nothing to do, `verify --sources` names the cells of a file changed in the bucket; a row
group's image column is fetched once per machine whatever the worker count."""

from __future__ import annotations

from pathlib import Path

import fsspec
import pytest
from click.testing import CliRunner

import packer
from packer.cli import main
from packer.storage import cells
from tests.fixtures.hf_datasets import (
    CLASS_LABEL,
    IMAGE,
    LABELS,
    classification_parquet,
    detection_parquet,
    image_cells,
    samples,
    save_to_disk_by_hand,
    segmentation_parquet,
    write_parquet,
)

SIZE = (20, 15)
DATASETS = {
    "classification": classification_parquet,
    "segmentation": lambda root: segmentation_parquet(root, 5),
    "detection": detection_parquet,
    "save_to_disk": save_to_disk_by_hand,
}


def cli(*args) -> object:
    return CliRunner().invoke(main, [str(a) for a in args])


def put(s3, folder: Path, url: str) -> str:
    """The local folder's files under `url`."""
    s3.fs.put(str(folder), url, recursive=True)
    return url


def asked(s3, method: str, name: str) -> int:
    """Requests (GET, HEAD) for objects named `name` since the recorder was last cleared."""
    return sum(m == method and p.endswith(f"/{name}") for m, p in s3.slow.requests)


@pytest.mark.parametrize("kind", list(DATASETS))
def test_a_dataset_in_s3_packs_as_its_local_folder(s3, bucket, tmp_path, kind):
    local = DATASETS[kind](tmp_path / "hub")
    url = put(s3, local, f"{bucket}/hub")
    remote = packer.pack(url, out=tmp_path / "remote", size=SIZE, workers=2)
    folder = packer.pack(local, out=tmp_path / "local", size=SIZE, workers=1)
    for key in ("task", "classes", "rejected", "dropped_objects"):
        assert remote.manifest.get(key) == folder.manifest.get(key), key
    assert sorted(remote.splits) == sorted(folder.splits)
    for split in folder.splits:
        assert remote[split].count == folder[split].count
        assert samples(remote, split) == samples(folder, split)
    assert remote["train"].source(0).startswith(f"{url}/")
    assert cells.is_cell(remote["train"].source(0))


def test_the_command_line_dry_runs_packs_and_verifies_a_dataset_in_s3(s3, bucket, tmp_path):
    local = classification_parquet(tmp_path / "hub")
    url = put(s3, local, f"{bucket}/hub")
    for src in (url, f"{url}/data/train-00001-of-00002.parquet"):  # the folder, one file
        dry = cli("pack", src, "--dry-run", "--size", "20x15")
        assert dry.exit_code == 0, dry.output
        assert "columns image -> images, label -> class (ClassLabel, 3 names)" in dry.output
        assert "rejected: none" in dry.output
    out = tmp_path / "out"
    args = ["pack", url, "--out", out, "--size", "20x15", "--no-progress"]
    packed = cli(*args)
    assert packed.exit_code == 0, packed.output
    folder = packer.pack(local, out=tmp_path / "local", size=SIZE, workers=1)
    for split in LABELS:
        assert samples(packer.open(out), split) == samples(folder, split)
    again = cli(*args)
    assert again.exit_code == 0 and "nothing to do" in again.output, again.output
    verify = cli("verify", out, "--sources")
    assert verify.exit_code == 0, verify.output
    name = "train-00001-of-00002.parquet"
    other = classification_parquet(tmp_path / "other")  # the same rows, other pictures
    write_parquet(
        other / "data" / name,
        {"image": image_cells(range(100, 103)), "label": LABELS["train"][4:]},
        {"image": IMAGE, "label": CLASS_LABEL},
    )
    s3.fs.put_file(str(other / "data" / name), f"{url}/data/{name}")
    verify = cli("verify", out, "--sources")
    assert verify.exit_code == 1, verify.output
    assert f"{url}/data/{name}#row=0&column=image: changed since packed" in verify.output


def test_a_dry_run_reads_a_memory_url(tmp_path, monkeypatch):
    monkeypatch.setenv("PACKER_CACHE_DIR", str(tmp_path / "cache"))
    local = save_to_disk_by_hand(tmp_path / "saved")
    fsspec.filesystem("memory").put(str(local), "memory://hf-remote/saved", recursive=True)
    dry = cli("pack", "memory://hf-remote/saved", "--dry-run", "--size", "20x15")
    assert dry.exit_code == 0, dry.output
    assert "train/data-00000-of-00001.arrow (7 rows); test/" in dry.output
    assert "columns image -> images, label -> class (ClassLabel, 3 names)" in dry.output
    assert "split test: 3 samples" in dry.output and "rejected: none" in dry.output


def test_a_file_url_packs_as_its_folder(tmp_path):
    local = classification_parquet(tmp_path / "hub")
    result = cli("pack", f"file://{local}", "--out", tmp_path / "out", "--size", "20x15")
    assert result.exit_code == 0, result.output
    folder = packer.pack(local, out=tmp_path / "local", size=SIZE, workers=1)
    for split in LABELS:
        assert samples(packer.open(tmp_path / "out"), split) == samples(folder, split)


def test_each_row_group_is_fetched_once_whatever_the_workers(s3, bucket, tmp_path):
    rows, group = 40, 4
    write_parquet(
        tmp_path / "hub" / "data" / "train-00000-of-00001.parquet",
        {"image": image_cells(range(rows)), "label": [r % 3 for r in range(rows)]},
        {"image": IMAGE, "label": CLASS_LABEL},
        row_group_size=group,
    )
    url = put(s3, tmp_path / "hub", f"{bucket}/hub")
    s3.slow.requests.clear()
    ds = packer.pack(url, out=tmp_path / "out", size=SIZE, workers=2, shard_size=4 * 20 * 15 * 3)
    assert ds["train"].count == rows
    assert len(ds.manifest["splits"]["train"]["shards"]) >= 8  # chunks for both workers
    groups = rows // group
    # the footer (two requests when it is longer than the first read), the label column's
    # chunks in the scan, each row group's image column: each once, not once per worker
    name = "train-00000-of-00001.parquet"
    assert asked(s3, "GET", name) <= 2 + 2 * groups
    # its state: a few times per process (not once per row), and once after each part fetched
    assert asked(s3, "HEAD", name) <= 3 * 3 + groups
