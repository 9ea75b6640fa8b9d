"""A YOLO pose dataset packed with `--task detection` packs its boxes; the keypoints it holds
are said to be left out at pack time (the summary), in the manifest's `left_out` and by
`packer info`, not only by the dry run (auto packs them: tests/sources/test_keypoints.py). A
dataset without keypoints records nothing left out."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import packer
from packer.cli import main, pack_command
from tests.fixtures.yolo import DETECT, write

POSE = {
    **DETECT,
    "data.yaml": DETECT["data.yaml"] + "kpt_shape: [3, 3]\n",
    "labels/train/a.txt": "2 0.5 0.5 0.2 0.4 0.45 0.4 2 0.55 0.6 1 0.5 0.5 2\n",
    "labels/train/b.txt": "1 0.9 0.9 0.2 0.2 0.9 0.9 2 0.95 0.95 2 0.85 0.85 0\n",
}
LEFT_OUT = "keypoints: [3, 3] per object (kpt_shape in data.yaml) are not packed"


@pytest.mark.parametrize("task", [["--task", "detection"]])
def test_pose_keypoints_left_out_are_said_and_recorded(tmp_path, task):
    src = write(tmp_path / "pose", POSE)
    out = tmp_path / "out"
    runner = CliRunner()
    result = runner.invoke(pack_command, [str(src), "--out", str(out), "--size", "100x60", *task])
    assert result.exit_code == 0, result.output
    assert f"left out: {LEFT_OUT}, only each pose label's box and class" in result.output
    manifest = json.loads((out / "dataset.json").read_text())
    assert manifest["task"] == "detection"
    assert manifest["left_out"] == [f"{LEFT_OUT}, only each pose label's box and class"]
    assert packer.open(out)["train"].count == 3
    info = runner.invoke(main, ["info", str(out)])
    assert info.exit_code == 0 and f"left out: {LEFT_OUT}" in info.output
    dry = runner.invoke(pack_command, [str(src), "--dry-run", *task])
    assert f"left out: {LEFT_OUT}" in dry.output


def test_a_dataset_without_keypoints_leaves_nothing_out(tmp_path):
    ds = packer.pack(write(tmp_path / "boxes", DETECT), out=tmp_path / "out", size=(100, 60))
    assert "left_out" not in ds.manifest
