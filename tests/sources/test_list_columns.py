"""Lists with columns (CSV, TSV, JSON Lines) as SRC: ids without extension found under --root,
tags packed as exact multi-hot vectors, numbers as exact float32, extra 16-bit images exact at
identity geometry; roles detected (with the reason a dry run shows) or stated with --columns;
bad rows rejected with their file and line, the rest kept, exit 0 unless --strict."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import packer
from packer.cli.commands import pack_command
from packer.errors import PackError
from packer.keras import PackedSequence
from tests.fixtures.column_lists import TAGS, H, W, multi_hot, rows, write_images, write_list

COUNT = 9


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> tuple[Path, dict]:
    """A Kaggle-like folder: `train/` of images and depth maps, lists beside it."""
    top = tmp_path_factory.mktemp("kaggle")
    return top, write_images(top / "train", COUNT)


def _packed(out: Path) -> dict[str, dict]:
    """Every packed sample's fields by its source file's id (`img_3`)."""
    split = packer.open(out)["train"]
    images, targets = PackedSequence(out, batch_size=split.count, shuffle=False)[0]
    targets = targets if isinstance(targets, dict) else {"target": targets}
    return {
        Path(split.source(k)).stem: {"images": images[k], **{f: v[k] for f, v in targets.items()}}
        for k in range(split.count)
    }


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl"])
def test_tags_numbers_and_depth_are_exact(folder, tmp_path, suffix):
    top, pictures = folder
    listed = rows(COUNT)
    src = write_list(top / f"all{suffix}", listed, ("id", "tags", "age", "depth"))
    out = tmp_path / "out"
    packer.pack(src, out=out, root=top / "train", size=(W, H), progress=False)
    manifest = json.loads((out / "dataset.json").read_text())
    kinds = {f["name"]: (f["kind"], f["shape"], f["dtype"]) for f in manifest["fields"]}
    assert kinds == {
        "images": ("image", [H, W, 3], "|u1"),
        "tags": ("multi_hot", [len(TAGS)], "<f4"),
        "age": ("numbers", [], "<f4"),
        "depth": ("image", [H, W, 1], "<u2"),
    }
    assert [c["name"] for c in manifest["classes"]] == sorted(TAGS)  # the tags name the classes
    assert manifest["options"]["vocabularies"] == {"tags": sorted(TAGS)}
    packed = _packed(out)
    assert len(packed) == COUNT
    for row in listed:
        got = packed[row["id"]]
        image, depth = pictures[row["id"]]
        np.testing.assert_array_equal(got["images"], image)
        np.testing.assert_array_equal(got["tags"], multi_hot(row["tags"]))
        assert got["age"] == np.float32(row["age"])
        np.testing.assert_array_equal(got["depth"][..., 0], depth)  # 16 bits, exact


def test_kaggle_ids_and_class_column(folder, tmp_path):
    """`id,label` with ids without extension: a classification pack, as class folders."""
    top, _ = folder
    listed = rows(COUNT)
    src = write_list(top / "labels.csv", listed, ("id", "kind"))
    out = tmp_path / "out"
    ds = packer.pack(src, out=out, root=top / "train", progress=False)
    assert ds.manifest["task"] == "classification" and [c["name"] for c in ds.classes] == [
        "cat",
        "dog",
        "owl",
    ]
    packed = _packed(out)
    for row in listed:
        assert packed[row["id"]]["target"] == ["cat", "dog", "owl"].index(row["kind"])


def test_dry_run_names_each_role_with_its_reason(folder):
    top, _ = folder
    src = write_list(top / "dry.csv", rows(COUNT), ("id", "tags", "age", "kind", "depth"))
    result = CliRunner().invoke(pack_command, [str(src), "--root", str(top / "train"), "--dry-run"])
    assert result.exit_code == 0, result.output
    for line in (
        "column id: image -> images (ids that resolve to image files under the root)",
        "column tags: multi -> tags (strings, some holding ' ': tags)",
        "column age: number -> age (numbers with fractions)",
        "column kind: class -> labels (strings: class names)",
        "column depth: image -> depth (image files (.png))",
    ):
        assert line in result.output


def test_stated_roles_and_separators(folder, tmp_path):
    """An integer column is a class id unless stated a number; `|` separates tags."""
    top, _ = folder
    listed = [dict(r, age=str(i)) for i, r in enumerate(rows(COUNT))]
    src = write_list(top / "stated.csv", listed, ("id", "tags", "age"), sep="|")
    plan = packer.pack(src, out=tmp_path / "a", root=top / "train", dry_run=True)
    assert "column age: class -> labels (integers: class ids (age:number for numbers))" in plan
    out = tmp_path / "b"
    packer.pack(src, out=out, root=top / "train", columns="age:number", progress=False)
    packed = _packed(out)
    for i, row in enumerate(listed):
        assert packed[row["id"]]["age"] == np.float32(i)
        np.testing.assert_array_equal(packed[row["id"]]["tags"], multi_hot(row["tags"]))


def test_bad_rows_are_named_by_file_and_line_and_the_rest_kept(folder, tmp_path):
    top, _ = folder
    listed = rows(COUNT)
    listed[2]["id"] = "img_missing"
    listed[4]["age"] = "n/a"
    listed[6]["tags"] = ["clear", "fog"]
    src = write_list(top / "bad.csv", listed, ("id", "tags", "age"))
    vocabulary = top / "tags.txt"
    vocabulary.write_text("\n".join(TAGS) + "\n")
    out = tmp_path / "out"
    args = [str(src), "--root", str(top / "train"), "--vocabulary", str(vocabulary)]
    result = CliRunner().invoke(pack_command, [*args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    reasons = {r["reason"] for r in json.loads((out / "dataset.json").read_text())["rejected"]}
    assert reasons == {
        "listed img_missing (bad.csv line 4): missing (no image file of that name, with any "
        "extension)",
        "age 'n/a' (bad.csv line 6) is not a number",
        "tag 'fog' of column tags (bad.csv line 8) is not in the vocabulary",
    }
    assert all(reason in result.output for reason in reasons)
    assert len(_packed(out)) == COUNT - 3
    strict = CliRunner().invoke(pack_command, [*args, "--out", str(tmp_path / "s"), "--strict"])
    assert strict.exit_code != 0 and "bad.csv line 4" in strict.output


def test_plain_path_label_lists_are_read_as_before(folder, tmp_path):
    """A path,label CSV keeps the list layout (and bytes) it always had; a second class
    column is left out, said in the manifest."""
    top, _ = folder
    lines = ["path,label,note"] + [f"train/img_{i}.png,{'ab'[i % 2]},x{i}" for i in range(COUNT)]
    (top / "plain.csv").write_text("\n".join(lines) + "\n")
    ds = packer.pack(top / "plain.csv", out=tmp_path / "out", progress=False)
    assert ds.manifest["source"]["layout"] == "list (.csv)"
    assert [f["name"] for f in ds.manifest["fields"]] == ["images", "labels"]
    assert "columns" not in ds.manifest["options"]


def test_a_second_class_column_is_left_out_and_said(folder, tmp_path):
    top, _ = folder
    listed = [dict(r, label=r["kind"].upper()) for r in rows(COUNT)]
    src = write_list(top / "two.jsonl", listed, ("id", "kind", "label"))
    ds = packer.pack(src, out=tmp_path / "out", root=top / "train", progress=False)
    assert [c["name"] for c in ds.classes] == ["CAT", "DOG", "OWL"]  # the header says label
    assert ds.manifest["left_out"] == [
        "column kind: a second class column (strings: class names); state "
        "columns='kind:class' to take it instead of label"
    ]


def test_a_column_list_needs_an_image_column(folder, tmp_path):
    top, _ = folder
    src = write_list(top / "noimage.tsv", rows(COUNT), ("id", "age"))
    with pytest.raises(PackError, match="no column holds image files or ids"):
        packer.pack(src, out=tmp_path / "out")  # ids do not resolve beside the list


def test_number_vectors_and_workers_give_the_same_bytes(folder, tmp_path):
    """A JSON list of numbers is a float32 vector, exact; 1 and 2 workers write the same
    shards."""
    top, _ = folder
    listed = [dict(r, pose=[i * 0.5, -i / 3, 1.25]) for i, r in enumerate(rows(COUNT))]
    src = write_list(top / "pose.jsonl", listed, ("id", "pose", "kind"))
    shards = []
    for workers in (1, 2):
        out = tmp_path / f"w{workers}"
        packer.pack(src, out=out, root=top / "train", workers=workers, progress=False)
        manifest = json.loads((out / "dataset.json").read_text())
        shards.append(
            [f["sha256"] for s in manifest["splits"]["train"]["shards"] for f in s["files"]]
        )
    assert shards[0] == shards[1]
    packed = _packed(tmp_path / "w2")
    for row in listed:
        np.testing.assert_array_equal(packed[row["id"]]["pose"], np.float32(row["pose"]))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--columns", "id=image"], "'id=image' is not COLUMN:ROLE"),
        (["--columns", "name:image"], "no column 'name'"),
    ],
)
def test_a_wrong_columns_option_is_one_line(folder, args, message):
    top, _ = folder
    src = write_list(top / "opt.csv", rows(COUNT), ("id", "age"))
    result = CliRunner().invoke(pack_command, [str(src), "--root", str(top / "train"), *args])
    assert result.exit_code != 0 and message in result.output


def test_a_split_column_and_a_line_that_is_no_json_object(folder, tmp_path):
    top, _ = folder
    listed = [dict(r, split=("train", "val")[i % 2]) for i, r in enumerate(rows(COUNT))]
    src = write_list(top / "split.jsonl", listed, ("id", "age", "split"))
    src.write_text(src.read_text() + "[1, 2]\n")
    ds = packer.pack(src, out=tmp_path / "out", root=top / "train", progress=False)
    assert {s: ds[s].count for s in ds.splits} == {"train": 5, "val": 4}
    assert ds.manifest["rejected"] == [
        {"path": f"split.jsonl line {COUNT + 1}", "reason": "not a JSON object"}
    ]
    assert ds.manifest["classes"] == [] and "left_out" not in ds.manifest
