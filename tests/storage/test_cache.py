"""The local cache of a remote pack's shards (a real S3 on 127.0.0.1): it stays within its
bound and evicts the least recently used, concurrent readers share it, windows order reads
before the whole pack is downloaded, and every adapter reads a remote pack."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import packer
from packer import storage
from packer.reading.loader import Loader
from packer.storage import cache as shard_cache
from tests.fixtures.golden import CASES
from tests.fixtures.packs import all_batches, same_batches

# -- the shard cache ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def remote_pack(s3, golden_sources, tmp_path_factory) -> tuple[str, Path]:
    """The golden segmentation source packed into 4+1 npy shards, in S3 and locally."""
    s3.fs.mkdir("cache-tests")
    url = "s3://cache-tests/packed"
    kind, options = CASES["seg-npy-same-size"]
    packer.pack(golden_sources[kind], url, workers=2, **options)
    local = tmp_path_factory.mktemp("cache-local") / "packed"
    packer.pack(golden_sources[kind], local, workers=2, **options)
    return url, local


def cached_files(cache_dir: Path) -> list[Path]:
    return [p for p in cache_dir.rglob("*") if p.is_file() and ".locks" not in p.parts]


def test_the_cache_stays_within_its_bound_and_evicts_least_recently_used(
    remote_pack, tmp_path, monkeypatch
):
    url, local = remote_pack
    monkeypatch.setattr(shard_cache, "GRACE", 0.0)
    shard = max(f["bytes"] for f in remote_hashes_files(url))
    bound = 2 * shard + 1000
    remote = all_batches(url, shuffle=False, cache_dir=tmp_path, cache_bytes=bound)
    assert same_batches(remote, all_batches(local, shuffle=False))
    files = cached_files(tmp_path)
    assert sum(p.stat().st_size for p in files) <= bound
    assert not [p for p in files if p.name.startswith(".tmp-")]
    names = {p.name for p in files}  # the last shard read is kept, the first evicted
    assert "train-00003-of-00004.images.npy" in names or "val-00000-of-00001.images.npy" in names
    assert "train-00000-of-00004.images.npy" not in names


def remote_hashes_files(url: str) -> list[dict]:
    data = json.loads(storage.read_text(f"{url}/dataset.json"))
    return [f for s in data["splits"].values() for sh in s["shards"] for f in sh["files"]]


_READ_ALL = """
import hashlib, sys
from packer.reading.loader import Loader
loader = Loader(sys.argv[1], batch_size=4, shuffle="global", seed=3, cache_dir=sys.argv[2])
digest = hashlib.sha256()
for i in range(len(loader)):
    images, masks = loader.batch(i)
    digest.update(images.tobytes()); digest.update(masks.tobytes())
print(digest.hexdigest())
"""


def test_concurrent_readers_share_one_cache(remote_pack, tmp_path):
    url, local = remote_pack
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _READ_ALL, url, str(tmp_path)], stdout=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    outputs = {p.communicate(timeout=120)[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs)
    reference = subprocess.run(
        [sys.executable, "-c", _READ_ALL, str(local), str(tmp_path / "unused")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert outputs == {reference}
    files = cached_files(tmp_path)
    assert not [p for p in files if p.name.startswith(".tmp-")]
    train = [f for f in remote_hashes_files(url) if f["path"].startswith("train/")]
    assert len(files) == len([f for f in train if not f["path"].endswith(".sources.json")])


def test_windows_order_starts_before_the_whole_pack_is_downloaded(remote_pack, tmp_path):
    url, local = remote_pack
    loader = Loader(
        url, batch_size=2, shuffle="windows", shuffle_window=2, seed=1, cache_dir=tmp_path
    )
    first = loader.batch(0)
    shard_files = [f for f in remote_hashes_files(url) if f["path"].startswith("train/")]
    data_files = [f for f in shard_files if not f["path"].endswith(".sources.json")]
    assert len(cached_files(tmp_path)) < len(data_files)
    reference = Loader(local, batch_size=2, shuffle="windows", shuffle_window=2, seed=1)
    assert (first[0] == reference.batch(0)[0]).all()
    assert same_batches(
        [loader.batch(i) for i in range(len(loader))],
        [reference.batch(i) for i in range(len(reference))],
    )


def test_keras_and_tf_adapters_read_a_remote_pack(s3, bucket, golden_sources, tmp_path):
    import packer.keras
    import packer.tf

    kind, options = CASES["seg-tfrecord"]
    url = f"{bucket}/packed"
    packer.pack(golden_sources[kind], url, workers=2, **options)
    packer.pack(golden_sources[kind], tmp_path / "local", workers=2, **options)
    for stream in (True, False):
        remote = packer.tf.dataset(
            url, batch_size=4, shuffle=False, stream=stream, cache_dir=tmp_path / f"c{stream}"
        )
        local = packer.tf.dataset(tmp_path / "local", batch_size=4, shuffle=False, stream=stream)
        pairs = list(zip(remote, local, strict=True))
        assert pairs and all((a[0].numpy() == b[0].numpy()).all() for a, b in pairs)
    sequence = packer.keras.PackedSequence(url, batch_size=4, seed=2, cache_dir=tmp_path / "k")
    reference = packer.keras.PackedSequence(tmp_path / "local", batch_size=4, seed=2)
    assert same_batches(
        [sequence[i] for i in range(len(sequence))], [reference[i] for i in range(len(reference))]
    )
