"""Hugging Face datasets: which columns are taken for what (said by a dry run), where splits
come from, and one line naming the column and the fix for what cannot be used."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from PIL import Image

import packer
from packer.cli import pack_command
from packer.errors import SourceError

IMAGE = {"_type": "Image"}
CLASS_LABEL = {"_type": "ClassLabel", "names": ["cat", "dog"]}


def png(seed: int) -> bytes:
    pixels = np.random.default_rng(seed).integers(0, 256, (12, 16, 3), np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "PNG")
    return out.getvalue()


def write(path: Path, columns: dict, features: dict | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table(columns)
    if features is not None:
        meta = {"huggingface": json.dumps({"info": {"features": features}})}
        table = table.replace_schema_metadata(meta)
    pq.write_table(table, path)
    return path


def images(count: int) -> list[dict]:
    return [{"bytes": png(i), "path": f"{i}.png"} for i in range(count)]


def labelled(path: Path, labels: list[int], **more) -> Path:
    columns = {"image": images(len(labels)), "label": labels, **more}
    return write(path, columns, {"image": IMAGE, "label": CLASS_LABEL})


def scan(src: Path, **options):
    return packer.sources.scan(src, **options)


def test_dry_run_names_the_columns_taken_and_left(tmp_path):
    labelled(tmp_path / "data" / "train-00000-of-00001.parquet", [0, 1, 1], caption=["a", "b", "c"])
    result = CliRunner().invoke(pack_command, [str(tmp_path), "--dry-run", "--size", "16"])
    assert result.exit_code == 0, result.output
    assert "layout:  hf-datasets (classification)" in result.output
    assert "columns image -> images, label -> class (ClassLabel, 2 names)" in result.output
    assert "column 'caption' (string) not used" in result.output


def test_splits_from_config_folders_and_unlabelled_rows_left_out(tmp_path):
    labelled(tmp_path / "default" / "train" / "0000.parquet", [0, 1, 1])
    labelled(tmp_path / "default" / "validation" / "0000.parquet", [1, -1])
    found = scan(tmp_path)
    assert found.layout == "hf-datasets" and found.class_names == ["cat", "dog"]
    assert sorted({s.split for s in found.samples}) == ["train", "validation"]
    assert [(s.image, s.label) for s in found.samples if s.split == "validation"] == [
        ("default/validation/0000.parquet#row=0&column=image", 1)
    ]
    assert [(r.path, r.reason) for r in found.rejected] == [
        ("default/validation/0000.parquet#row=1&column=image", "no label in column 'label'")
    ]


def test_several_configs_ask_for_one(tmp_path):
    labelled(tmp_path / "small" / "train" / "0000.parquet", [0])
    labelled(tmp_path / "large" / "train" / "0000.parquet", [1])
    with pytest.raises(SourceError, match=r"2 configs \(large, small\): pack one at a time"):
        scan(tmp_path)


def test_no_image_column(tmp_path):
    write(tmp_path / "data" / "train-00000-of-00001.parquet", {"text": ["a"], "label": [0]})
    with pytest.raises(SourceError) as error:
        scan(tmp_path)
    assert "no image column (it holds text (string), label (int64))" in str(error.value)
    assert "cast_column(..., Image())" in str(error.value)


def test_unknown_struct(tmp_path):
    cells = [{"data": png(0), "name": "a.png"}]
    write(tmp_path / "data" / "train-00000-of-00001.parquet", {"img": cells, "label": [0]})
    with pytest.raises(SourceError) as error:
        scan(tmp_path)
    assert "column 'img' is a struct of (data, name) packer does not know" in str(error.value)
    assert "{bytes, path} struct" in str(error.value)


def test_string_labels_without_class_label(tmp_path):
    path = tmp_path / "data" / "train-00000-of-00001.parquet"
    write(path, {"image": images(2), "label": ["cat", "dog"]}, {"image": IMAGE})
    with pytest.raises(SourceError) as error:
        scan(tmp_path)
    assert "column 'label' holds strings but the features give no ClassLabel" in str(error.value)
    assert "class_encode_column('label')" in str(error.value)


def test_objects_without_class_label(tmp_path):
    objects = [{"bbox": [[1.0, 1.0, 4.0, 4.0]], "category": [0]}]
    write(
        tmp_path / "data" / "train-00000-of-00001.parquet", {"image": images(1), "objects": objects}
    )
    with pytest.raises(SourceError, match=r"objects\.category has no ClassLabel names"):
        scan(tmp_path)


def test_a_task_the_columns_cannot_give(tmp_path):
    labelled(tmp_path / "data" / "train-00000-of-00001.parquet", [0, 1])
    with pytest.raises(SourceError, match="gives classification, not detection"):
        scan(tmp_path, annotations=packer.sources.AnnotationOptions(task="detection"))


def test_an_image_cell_without_bytes_is_rejected_with_its_row(tmp_path):
    cells = [*images(2), {"bytes": None, "path": "elsewhere/2.png"}]
    labelled(tmp_path / "src" / "data" / "train-00000-of-00001.parquet", [0, 1, 0], image=cells)
    ds = packer.pack(tmp_path / "src", out=tmp_path / "out", size=(16, 12), workers=1)
    assert ds["train"].count == 2
    assert [r["reason"] for r in ds.manifest["rejected"]] == [
        "cannot read file: row 2 of column 'image' holds no image bytes "
        "(path 'elsewhere/2.png' only)"
    ]


def test_one_parquet_file_as_src(tmp_path):
    path = labelled(tmp_path / "hub" / "validation-00000-of-00001.parquet", [1, 0])
    found = scan(path)
    assert found.root == path.parent and found.layout == "hf-datasets"
    assert [(s.image, s.split, s.label) for s in found.samples] == [
        ("validation-00000-of-00001.parquet#row=0&column=image", "validation", 1),
        ("validation-00000-of-00001.parquet#row=1&column=image", "validation", 0),
    ]


def test_parquet_beside_images_is_no_hub_dataset_unless_asked(tmp_path):
    for name in ("cat", "dog"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "0.png").write_bytes(png(len(name)))
    labelled(tmp_path / "meta" / "train.parquet", [0, 1])
    assert scan(tmp_path).layout == "class-folders"
    found = scan(tmp_path, layout="hf-datasets")
    assert [(s.image, s.split) for s in found.samples] == [
        ("meta/train.parquet#row=0&column=image", "train"),
        ("meta/train.parquet#row=1&column=image", "train"),
    ]
