"""Images inside Parquet files go through the same header probes, freshness checks and source
verification as image files: the image kind (16-bit), the default size, the dry run's
predicted rejections, a re-run with nothing to do, and `verify --sources`."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from click.testing import CliRunner
from PIL import Image

import packer
from packer.cli import main

CLASSES = ["ant", "bee"]
FEATURES = {"image": {"_type": "Image"}, "label": {"_type": "ClassLabel", "names": CLASSES}}


def encoded(pixels: np.ndarray) -> bytes:
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "PNG")
    return out.getvalue()


def hub(root: Path, images: list[bytes]) -> Path:
    """One Hub Parquet file of the train split: an image column and a ClassLabel column."""
    path = root / "data" / "train-00000-of-00001.parquet"
    path.parent.mkdir(parents=True)
    table = pa.table(
        {
            "image": [{"bytes": b, "path": f"{i}.png"} for i, b in enumerate(images)],
            "label": [i % 2 for i in range(len(images))],
        }
    )
    metadata = {"huggingface": json.dumps({"info": {"features": FEATURES}})}
    pq.write_table(table.replace_schema_metadata(metadata), path, row_group_size=2)
    return root


def colour(i: int, shape=(24, 32)) -> np.ndarray:
    return np.random.default_rng(i).integers(0, 256, (*shape, 3), np.uint8)


def cli(*args) -> object:
    return CliRunner().invoke(main, [str(a) for a in args])


def test_a_16_bit_grey_png_in_parquet_packs_as_uint16(tmp_path):
    grey = [np.random.default_rng(i).integers(0, 65536, (12, 16), np.uint16) for i in range(4)]
    ds = packer.pack(hub(tmp_path / "hub", [encoded(g) for g in grey]), out=tmp_path / "out")
    image = next(f for f in ds.manifest["fields"] if f["name"] == "images")
    assert np.dtype(image["dtype"]) == np.uint16
    assert sorted(np.asarray(ds["train"][i][0]).tobytes() for i in range(4)) == sorted(
        g[..., None].tobytes() for g in grey
    )


def test_without_a_size_the_images_size_is_chosen(tmp_path):
    src = hub(tmp_path / "hub", [encoded(colour(i)) for i in range(3)])
    result = cli("pack", src, "--out", tmp_path / "out", "--workers", "1", "--no-progress")
    assert result.exit_code == 0, result.output
    assert packer.open(tmp_path / "out").image_shape == (24, 32, 3)
    assert "the size of all 3 images" in result.output


def test_the_dry_run_predicts_a_corrupt_image_cell(tmp_path):
    good = [encoded(colour(i)) for i in range(4)]
    dry = cli("pack", hub(tmp_path / "good", good), "--dry-run", "--size", "16")
    assert dry.exit_code == 0, dry.output
    assert "rejected: none" in dry.output and "would be rejected" not in dry.output
    bad = hub(tmp_path / "bad", [*good[:3], b"\x89PNG\r\n\x1a\n" + b"\0" * 40])
    dry = cli("pack", bad, "--dry-run", "--size", "16")
    assert dry.exit_code == 0, dry.output
    assert re.search(r"^rejected: 1\b", dry.output, re.M), dry.output
    assert "data/train-00000-of-00001.parquet#row=3&column=image" in dry.output


def test_a_second_run_has_nothing_to_do_and_verify_names_a_changed_file(tmp_path):
    src = hub(tmp_path / "hub", [encoded(colour(i)) for i in range(5)])
    out = tmp_path / "out"
    args = ["pack", src, "--out", out, "--size", "16", "--no-progress"]
    assert cli(*args).exit_code == 0
    stamp = (out / "dataset.json").stat().st_mtime_ns
    again = cli(*args)
    assert again.exit_code == 0 and "nothing to do" in again.output, again.output
    assert (out / "dataset.json").stat().st_mtime_ns == stamp
    verify = cli("verify", out, "--sources")
    assert verify.exit_code == 0, verify.output
    hub(tmp_path / "other", [encoded(colour(i + 1)) for i in range(5)])
    parquet = src / "data" / "train-00000-of-00001.parquet"
    parquet.write_bytes((tmp_path / "other" / "data" / parquet.name).read_bytes())
    verify = cli("verify", out, "--sources")
    assert verify.exit_code == 1
    assert "train-00000-of-00001.parquet#row=" in verify.output
    assert "changed since packed" in verify.output
