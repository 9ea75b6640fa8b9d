"""The Ray engine on a real local Ray with 2 CPUs, started once for the session: the golden
bytes locally and in S3, failed tasks retried then reported, the CLI joining a running Ray,
and Ctrl-C cancelling its tasks with the same command resuming."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

import packer
from packer.errors import PackError
from packer.packing import make_plan, schedule
from packer.packing.convert import Converter
from tests.fixtures.golden import CASES, GOLDEN, digest
from tests.fixtures.packs import manifest_hashes
from tests.fixtures.processes import cli, pack_cmd

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
