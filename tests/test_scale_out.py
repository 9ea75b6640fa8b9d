"""Scale-out: packs and sources in object storage, and the Ray engine, on real servers.

S3 is moto's server on 127.0.0.1 (a real HTTP S3 endpoint, reached by s3fs through the usual
AWS_* environment, no client call mocked); Ray is a real local instance with 2 CPUs, started
once for the session. Both give the same bytes as a local pack (the golden hashes).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import packer
import packer.verify
from packer import storage
from packer.errors import PackError, StorageError
from packer.packing import make_plan, schedule
from packer.packing.convert import Converter
from packer.reading.loader import Loader
from packer.storage import cache as shard_cache
from tests.fixtures.golden import CASES, GOLDEN, digest
from tests.fixtures.packs import manifest_hashes
from tests.fixtures.processes import pack_cmd

SECRET = "packer-test-secret-never-shown"


# -- a real S3 endpoint ------------------------------------------------------------------------


class SlowShardUploads:
    """WSGI middleware in front of moto: while `on`, the body of each shard-file PUT arrives
    slowly (a slow network), and `uploading` is set once one is half received. A body cut
    short (the client died) is refused, as S3 refuses an incomplete request. Every request's
    method and path go into `requests`."""

    def __init__(self, app) -> None:
        self.app = app
        self.on = False
        self.uploading = threading.Event()
        self.requests: list[tuple[str, str]] = []

    def __call__(self, environ, start_response):
        self.requests.append((environ["REQUEST_METHOD"], environ["PATH_INFO"]))
        length = int(environ.get("CONTENT_LENGTH") or 0)
        if not (self.on and environ["REQUEST_METHOD"] == "PUT" and ".npy" in environ["PATH_INFO"]):
            return self.app(environ, start_response)
        body = bytearray()
        stream = environ["wsgi.input"]
        while len(body) < length:
            with contextlib.suppress(OSError):
                piece = stream.read(min(1024, length - len(body)))
                if piece:
                    body += piece
                    if len(body) >= length // 2:
                        self.uploading.set()
                    time.sleep(0.01)
                    continue
            break
        if len(body) < length:
            start_response("400 Bad Request", [("Content-Length", "0")])
            return [b""]
        environ["wsgi.input"] = io.BytesIO(bytes(body))
        return self.app(environ, start_response)


@pytest.fixture(scope="session")
def s3(tmp_path_factory):
    """moto's S3 server on a free port of 127.0.0.1, with the AWS_* environment pointing at it."""
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    slow = SlowShardUploads(DomainDispatcherApplication(create_backend_app))
    server = make_server("127.0.0.1", 0, slow, threaded=True, request_handler=MotoRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    nowhere = str(tmp_path_factory.mktemp("aws") / "absent")
    env = {
        "AWS_ACCESS_KEY_ID": "packer-test-key",
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{server.port}",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_SHARED_CREDENTIALS_FILE": nowhere,
        "AWS_CONFIG_FILE": nowhere,
        "PACKER_CACHE_DIR": str(tmp_path_factory.mktemp("cache")),
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    import fsspec
    import s3fs

    # fsspec reuses filesystem instances: one made earlier in the session (a test of the
    # missing-credentials message, say) would keep its empty credentials.
    s3fs.S3FileSystem.clear_instance_cache()

    yield SimpleNamespace(fs=fsspec.filesystem("s3", use_listings_cache=False), slow=slow)
    server.shutdown()
    s3fs.S3FileSystem.clear_instance_cache()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


_buckets = iter(range(10**6))


@pytest.fixture
def bucket(s3) -> str:
    """A new, empty bucket: its URL."""
    name = f"bucket-{next(_buckets)}"
    s3.fs.mkdir(name)
    return f"s3://{name}"


def cli(*args: str, env: dict | None = None, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "packer", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=kwargs.pop("timeout", 180),
        **kwargs,
    )


def all_batches(path, **options) -> list[tuple[np.ndarray, np.ndarray]]:
    loader = Loader(path, batch_size=3, seed=5, **options)
    return [tuple(np.array(a) for a in loader.batch(i)) for i in range(len(loader))]


def same_batches(a, b) -> bool:
    return len(a) == len(b) and all(
        (x == y).all() and (t == u).all() for (x, t), (y, u) in zip(a, b, strict=True)
    )


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
    assert packer.verify.verify(url) == []


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


# -- the Ray engine ----------------------------------------------------------------------------


@pytest.fixture(scope="session")
def ray_cluster(s3):
    """A local Ray with 2 CPUs for the whole session (its workers see the S3 environment)."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.mark.parametrize("case", sorted(CASES))
def test_ray_engine_gives_the_golden_bytes(ray_cluster, golden_sources, tmp_path, case):
    kind, options = CASES[case]
    packer.pack(golden_sources[kind], tmp_path / case, engine="ray", **options)
    assert digest(tmp_path / case) == GOLDEN[case]


@pytest.mark.parametrize("case", ["seg-npy-halved", "seg-tfrecord-index", "cls-recordio-split"])
def test_ray_gives_the_golden_bytes_in_s3_and_with_whole_shard_tasks(
    ray_cluster, bucket, golden_sources, tmp_path, case
):
    from packer.engines.ray import RayEngine

    kind, options = CASES[case]
    runs = [(tmp_path / case, True), (f"{bucket}/{case}", True), (f"{bucket}/{case}-c", False)]
    for out, whole in runs:
        plan = make_plan(golden_sources[kind], out, **options)
        engine = RayEngine(whole_shards=whole)
        packer.packing.execute(plan, engine=engine)
        assert engine.shares_disk is not whole
        found = digest(out)
        assert found == GOLDEN[case]


class FlakyConverter(Converter):
    """Fails a shard's first `failures` tries after writing part of it (as a crash would)."""

    def __init__(self, config, marks: str, failures: int) -> None:
        super().__init__(config)
        self.marks, self.failures = marks, failures

    def __getstate__(self) -> dict:
        return {**super().__getstate__(), "marks": self.marks, "failures": self.failures}

    def pack_shard(self, task):
        mark = Path(self.marks) / task.shard
        tries = int(mark.read_text()) if mark.exists() else 0
        mark.write_text(str(tries + 1))
        if tries < self.failures:
            self.pack_chunk(task.chunks[0])
            raise OSError(f"injected failure {tries + 1}")
        return super().pack_shard(task)


def test_ray_retries_failed_tasks_and_reports_a_shard_that_keeps_failing(
    ray_cluster, golden_sources, tmp_path
):
    from packer.engines.ray import RayEngine

    kind, options = CASES["seg-npy-halved"]
    plan = make_plan(golden_sources[kind], tmp_path / "out", **options)
    tasks = plan.shard_tasks()
    marks = tmp_path / "marks"
    marks.mkdir()
    flaky = FlakyConverter(plan.config, str(marks), failures=2)
    receipts = schedule.run(RayEngine(retries=2, whole_shards=True), flaky, tasks, False)
    assert sorted(r["name"] for r in receipts) == sorted(t.shard for t in tasks)
    assert {m.read_text() for m in marks.iterdir()} == {"3"}

    plan = make_plan(golden_sources[kind], tmp_path / "again", **options)
    marks = tmp_path / "marks2"
    marks.mkdir()
    doomed = FlakyConverter(plan.config, str(marks), failures=99)
    # One shard: with others in flight the stop would cancel them while Ray completes the
    # failed one, a race that Ray 2.60 answers by aborting the driver (here: pytest).
    with pytest.raises(PackError, match=r"shard \S+: Ray task pack_shard failed \(tried 2 times\)"):
        schedule.run(RayEngine(retries=1, whole_shards=True), doomed, plan.shard_tasks()[:1], False)
    assert not [p for p in (tmp_path / "again").rglob("*.npy")], "a failed shard was written"


def test_cli_engine_ray_joins_a_running_ray_and_checks_its_options(
    ray_cluster, golden_sources, tmp_path
):
    args = ["--size", "40x30", "--shard-size", "12000", "--no-progress"]
    src = str(golden_sources["cls"])
    out = tmp_path / "out"
    done = cli("pack", src, "--out", str(out), "--engine", "ray", "--address", "auto", *args)
    assert done.returncode == 0, done.stderr
    assert digest(out) == GOLDEN["cls-npy"]
    wrong = cli("pack", src, "--out", str(tmp_path / "x"), "--address", "auto", *args)
    assert wrong.returncode == 1 and "--address applies to --engine ray only" in wrong.stderr
    both = cli(
        "pack",
        src,
        "--out",
        str(tmp_path / "y"),
        "--engine",
        "ray",
        "--address",
        "auto",
        "--ray-cpus",
        "2",
        *args,
    )
    assert both.returncode == 1 and "--ray-cpus starts a local Ray" in both.stderr


@pytest.mark.slow
def test_ctrl_c_cancels_ray_tasks_and_the_same_command_resumes(ray_cluster, many_shards, tmp_path):
    src, args, reference = many_shards
    out = tmp_path / "out"
    command = pack_cmd(src, out, *args, "--engine", "ray", "--address", "auto")
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while len(list(out.glob("train/*.receipt.json"))) < 2:
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    assert "run the same command again to resume" in stderr
    assert not list(out.rglob(".tmp-*"))
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert manifest_hashes(out) == manifest_hashes(reference)


def test_coco_from_s3_and_on_ray_gives_the_local_bytes(ray_cluster, s3, bucket, tmp_path):
    """COCO JSON and images behind an s3:// URL, and the shard tasks on Ray, give the bytes
    of a local pack of the same folder."""
    from tests.fixtures.coco import make_coco

    src = make_coco(tmp_path / "coco")
    options = {"size": (40, 30), "resize": "none", "shard_size": 20_000}
    packer.pack(src, tmp_path / "local", **options)
    s3.fs.put(f"{src}/", f"{bucket}/coco/", recursive=True)
    packer.pack(f"{bucket}/coco", tmp_path / "remote", workers=2, **options)
    packer.pack(src, tmp_path / "ray", engine="ray", **options)
    local = manifest_hashes(tmp_path / "local")
    assert len(local) > 6
    assert manifest_hashes(tmp_path / "remote") == local
    assert manifest_hashes(tmp_path / "ray") == local
