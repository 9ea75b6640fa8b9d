"""Classes renamed, merged or made the ignore index by name: `ignore_class`, `class_map`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

import packer
from packer.cli import main, pack_command
from packer.errors import LabelError
from packer.labels import IGNORED, ClassTable, LabelMapper, read_class_table
from packer.relabel import ClassMapping, relabel
from packer.synthetic import SHAPE_CLASSES, color_mask, shapes_scene

CAMVID_LIKE = ("Sky", "Road", "Car", "Unlabelled")


@pytest.fixture(scope="module")
def index_src(tmp_path_factory) -> tuple[Path, dict[str, np.ndarray]]:
    """CamVid's layout: train/ + trainannot/ grey masks holding class ids, class_dict.csv
    whose last class is Unlabelled; returns the folder and each image's mask."""
    root = tmp_path_factory.mktemp("camvid_like")
    (root / "train").mkdir()
    (root / "trainannot").mkdir()
    rng = np.random.default_rng(3)
    masks = {}
    for i in range(6):
        image, mask = shapes_scene(rng, 40, 30)
        name = f"f{i}.png"
        Image.fromarray(image).save(root / "train" / name)
        Image.fromarray(mask).save(root / "trainannot" / name)
        masks[name] = mask
    colors = ["128,128,128", "128,64,128", "64,0,128", "0,0,0"]
    lines = ["name,r,g,b"] + [f"{n},{c}" for n, c in zip(CAMVID_LIKE, colors, strict=True)]
    (root / "class_dict.csv").write_text("\n".join(lines) + "\n")
    return root, masks


def packed_masks(out: Path) -> dict[str, np.ndarray]:
    """Source image -> packed mask, read back through packer.open."""
    ds = packer.open(out)["train"]
    return {Path(ds.source(i)).name: ds[i][1] for i in range(ds.count)}


def expected(masks: dict[str, np.ndarray], lut: dict[int, int]) -> dict[str, np.ndarray]:
    """Masks mapped value by value, -1 becoming 255 (the ignore index)."""
    table = np.array([lut.get(v, -1) for v in range(256)])
    table[table == IGNORED] = 255
    return {k: table[m].astype(np.uint8) for k, m in masks.items()}


def test_ignore_class_makes_unlabelled_the_ignore_index(index_src, tmp_path):
    root, masks = index_src
    out = tmp_path / "out"
    packer.pack(root, out, size=(40, 30), resize="none", ignore_class=["unlabelled"], workers=1)
    data = json.loads((out / "dataset.json").read_text())
    assert [c["name"] for c in data["classes"]] == ["Sky", "Road", "Car"]
    assert data["options"]["class_mapping"]["ignore"] == ["unlabelled"]
    assert data["class_mapping"]["values"] == {"0": 0, "1": 1, "2": 2, "3": -1}
    got = packed_masks(out)
    want = expected(masks, {0: 0, 1: 1, 2: 2, 3: IGNORED})
    assert got.keys() == want.keys()
    for key in want:
        np.testing.assert_array_equal(got[key], want[key])


def test_class_map_merges_renames_and_ignores_by_name_value_and_colour(index_src, tmp_path):
    root, masks = index_src
    table = tmp_path / "map.csv"
    table.write_text("source,target\nRoad,ground\nSky,ground\nCar,vehicle\n3,ignore\n")
    out = tmp_path / "out"
    packer.pack(root, out, size=(40, 30), resize="none", class_map=table, workers=1)
    data = json.loads((out / "dataset.json").read_text())
    assert [c["name"] for c in data["classes"]] == ["ground", "vehicle", "Unlabelled"]
    assert data["classes"][0]["color"] == [128, 128, 128]  # the first class merged into it
    got = packed_masks(out)
    want = expected(masks, {0: 0, 1: 0, 2: 1, 3: IGNORED})
    for key in want:
        np.testing.assert_array_equal(got[key], want[key])
    shown = CliRunner().invoke(main, ["info", str(out)]).output
    assert (
        "mapping:  Road -> ground; Sky -> ground; Car -> vehicle; 3 -> ignore (from map.csv)"
        in (shown)
    )
    assert "values:   mask value -> class: 0 ground, 1 ground, 2 vehicle, 3 ignore" in shown


