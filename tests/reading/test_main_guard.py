"""Worker processes that must import the main script (their producer is defined in it) and a
script without `if __name__ == "__main__":`: refused before any worker starts, under spawn
and forkserver, in one line naming the cause and the fix; with the guard they work."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.packs import REPO

ROOT = REPO

PRODUCER = """
import json, os, sys
import multiprocessing
import numpy as np
from packer.reading.pipeline import Pipeline, WorkerError

with open("runs.txt", "a") as runs:  # every import of this script, workers' included
    runs.write(f"{os.getpid()}\\n")


def square(index):
    return np.full((2, 3), index * index, np.int64)


def memfds():
    fds = os.listdir("/proc/self/fd")
    return [f for f in fds if "memfd:" in os.path.realpath(f"/proc/self/fd/{f}")]
"""

UNGUARDED = (
    PRODUCER
    + """
try:
    Pipeline(square, 4, workers=2, start=sys.argv[1])
except WorkerError as error:
    print(json.dumps({"error": str(error), "children": len(multiprocessing.active_children()),
                      "memfds": memfds()}))
"""
)

GUARDED = (
    PRODUCER
    + """
if __name__ == "__main__":
    with Pipeline(square, 4, workers=2, start=sys.argv[1]) as pipeline:
        print(json.dumps({"batches": [int(b[0, 0]) for b in pipeline]}))
"""
)


def _run(tmp_path: Path, code: str, method: str) -> subprocess.CompletedProcess:
    script = tmp_path / "train.py"
    script.write_text(code)
    return subprocess.run(
        [sys.executable, str(script), method],
        cwd=tmp_path, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_an_unguarded_script_is_refused_before_any_worker_starts(tmp_path, method):
    done = _run(tmp_path, UNGUARDED, method)
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    message = said["error"]
    assert "\n" not in message
    line = next(n for n, t in enumerate(UNGUARDED.splitlines(), 1) if "Pipeline(square" in t)
    assert f"({method}) import train.py" in message and f"run its line {line} again" in message
    assert 'under `if __name__ == "__main__":`' in message
    assert said["children"] == 0 and said["memfds"] == []
    assert len((tmp_path / "runs.txt").read_text().split()) == 1  # no worker imported it
    assert "bootstrapping" not in done.stderr


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_a_guarded_script_runs_its_workers(tmp_path, method):
    done = _run(tmp_path, GUARDED, method)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"batches": [0, 1, 4, 9]}
    runs = (tmp_path / "runs.txt").read_text().split()
    assert len(runs) >= 3  # the script, then each worker importing it (forkserver: its server)
