"""What users look at for a pack whose fields include kinds packer does not know: `packer info`
names every field (an unknown kind with its kind and raggedness), and `packer preview` draws
ragged points as small crosses in their class colours and leaves an extra float plane undrawn."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

import packer
from packer import fields
from packer.cli import main
from packer.cli.preview import class_colors
from packer.cli.preview_objects import Tile
from tests.fixtures.field_kinds import SIZE, make_custom_pack


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    return make_custom_pack(tmp_path_factory.mktemp("custom") / "p")


def test_info_names_each_field(pack):
    result = CliRunner().invoke(main, ["info", str(pack)])
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if x.startswith("fields:"))
    width, height = SIZE
    assert line == (
        f"fields:   images [{height}, {width}, 3] |u1, labels [] <i4, "
        f"heat [{height}, {width}] <f4 (test_heat, fixed), spots [N, 2] <f4 (test_spots, ragged)"
    )
    assert "npy pack, custom" in result.output and "share of images" in result.output
    assert "mean/std: " in result.output


def test_preview_draws_the_points_in_the_samples_class_colours(pack, tmp_path):
    out = tmp_path / "grid.png"
    result = CliRunner().invoke(main, ["preview", str(pack), "--out", str(out), "-n", "6"])
    assert result.exit_code == 0, result.output
    pixels = np.asarray(Image.open(out).convert("RGB")).reshape(-1, 3)
    colors = [tuple(int(v) for v in c) for c in class_colors(packer.open(pack))]
    drawn = {c: int((pixels == c).all(axis=1).sum()) for c in colors}
    # samples 0, 2, 4 are "cold" with 1, 3 and 2 spots; 1, 3, 5 "hot" with 2, 1 and 3
    assert drawn[colors[0]] == drawn[colors[1]] == 6 * 13  # 13 pixels a cross


def test_points_land_where_their_rows_say_and_other_fields_are_not_drawn():
    colors = np.array([[9, 9, 9], [200, 0, 0]], np.uint8)
    tile = Tile(np.zeros((24, 32, 3), np.uint8), (64, 48), colors, ["a", "b"], None, "#0")
    tile.sample_class = 1
    fields.get("test_heat").draw(tile, np.ones((24, 32), np.float32))
    fields.get("flag").draw(tile, np.ones(2, np.uint8))
    assert not np.asarray(tile.picture()).any()
    fields.get("test_spots").draw(tile, np.array([[4, 5], [10, 20]], np.float32))
    picture = np.asarray(tile.picture())
    assert picture[10, 8].tolist() == picture[40, 20].tolist() == [200, 0, 0]
    assert (picture.any(axis=2)).sum() == 2 * 13


def test_per_object_points_take_their_objects_class_colours():
    colors = np.array([[9, 9, 9], [200, 0, 0], [0, 0, 200]], np.uint8)
    tile = Tile(np.zeros((24, 32, 3), np.uint8), (32, 24), colors, ["a", "b", "c"], None, "#0")
    tile.object_classes = np.array([2, 1], np.int32)
    fields.get("test_spots").draw(tile, np.array([[4, 5], [20, 12]], np.float32))
    picture = np.asarray(tile.picture())
    assert picture[5, 4].tolist() == [0, 0, 200] and picture[12, 20].tolist() == [200, 0, 0]
