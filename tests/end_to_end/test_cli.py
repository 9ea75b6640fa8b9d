"""The command line: pack, --dry-run, info, info --json, verify, option parsing."""

from __future__ import annotations

import json
import subprocess
import sys

import click
import numpy as np
import pytest
from click.testing import CliRunner

from packer.cli import main, pack_command
from packer.cli.params import parse_bytes, parse_size


def test_size_is_width_by_height():
    assert parse_size("480x352") == (480, 352)
    assert parse_size("224") == (224, 224)
    for bad in ("0x3", "axb", "12x", "-3"):
        with pytest.raises(click.BadParameter):
            parse_size(bad)


def test_shard_size_units():
    assert parse_bytes("256MB") == 256_000_000
    assert parse_bytes("1GiB") == 2**30
    assert parse_bytes("1000") == 1000
    with pytest.raises(click.BadParameter):
        parse_bytes("lots")


def test_pack_info_and_verify(seg_src, tmp_path):
    out = tmp_path / "packed"
    runner = CliRunner()
    result = runner.invoke(
        pack_command,
        [str(seg_src), "--out", str(out), "--size", "32x24", "--workers", "2", "--no-progress"],
    )
    assert result.exit_code == 0, result.output
    assert "packed 19 samples (train 14, val 5)" in result.output
    assert str(out) in result.output

    info = runner.invoke(main, ["info", str(out)])
    assert info.exit_code == 0, info.output
    assert "segmentation" in info.output and "disc" in info.output
    assert "[24, 32, 3]" in info.output

    summary = json.loads(runner.invoke(main, ["info", str(out), "--json"]).output)
    assert summary["splits"]["train"]["count"] == 14
    assert summary["fields"][1] == {
        "name": "masks",
        "kind": "mask",
        "shape": [24, 32],
        "dtype": "|u1",
    }

    assert runner.invoke(main, ["verify", str(out)]).exit_code == 0
    shard = next((out / "train").glob("*.images.npy"))
    data = bytearray(shard.read_bytes())
    data[-1] ^= 0xFF
    shard.write_bytes(bytes(data))
    failed = runner.invoke(main, ["verify", str(out)])
    assert failed.exit_code == 1 and shard.name in failed.output


def test_dry_run_writes_nothing(seg_src, tmp_path):
    out = tmp_path / "never"
    result = CliRunner().invoke(pack_command, [str(seg_src), "--out", str(out), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "split train: 14 samples" in result.output
    assert "classes: 4: background, disc, box, bar" in result.output
    assert not out.exists()


def test_clear_error_without_traceback(tmp_path):
    (tmp_path / "empty").mkdir()
    result = CliRunner().invoke(pack_command, [str(tmp_path / "empty")])
    assert result.exit_code == 1
    assert "Error:" in result.output and "Traceback" not in result.output


def test_console_scripts_are_the_same_command(seg_src, tmp_path):
    bindir = sys.executable.rsplit("/", 1)[0]
    for args in ([f"{bindir}/pack", "--help"], [f"{bindir}/packer", "pack", "--help"]):
        out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
        assert "--shard-size" in out and "WIDTHxHEIGHT" in out


def packed_with_cli(src, out, size: str):
    """`pack SRC --out OUT --size SIZE` through the CLI; returns OUT."""
    result = CliRunner().invoke(pack_command, [str(src), "--out", str(out), "--size", size])
    assert result.exit_code == 0, result.output
    return out


def test_bench_reports_rates_and_gpu_feeding(seg_src, tmp_path):
    out = packed_with_cli(seg_src, tmp_path / "packed", "32x24")
    runner = CliRunner()
    result = runner.invoke(
        main,
        ["bench", str(out), "--seconds", "0.2", "--batch-size", "4", "--step-ms", "50", "--json"],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    names = [r["name"] for r in data["rates"]]
    # the memcpy limit comes first: it caps the reader rows below it
    assert names[:3] == [
        "memcpy limit (np.copyto)",
        "packed reader, warm cache",
        "packed reader, cold cache",
    ]
    for name in ("  cold, shuffled shard windows", "sequential file read, cold"):
        assert name in names
    assert "naive decode of the sources" in names
    assert all(r["images_per_s"] > 0 for r in data["rates"])
    assert data["needed_images_per_s"] == 4 * 1000 / 50
    assert data["headroom"] == data["rates"][1]["images_per_s"] / data["needed_images_per_s"]
    text = runner.invoke(main, ["bench", str(out), "--seconds", "0.2", "--step-ms", "50"]).output
    assert "keeps the GPU fed" in text and "GB/s" in text


def test_preview_draws_masks_in_class_colours(seg_src, tmp_path):
    from PIL import Image

    out = packed_with_cli(seg_src, tmp_path / "packed", "64x48")
    runner = CliRunner()
    grid = tmp_path / "grid.png"
    result = runner.invoke(main, ["preview", str(out), "--out", str(grid), "-n", "14"])
    assert result.exit_code == 0, result.output
    pixels = np.asarray(Image.open(grid).convert("RGB")).reshape(-1, 3).astype(int)
    assert Image.open(grid).size[0] >= 2 * 240
    # the legend swatch of class 1 (disc, pure 220,20,60) appears exactly in the image
    assert (np.abs(pixels - [220, 20, 60]).sum(axis=1) == 0).sum() >= 50