def test_colour_masks_map_through_the_relabelled_colours(seg_src, tmp_path):
    """Colour masks: an ignored class's colour becomes the ignore index, merged colours one
    class; the packed ids equal the source colours mapped by hand."""
    out = tmp_path / "out"
    rows = tmp_path / "map.csv"
    rows.write_text("box,solid\nbar,solid\n")
    packer.pack(
        seg_src, out, size=(64, 48), resize="none", ignore_class="background", class_map=rows
    )
    data = json.loads((out / "dataset.json").read_text())
    assert [c["name"] for c in data["classes"]] == ["disc", "solid"]
    ds = packer.open(out)["train"]
    lut = {c: i for i, (_, c) in enumerate(SHAPE_CLASSES)}
    new = {0: 255, 1: 0, 2: 1, 3: 1}
    for i in range(ds.count):
        rgb = np.asarray(Image.open(ds.mask_source(i)).convert("RGB"))
        ids = np.vectorize(lambda *c: new[lut[c]])(rgb[..., 0], rgb[..., 1], rgb[..., 2])
        np.testing.assert_array_equal(ds[i][1], ids)


def test_a_colour_source_row_maps_that_colour(seg_src):
    table = read_class_table(seg_src / "class_dict.csv")
    mapped = relabel(table, ClassMapping(rows=(("220 20 60", "ignore"),)))
    assert mapped.names == [n for n, _ in SHAPE_CLASSES]
    mapper = LabelMapper(mapped, 255, np.dtype(np.uint8))
    rgb = color_mask(np.array([[0, 1, 2, 3]], np.uint8))
    assert mapper.map(rgb, "color").ids.tolist() == [[0, 255, 2, 3]]


def test_classification_ignore_and_merge(cls_src, tmp_path):
    rows = tmp_path / "map.csv"
    rows.write_text("cats,pets\ndogs,pets\n")
    out = tmp_path / "out"
    packer.pack(cls_src, out, size=24, ignore_class="owls", class_map=rows)
    ds = packer.open(out)
    assert ds.class_names == ["pets"]
    assert ds["train"].count == 16  # 9 cats + 7 dogs; the 6 owls left out
    assert {int(ds["train"][i][1]) for i in range(16)} == {0}


def test_value_map_reports_values_it_does_not_list():
    table = ClassTable.from_names(["a", "b"], "test")
    table = ClassTable(table.classes, "test", value_map=((5, 0), (6, 1), (0, IGNORED)))
    mapped = LabelMapper(table, 255, np.dtype(np.uint8)).map(
        np.array([[5, 6, 0, 7, 7]], np.uint8), "index"
    )
    assert mapped.ids.tolist() == [[0, 1, 255, 255, 255]]
    assert mapped.unknown == {"index 7": 2}


@pytest.mark.parametrize(
    "args, message",
    [
        (["--ignore-class", "Tree"], "--ignore-class Tree: no class named 'Tree' (classes: "),
        (["--class-map", "{map}"], "'Bicycle' is no class"),
    ],
)
def test_mapping_mistakes_are_one_line_errors(index_src, tmp_path, args, message):
    root, _ = index_src
    bad = tmp_path / "bad.csv"
    bad.write_text("Bicycle,vehicle\n")
    args = [a.replace("{map}", str(bad)) for a in args]
    result = CliRunner().invoke(pack_command, [str(root), "--out", str(tmp_path / "o"), *args])
    assert result.exit_code == 1, result.output
    assert result.output.startswith("Error: ") and message in result.output
    assert "Traceback" not in result.output


def test_a_class_map_file_needs_two_columns(tmp_path):
    from packer.relabel import read_class_map

    path = tmp_path / "m.csv"
    path.write_text("a,b,c\n")
    with pytest.raises(LabelError, match="expected 'source,target'"):
        read_class_map(path)
