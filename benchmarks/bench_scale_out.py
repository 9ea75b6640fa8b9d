"""Scale-out costs, side by side in one run: the Ray engine against the local engine, packing
from and to a local S3 server against local disk, and remote reads against an s3fs `cat`.

- Ray vs local: the same pack (hymenoptera JPEGs hard-linked to ~2,000 images, 224x224 npy)
  with `--engine local --workers 2` and with `--engine ray` on a 2-CPU Ray, each pack in a
  fresh process, alternating, medians. Ray's figure is taken warm (second pack of a driver:
  its workers are up) and cold (first pack of a new driver: worker start-up included); the
  Ray instance itself is started once, before, and its start-up reported apart.
- Per-task cost: no-op tasks through each engine with the schedule's in-flight window; with
  the single-core cost per image, the images per task at which Ray's per-task cost is 5%.
- S3: moto's server (a separate process on 127.0.0.1) holds the sources and the pack; the
  same pack S3 -> S3 against disk -> disk, local engine, 2 workers.
- Reads: the S3 pack read through the shard cache, cold (empty cache) against an s3fs `cat`
  of the same files, then warm (cache filled, its pages re-read first) against the local pack.
- A projection of ImageNet-1k (1.28 M JPEGs -> 224x224) on 1, 8 and 64 machines of 16 cores.

    python benchmarks/bench_scale_out.py [--repeat 5] [--rounds 3] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harness
from harness import process_cpu

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
SIZE = (224, 224)

_CHILD = r"""
import json, sys, time
import packer
src, out, engine, packs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
options = {"address": "auto"} if engine == "ray" else {"workers": 2}
if engine == "ray":
    import ray
    started = time.perf_counter()
    ray.init(address="auto", log_to_driver=False)
    connect = time.perf_counter() - started
rates = []
for _ in range(packs):
    started = time.perf_counter()
    ds = packer.pack(src, out, size=(224, 224), engine=engine, overwrite=True, **options)
    seconds = time.perf_counter() - started
    rates.append(sum(s.count for s in ds.splits.values()) / seconds)
print(json.dumps(rates))
"""


def child_pack(src, out, engine: str, packs: int) -> list[float]:
    """img/s of `packs` packs in a fresh driver process; its error's last lines if it fails."""
    result = subprocess.run(
        [sys.executable, "-c", _CHILD, str(src), str(out), engine, str(packs)],
        capture_output=True,
        text=True,
    )
    if result.returncode:
        tail = "\n".join(result.stderr.strip().splitlines()[-15:])
        raise SystemExit(f"the {engine} pack's process failed ({result.returncode}):\n{tail}")
    return json.loads(result.stdout.strip().splitlines()[-1])


class Noop:
    """A converter whose task does nothing: what remains is the engine's own cost."""

    def noop(self, i: int) -> int:
        return i


def task_cost(engine, tasks: int = 400) -> float:
    """CPU-seconds per no-op task: wall time x workers / tasks, the schedule's window."""
    from concurrent.futures import FIRST_COMPLETED, wait

    engine.start(Noop())
    window = 2 * engine.workers
    running: set = set()
    started = time.perf_counter()
    for i in range(tasks):
        if len(running) >= window:
            _, running = wait(running, return_when=FIRST_COMPLETED)
        running.add(engine.submit("noop", i))
    wait(running)
    seconds = time.perf_counter() - started
    engine.stop()
    return seconds * engine.workers / tasks


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# moto's host dispatch lists moto's own package folder (~180 stat calls) on every request,
# ~2 ms of the server's CPU per GET on these cores; the server here lists it once.
_SERVER = r"""
import sys, time
import moto.backends
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication, MotoRequestHandler, create_backend_app)
from werkzeug.serving import make_server
modules = tuple(moto.backends.list_of_moto_modules())
moto.backends.list_of_moto_modules = lambda: modules
app = DomainDispatcherApplication(create_backend_app)
latency = float(sys.argv[2]) / 1000
def delayed(environ, start_response):
    time.sleep(latency)  # first-byte latency of a real object store, no CPU spent
    return app(environ, start_response)
make_server("127.0.0.1", int(sys.argv[1]), delayed if latency else app, threaded=True,
            request_handler=MotoRequestHandler).serve_forever()
"""


