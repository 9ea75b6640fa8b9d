"""What the test commands run: CI runs `make test`, which leaves out the tests marked slow
(as the marker's description says); `make test-all` runs them too."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.fixtures.packs import REPO

ROOT = REPO


def _pytest_command(target: str) -> str:
    """The pytest line `make TARGET` would run (a dry run: nothing is executed)."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    done = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return next(line for line in done.stdout.splitlines() if "pytest" in line)


def test_make_test_leaves_out_slow_tests_and_make_test_all_runs_them():
    assert _pytest_command("test").endswith('-m "not slow"')
    assert _pytest_command("test-all").endswith('-m "slow or not slow"')
    assert "slow:" in (ROOT / "pyproject.toml").read_text()


def test_ci_runs_make_test():
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert [line for line in lines if line and not line.startswith("#")][-1] == "make test"
