"""Packs and sources in object storage, on a real server: S3 is moto's server on 127.0.0.1 (a
real HTTP S3 endpoint, reached by s3fs through the usual AWS_* environment, no client call
mocked). A pack in S3 gives the same bytes as a local one (the golden hashes); interruption,
corruption, missing credentials, buckets and held locks each give one clear answer."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time

import pytest

import packer
from packer import storage
from packer.cli.verify import verify
from packer.errors import PackError, StorageError
from tests.fixtures.golden import CASES, GOLDEN, digest
from tests.fixtures.packs import all_batches, manifest_hashes, same_batches
from tests.fixtures.processes import cli
from tests.fixtures.s3 import SECRET

# -- packs in S3 ------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["seg-npy-halved", "seg-tfrecord", "cls-recordio-split"])
def test_pack_to_s3_and_read_back_gives_the_local_bytes(s3, bucket, golden_sources, tmp_path, case):
    kind, options = CASES[case]
    url = f"{bucket}/packed"
    ds = packer.pack(golden_sources[kind], url, workers=2, **options)
    assert digest(url) == GOLDEN[case]
    assert str(ds.root) == url and ds.splits
    assert not s3.fs.exists(f"{url}/.partial"), "work folder left in the bucket"
    packer.pack(golden_sources[kind], tmp_path / "local", workers=2, **options)
    for split in ds.splits:
        for shuffle in (False, "global", "windows"):
            remote = all_batches(url, split=split, shuffle=shuffle, shuffle_window=4)
            local = all_batches(tmp_path / "local", split=split, shuffle=shuffle, shuffle_window=4)
            assert same_batches(remote, local)
    assert packer.open(url)["train"].source(0) == packer.open(tmp_path / "local")["train"].source(0)
    assert verify(url) == []


def test_sources_read_from_s3_give_the_local_bytes(s3, bucket, golden_sources, tmp_path):
    s3.fs.put(f"{golden_sources['seg']}/", f"{bucket}/raw/", recursive=True)
    _, options = CASES["seg-tfrecord"]
    packer.pack(f"{bucket}/raw", tmp_path / "out", workers=2, **options)
    assert digest(tmp_path / "out") == GOLDEN["seg-tfrecord"]
    dry = cli("pack", f"{bucket}/raw", "--dry-run", "--size", "32x24")
    assert dry.returncode == 0, dry.stderr
    assert "train" in dry.stdout


def test_a_source_in_s3_is_read_with_one_request(s3, bucket):
    url = f"{bucket}/raw/a.png"
    s3.fs.pipe_file(url, b"\x89PNG" * 300)
    s3.slow.requests.clear()
    data, size, mtime_ns = storage.read_with_stat(url)
    assert s3.slow.requests == [("GET", url[len("s3:/") :])]
    assert (data, size) == (b"\x89PNG" * 300, 1200)
    assert mtime_ns == int(s3.fs.info(url)["LastModified"].timestamp()) * 10**9
    with pytest.raises(FileNotFoundError):
        storage.read_with_stat(f"{bucket}/raw/absent.png")


def test_a_download_is_one_request_hashed_as_it_is_written(s3, bucket, tmp_path):
    payload = os.urandom(3 << 20)  # several stream blocks
    url = f"{bucket}/packed/train/shard.images.npy"
    s3.fs.pipe_file(url, payload)
    (tmp_path / "local.npy").write_bytes(payload)
    expected = (len(payload), hashlib.sha256(payload).hexdigest())
    for claimed in ("from-s3", "from-disk"):  # the cache's room claims: longer, sparse files
        with open(tmp_path / claimed, "wb") as claim:
            claim.truncate(len(payload) + 4096)
    s3.slow.requests.clear()
    assert storage.download(url, tmp_path / "from-s3") == expected
    assert s3.slow.requests == [("GET", url[len("s3:/") :])]
    assert storage.download(tmp_path / "local.npy", tmp_path / "from-disk") == expected
    assert (tmp_path / "from-s3").read_bytes() == (tmp_path / "from-disk").read_bytes() == payload


def test_the_cli_packs_s3_to_s3_and_keeps_credentials_out_of_everything(
    s3, bucket, golden_sources, tmp_path
):
    s3.fs.put(f"{golden_sources['cls']}/", f"{bucket}/raw/", recursive=True)
    args = ("--format", "tfrecord", "--size", "20x15", "--no-progress")
    done = cli("pack", f"{bucket}/raw", "--out", f"{bucket}/packed", *args)
    assert done.returncode == 0, done.stderr
    assert digest(f"{bucket}/packed") == GOLDEN["cls-tfrecord"]
    info = cli("info", f"{bucket}/packed", "--json")
    assert info.returncode == 0, info.stderr
    assert json.loads(info.stdout)["format"] == "tfrecord"
    grid = tmp_path / "grid.png"
    preview = cli("preview", f"{bucket}/packed", "--out", str(grid), "-n", "4")
    assert preview.returncode == 0, preview.stderr
    assert grid.stat().st_size > 0
    manifest = storage.read_text(f"{bucket}/packed/dataset.json")
    for text in (done.stdout, done.stderr, manifest):
        assert SECRET not in text and "packer-test-key" not in text


# -- interruption, corruption, bad credentials, missing buckets -------------------------------


def test_sigkill_during_an_upload_shows_nothing_partial_and_a_rerun_completes(
    s3, bucket, many_shards
):
    src, args, reference = many_shards
    url = f"{bucket}/out"
    expected = {  # shard files and receipts
        p.relative_to(reference).as_posix(): p.read_bytes()
        for p in reference.rglob("*")
        if p.is_file() and p.name != "dataset.json"
    }
    s3.slow.uploading.clear()
    s3.slow.on = True
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "packer", "pack", str(src), "--out", url, *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        assert s3.slow.uploading.wait(60), "no upload started"
        proc.kill()
        proc.wait()
        time.sleep(0.5)  # let the server see the cut connections
    finally:
        s3.slow.on = False
    keys = [k.split("/", 2)[2] for k in s3.fs.find(url)]
    assert "dataset.json" not in keys
    visible = [k for k in keys if not k.startswith(".partial/")]
    assert len(visible) < len(expected), "the kill came too late to test anything"
    for key in visible:  # whatever is visible is complete and exactly the reference's bytes
        assert s3.fs.cat_file(f"{url}/{key}") == expected[key], key
    done = cli("pack", str(src), "--out", url, *args)
    assert done.returncode == 0, done.stderr
    assert manifest_hashes(url) == manifest_hashes(reference)
    assert not s3.fs.exists(f"{url}/.partial")


def test_verify_names_a_corrupted_object_and_readers_refuse_it(s3, bucket, golden_sources):
    kind, options = CASES["seg-npy-same-size"]
    url = f"{bucket}/packed"
    packer.pack(golden_sources[kind], url, workers=1, **options)
    victim = f"{url}/train/train-00001-of-00004.images.npy"
    data = bytearray(s3.fs.cat_file(victim))
    data[-5] ^= 0xFF
    s3.fs.pipe_file(victim, bytes(data))
    result = cli("verify", url)
    assert result.returncode == 1
    assert "train-00001-of-00004.images.npy" in result.stderr and "sha256" in result.stderr
    with pytest.raises(StorageError, match="corrupted"):
        all_batches(url, shuffle=False)


def test_missing_credentials_give_one_clear_line(s3, bucket, golden_sources):
    packer.pack(golden_sources["cls"], f"{bucket}/packed", workers=1, **CASES["cls-npy"][1])
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
    }
    for args in (
        ("info", f"{bucket}/packed"),
        (
            "pack",
            str(golden_sources["cls"]),
            "--out",
            f"{bucket}/x",
            "--size",
            "8",
            "--no-progress",
        ),
    ):
        result = cli(*args, env=env)
        assert result.returncode == 1
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error:"), result.stderr
        assert "no credentials for s3://" in lines[0] and "AWS_ACCESS_KEY_ID" in lines[0]


def test_memory_urls_are_read_in_process_but_refused_for_packing(golden_sources, tmp_path):
    import fsspec

    memory = fsspec.filesystem("memory")
    _, options = CASES["cls-npy"]
    packer.pack(golden_sources["cls"], tmp_path / "out", workers=1, **options)
    memory.put(f"{tmp_path / 'out'}/", "memory://packer-test/packed/", recursive=True)
    remote = all_batches("memory://packer-test/packed", cache_dir=tmp_path / "cache")
    assert same_batches(remote, all_batches(tmp_path / "out"))
    memory.put(f"{golden_sources['cls']}/", "memory://packer-test/raw/", recursive=True)
    for src, out in (
        ("memory://packer-test/raw", tmp_path / "x"),
        (golden_sources["cls"], "memory://packer-test/out"),
    ):
        with pytest.raises(PackError, match="memory:// lives inside one process"):
            packer.pack(src, out, workers=1, **options)
    memory.rm("memory://packer-test", recursive=True)


def test_a_bucket_that_does_not_exist_is_named(s3, golden_sources):
    result = cli(
        "pack", str(golden_sources["cls"]), "--out", "s3://no-such-bucket/x", "--size", "8"
    )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: s3://no-such-bucket/x")
    assert lines[0].endswith(": the bucket 'no-such-bucket' does not exist")
    with pytest.raises(PackError, match="'no-such-bucket' does not exist"):
        packer.open("s3://no-such-bucket/packed")


def test_a_held_lock_refuses_and_only_force_breaks_a_stale_one(s3, bucket, golden_sources):
    url = f"{bucket}/packed"
    lock = f"{url}/.partial/lock"
    holder = {"host": "elsewhere", "boot": "x", "pid": 1, "token": "t", "holder": "pid 1"}
    args = ("pack", str(golden_sources["cls"]), "--out", url, "--size", "20x15", "--no-progress")
    s3.fs.pipe_file(lock, json.dumps({**holder, "time": time.time()}).encode())
    for extra in ((), ("--force",)):
        result = cli(*args, *extra)
        assert result.returncode == 1
        assert "being written by another pack (host elsewhere pid 1" in result.stderr
    s3.fs.pipe_file(lock, json.dumps({**holder, "time": time.time() - 3600}).encode())
    result = cli(*args)
    assert result.returncode == 1 and "stale: pass --force" in result.stderr
    result = cli(*args, "--force")
    assert result.returncode == 0, result.stderr
    assert cli("verify", url).returncode == 0
    assert not s3.fs.exists(lock)
