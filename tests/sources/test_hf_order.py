"""The order of a split whose samples are cells of dataset files: each row group's rows stay
within one window of a few row groups (so a pack's chunks read few row groups), while each
shard still mixes classes, seeded and the same whatever the worker count."""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

import packer
from packer.packing.order import WINDOW_BLOCKS
from packer.packing.plan import make_plan
from packer.storage import cells
from tests.fixtures.golden import digest
from tests.fixtures.hf_datasets import CLASS_LABEL, IMAGE, features_metadata

CLASSES = [f"c{i}" for i in range(10)]
PER_CLASS, GROUP = 40, 10  # rows sorted by class, as a dataset made from class folders is


def tiny_png(i: int) -> bytes:
    out = io.BytesIO()
    Image.fromarray(np.full((4, 5, 3), i % 256, np.uint8)).save(out, "PNG")
    return out.getvalue()


def sorted_parquet(root: Path, arrow: bool = False) -> Path:
    """One file of 400 rows sorted by class, row groups (or record batches) of 10 rows."""
    labels = [c for c in range(len(CLASSES)) for _ in range(PER_CLASS)]
    images = [{"bytes": tiny_png(i), "path": f"{i}.png"} for i in range(len(labels))]
    features = {"image": IMAGE, "label": {**CLASS_LABEL, "names": CLASSES}}
    table = pa.table({"image": images, "label": labels})
    table = table.replace_schema_metadata(features_metadata(features))
    if arrow:
        folder = root / "train"
        folder.mkdir(parents=True)
        (root / "dataset_dict.json").write_text('{"splits": ["train"]}')
        (folder / "state.json").write_text(
            '{"_data_files": [{"filename": "data-00000-of-00001.arrow"}], "_split": "train"}'
        )
        path = str(folder / "data-00000-of-00001.arrow")
        with pa.OSFile(path, "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table, max_chunksize=GROUP)
    else:
        (root / "data").mkdir(parents=True)
        pq.write_table(table, root / "data" / "train-00000-of-00001.parquet", GROUP)
    return root


def shard_rows(plan) -> list[list[tuple[int, int]]]:
    """Per shard of the train split: (row, class) of each sample, in order."""
    return [
        [(cells.parse(s.image)[1], s.label) for s in shard.samples]
        for shard in plan.shards["train"]
    ]


@pytest.mark.parametrize("arrow", [False, True], ids=["parquet", "save_to_disk"])
def test_each_row_group_stays_within_one_window_of_a_few(tmp_path, arrow):
    plan = make_plan(sorted_parquet(tmp_path / "hub", arrow), out=tmp_path / "out", size=(5, 4))
    order = [row for shard in shard_rows(plan) for row, _ in shard]
    assert sorted(order) == list(range(len(CLASSES) * PER_CLASS))
    window = WINDOW_BLOCKS * GROUP
    for start in range(0, len(order), window):  # windows: whole row groups, shuffled within
        groups = Counter(row // GROUP for row in order[start : start + window])
        assert len(groups) == WINDOW_BLOCKS and set(groups.values()) == {GROUP}
    assert order != sorted(order)
    assert [r // GROUP for r in order[:GROUP]] != [order[0] // GROUP] * GROUP  # rows mixed


def test_each_shard_mixes_classes_like_the_split(tmp_path):
    """Rows sorted by class: a shard of 100 rows (10 row groups drawn from the split) holds
    most classes, none more than 4 row groups of it, where the file's order would give one."""
    src = sorted_parquet(tmp_path / "hub")
    record = make_plan(src, out=tmp_path / "out", size=(5, 4)).record_bytes
    plan = make_plan(src, out=tmp_path / "out", size=(5, 4), shard_size=100 * record)
    shards = shard_rows(plan)
    assert [len(s) for s in shards] == [100] * 4
    for shard in shards:
        histogram = Counter(label for _, label in shard)
        assert len(histogram) >= 6 and max(histogram.values()) <= 4 * GROUP
        distance = sum(abs(histogram[c] / 100 - 0.1) for c in range(len(CLASSES))) / 2
        assert distance <= 0.45  # total variation against the split's; the file's order: 0.9


def test_the_order_is_seeded(tmp_path):
    src = sorted_parquet(tmp_path / "hub")
    plans = [make_plan(src, out=tmp_path / "o", size=(5, 4), seed=seed) for seed in (0, 0, 1)]
    orders = [[s.image for s in p.shards["train"][0].samples] for p in plans]
    assert orders[0] == orders[1] != orders[2]


@pytest.mark.parametrize("arrow", [False, True], ids=["parquet", "save_to_disk"])
def test_many_windows_the_same_bytes_with_one_or_two_workers(tmp_path, arrow):
    src = sorted_parquet(tmp_path / "hub", arrow)
    for n in (1, 2):
        packer.pack(src, out=tmp_path / f"w{n}", size=(5, 4), workers=n, shard_size=6_000)
    assert digest(tmp_path / "w1") == digest(tmp_path / "w2")