def start_moto(latency_ms: float = 0) -> subprocess.Popen:
    """moto's S3 server in its own process; `latency_ms` delays each request's answer."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-c", _SERVER, str(port), str(latency_ms)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.environ.update(
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}",
        AWS_EC2_METADATA_DISABLED="true",
    )
    for _ in range(100):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        time.sleep(0.1)
    raise RuntimeError("moto server did not start")


def cpu_pack(src, out, server: int) -> tuple[float, float, float]:
    """One pack in a fresh process (local engine, 2 workers): img/s, CPU seconds of the pack's
    process tree, CPU seconds of the S3 server process meanwhile."""
    before, served = resource.getrusage(resource.RUSAGE_CHILDREN), process_cpu(server)
    rate = child_pack(src, out, "local", 1)[0]
    after, served = resource.getrusage(resource.RUSAGE_CHILDREN), process_cpu(server) - served
    packing = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return rate, packing, served


def read_all(path, cache_dir=None, epochs: int = 1, opened: bool = True) -> tuple[float, int]:
    """Seconds and bytes to read every batch of the train split in pack order, `epochs`
    times; the clock starts before opening the pack unless `opened` (then after)."""
    from packer.reading.loader import Loader

    started = time.perf_counter()
    loader = Loader(path, batch_size=64, shuffle=False, cache_dir=cache_dir)
    if opened:
        started = time.perf_counter()
    total = 0
    for _ in range(epochs):
        for i in range(len(loader)):
            arrays = loader.read(i)
            total += sum(a.nbytes for a in arrays.values())
    return time.perf_counter() - started, total


def measure(repeat: int, rounds: int, tmp: Path) -> dict:
    import ray

    import packer
    from packer.engines.local import LocalEngine
    from packer.engines.ray import RayEngine

    src = harness.linked_copy(SHARED / "hymenoptera", tmp / "src", repeat, {".jpg", ".jpeg"})
    images = sum(1 for p in src.rglob("*") if p.is_file())
    result: dict = {"images": images}

    # -- single-core cost per image (local engine, 1 worker), in a fresh process ------------
    harness.warm(src)
    started = time.perf_counter()
    packer.pack(src, tmp / "w1", size=SIZE, workers=1)
    result["per_image_s"] = (time.perf_counter() - started) / images
    shutil.rmtree(tmp / "w1")

    # -- per-task cost of each engine --------------------------------------------------------
    result["local_task_s"] = task_cost(LocalEngine(workers=2))
    started = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    result["ray_start_s"] = time.perf_counter() - started
    result["ray_task_s"] = task_cost(RayEngine())

    # -- Ray vs local, fresh driver processes, alternating ----------------------------------
    runs: dict[str, list[float]] = {"local": [], "local_cold": [], "ray_cold": [], "ray_warm": []}
    for _ in range(rounds):
        harness.warm(src)
        cold, warm_rate = child_pack(src, tmp / "out-local", "local", 2)
        runs["local_cold"].append(cold)
        runs["local"].append(warm_rate)
        harness.warm(src)
        cold, warm_rate = child_pack(src, tmp / "out-ray", "ray", 2)
        runs["ray_cold"].append(cold)
        runs["ray_warm"].append(warm_rate)
    ray.shutdown()
    for key, values in runs.items():
        result[f"{key}_img_s"] = statistics.median(values)
    result["ray_warm_vs_local"] = result["ray_warm_img_s"] / result["local_img_s"]
    result["ray_cold_vs_local"] = result["ray_cold_img_s"] / result["local_cold_img_s"]
    result["per_core_s"] = 2 / result["local_img_s"]  # what a core really delivers, packing
    result["images_per_task_5pct"] = result["ray_task_s"] / (0.05 * result["per_core_s"])

    # -- S3 -> S3 against disk -> disk, without and with a store's latency ---------------
    for latency in (0, 20):
        result.update(s3_section(src, tmp, rounds, latency, reads=latency == 0))
    return result


def s3_section(src: Path, tmp: Path, rounds: int, latency: float, reads: bool) -> dict:
    """Pack S3 -> S3 against disk -> disk; with `reads`, remote reads against s3fs cat."""
    import fsspec

    import packer

    result: dict = {}
    key = f"_{latency:g}ms"
    moto = start_moto(latency)
    try:
        fs = fsspec.filesystem("s3", use_listings_cache=False, skip_instance_cache=True)
        fs.mkdir("bench")
        fs.put(f"{src}/", "s3://bench/src/", recursive=True)
        sources = fs.find("s3://bench/src")
        started = time.perf_counter()
        fs.cat(sources)  # s3fs's own concurrent GETs: the server's ceiling for the sources
        result["get_ceiling" + key] = len(sources) / (time.perf_counter() - started)
        runs: dict[str, list[tuple[float, float, float]]] = {"disk": [], "s3": []}
        for k in range(rounds):
            harness.warm(src)
            runs["disk"].append(cpu_pack(src, tmp / "out-disk", moto.pid))
            runs["s3"].append(cpu_pack("s3://bench/src", f"s3://bench/p{k}", moto.pid))
        images = len(sources)
        for name, measured in runs.items():
            result[f"{name}_img_s{key}"] = statistics.median(r[0] for r in measured)
            for column, field in (("pack", 1), ("server", 2)):
                seconds = statistics.median(r[field] for r in measured)
                result[f"{name}_{column}_cpu_ms{key}"] = seconds / images * 1e3
        if not reads:
            return result
        url = "s3://bench/p0"
        files = [
            f"{url}/{f['path']}"
            for s in packer.open(url)["train"].shards
            for f in s["files"]
            if not f["path"].endswith(".sources.json")
        ]
        cats, colds, warms, locals_ = [], [], [], []
        for k in range(rounds):
            started = time.perf_counter()
            size = sum(len(fs.cat_file(f)) for f in files)
            cats.append(size / (time.perf_counter() - started))
            seconds, nbytes = read_all(url, tmp / f"cache{k}", opened=False)
            colds.append(nbytes / seconds)
            harness.warm(tmp / f"cache{k}")
            seconds, nbytes = read_all(url, tmp / f"cache{k}", epochs=5)
            warms.append(nbytes / seconds)
            harness.warm(tmp / "out-disk")
            seconds, nbytes = read_all(tmp / "out-disk", epochs=5)
            locals_.append(nbytes / seconds)
        result["cat_MB_s"] = statistics.median(cats) / 1e6
        result["cold_MB_s"] = statistics.median(colds) / 1e6
        result["warm_MB_s"] = statistics.median(warms) / 1e6
        result["local_read_MB_s"] = statistics.median(locals_) / 1e6
        result["cold_vs_cat"] = result["cold_MB_s"] / result["cat_MB_s"]
        result["warm_vs_local"] = result["warm_MB_s"] / result["local_read_MB_s"]
    finally:
        moto.terminate()
        moto.wait()
    return result


def projection(r: dict) -> list[dict]:
    """ImageNet-1k to 224x224 on N machines of 16 cores, from the measured costs.

    Per core: per_core_s (what one core delivers in a warm 2-worker pack of JPEGs of about
    ImageNet's size, every overhead included);
    per task: ray_task_s, with tasks of one 256 MB shard (~1,700 images of 150 KB). What
    stops scaling is printed beside: source bytes and requests, shards per core.
    """
    images, source_kb, record_kb, shard_mb = 1_281_167, 110, 224 * 224 * 3 / 1000, 256
    per_shard = int(shard_mb * 1000 / record_kb)
    shards = -(-images // per_shard)
    rows = []
    for machines in (1, 8, 64):
        cores = 16 * machines
        waves = -(-shards // cores)  # whole-shard tasks: the last wave is the slowest
        task = per_shard * r["per_core_s"] + r["ray_task_s"]
        seconds = waves * task + r["ray_start_s"]
        rate = images / seconds
        rows.append(
            {
                "machines": machines,
                "cores": cores,
                "shards": shards,
                "minutes": seconds / 60,
                "img_s": rate,
                "source_GB_s": rate * source_kb / 1e6,
                "GET_s": rate,
                "shards_per_core": shards / cores,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="hard links per source image")
    parser.add_argument("--rounds", type=int, default=3, help="medians over this many rounds")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        r = measure(args.repeat, args.rounds, Path(tmp))
    notes = (
        f"images: {r['images']} (hymenoptera x{args.repeat}, 224x224), medians of "
        f"{args.rounds} alternating rounds (shared machine, compare within a run); single-core "
        f"pack cost {r['per_image_s'] * 1e3:.2f} ms/img; Ray start-up (2 CPUs, once) "
        f"{r['ray_start_s']:.1f} s"
    )
    engines = [
        ["local, 2 workers, second pack of a process", r["local_img_s"], 1.0],
        ["ray, 2 CPUs, second pack of a driver", r["ray_warm_img_s"], r["ray_warm_vs_local"]],
        ["local, 2 workers, first pack of a process", r["local_cold_img_s"], 1.0],
        ["ray, 2 CPUs, first pack of a new driver", r["ray_cold_img_s"], r["ray_cold_vs_local"]],
    ]
    harness.report(
        "Ray vs local, S3 packs and reads", ["engine", "img/s", "/ local"], engines, notes
    )
    print(
        f"\nper-task cost (CPU-ms): local {r['local_task_s'] * 1e3:.2f}, "
        f"ray {r['ray_task_s'] * 1e3:.2f}; Ray's per-task cost < 5% from "
        f"{r['images_per_task_5pct']:.0f} images per task\n"
    )
    s3 = []
    for ms in (0, 20):
        disk, remote, ceiling = (
            r[f"{k}_{ms}ms"] for k in ("disk_img_s", "s3_img_s", "get_ceiling")
        )
        s3.append(
            [
                f"moto on 127.0.0.1, +{ms} ms per request",
                disk,
                remote,
                remote / disk,
                ceiling,
                remote / ceiling,
            ]
        )
    headers = [
        "pack (local engine, 2 workers)",
        "disk -> disk img/s",
        "S3 -> S3 img/s",
        "/ disk",
        "server's GET ceiling, img/s",
        "/ ceiling",
    ]
    print(harness.table(headers, s3))
    print(
        "\nCPU ms per image, no added latency: disk -> disk pack "
        f"{r['disk_pack_cpu_ms_0ms']:.1f}; S3 -> S3 pack {r['s3_pack_cpu_ms_0ms']:.1f} "
        f"(client side) + server {r['s3_server_cpu_ms_0ms']:.1f}; with a server that took no "
        f"CPU, S3 / disk could reach at most "
        f"{r['disk_pack_cpu_ms_0ms'] / r['s3_pack_cpu_ms_0ms']:.2f} on these cores\n"
    )
    reads = [
        ["s3fs cat of the shard files", r["cat_MB_s"], "1.00"],
        ["packer, cold cache", r["cold_MB_s"], f"{r['cold_vs_cat']:.2f} (vs cat)"],
        ["local pack, warm", r["local_read_MB_s"], "1.00"],
        ["packer, warm cache", r["warm_MB_s"], f"{r['warm_vs_local']:.2f} (vs local)"],
    ]
    print(harness.table(["read (train split, pack order)", "MB/s", "ratio"], reads))
    print("\nImageNet-1k projection (whole-shard tasks of 256 MB, 16 cores per machine):\n")
    rows = projection(r)
    print(
        harness.table(
            ["machines", "cores", "shards/core", "minutes", "img/s", "source GB/s", "GET/s"],
            [
                [
                    p["machines"],
                    p["cores"],
                    p["shards_per_core"],
                    f"{p['minutes']:.1f}",
                    round(p["img_s"]),
                    p["source_GB_s"],
                    round(p["GET_s"]),
                ]
                for p in rows
            ],
        )
    )
    if args.json:
        args.json.write_text(json.dumps({"measured": r, "projection": rows}, indent=1))


if __name__ == "__main__":
    main()
