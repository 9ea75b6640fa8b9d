"""An hf:// URL goes to fsspec's Hugging Face file system; without huggingface_hub installed,
one line names what to install (no network: these tests never reach the Hub)."""

from __future__ import annotations

import importlib.util

import pytest
from click.testing import CliRunner

from packer import storage
from packer.cli import main

HUB = importlib.util.find_spec("huggingface_hub") is not None


def test_hf_urls_have_a_backend():
    assert storage.backend("hf://datasets/someone/beans").__name__ == "packer.storage.remote"


@pytest.mark.skipif(HUB, reason="huggingface_hub is installed")
def test_without_huggingface_hub_one_line_names_what_to_install(tmp_path):
    result = CliRunner().invoke(
        main, ["pack", "hf://datasets/someone/beans", "--out", str(tmp_path / "out")]
    )
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: hf://datasets/someone/beans: ")
    assert "need huggingface_hub, which is not installed (pip install huggingface_hub)" in lines[0]
    assert not (tmp_path / "out").exists()
