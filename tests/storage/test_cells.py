"""Cells of Parquet and Arrow files read as source paths: bytes by row and column, the state of
the file that holds them, one line for what is not there."""

from __future__ import annotations

import hashlib
import os
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from packer import storage
from packer.storage import cells

CELLS = [{"bytes": bytes([i]) * (100 + i), "path": f"{i}.png"} for i in range(7)]


@pytest.fixture
def parquet(tmp_path):
    path = tmp_path / "data" / "train-00000-of-00001.parquet"
    path.parent.mkdir()
    pq.write_table(pa.table({"image": CELLS, "raw": [c["bytes"] for c in CELLS]}), path, 3)
    return path


def test_a_cell_path_names_file_row_and_column():
    key = cells.cell_key("data/train-00000-of-00001.parquet", 17, "image")
    assert key == "data/train-00000-of-00001.parquet#row=17&column=image"
    assert cells.parse("/src/" + key) == ("/src/data/train-00000-of-00001.parquet", 17, "image")
    assert not cells.is_cell("photos/a#row=1.jpg")


@pytest.mark.parametrize("internal", [True, False], ids=["its module", "moved"])
def test_the_parquet_reader_with_or_without_pyarrows_internal_module(
    parquet, monkeypatch, internal
):
    if not internal:  # as if pyarrow moved it: the one pyarrow.parquet exports
        monkeypatch.setitem(sys.modules, "pyarrow._parquet", None)
    reader = cells.parquet_reader(str(parquet), kept=True)
    assert (reader.metadata.num_rows, reader.metadata.num_row_groups) == (7, 3)
    assert reader.schema_arrow == pq.read_schema(parquet)
    group = reader.read_row_group(1, [0, 1], use_threads=False).column("image")
    assert [v["bytes"] for v in group.to_pylist()] == [c["bytes"] for c in CELLS[3:6]]


@pytest.mark.parametrize("column", ["image", "raw"])
def test_every_row_of_every_row_group(parquet, column):
    stat = os.stat(parquet)
    for row in (6, 0, 4, 3, 1, 5, 2):
        data, size, mtime = cells.read_with_stat(f"{parquet}#row={row}&column={column}")
        assert data == CELLS[row]["bytes"]
        assert (size, mtime) == (stat.st_size, stat.st_mtime_ns)


def test_arrow_stream_file(tmp_path):
    path = tmp_path / "data-00000-of-00001.arrow"
    table = pa.table({"image": CELLS})
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=2)
    assert cells.read_bytes(f"{path}#row=5&column=image") == CELLS[5]["bytes"]


def test_storage_reads_stats_and_hashes_a_cell_as_a_file(parquet):
    cell = f"{parquet}#row=4&column=image"
    data = CELLS[4]["bytes"]
    assert storage.stat(cell) == storage.stat(parquet) == storage.stat(f"file://{cell}")
    assert storage.sha256_file(cell) == (len(data), hashlib.sha256(data).hexdigest())
    assert storage.read_head_tail(cell, 10, 5) == (data[:10], data[-5:])
    assert storage.read_head_tail(cell, 1000, 5) == (data, b"")
    assert storage.read_bytes(cell) == data
    assert storage.read_with_stat(cell) == (data, *storage.stat(parquet))
    rels = [
        "data/train-00000-of-00001.parquet#row=1&column=raw",
        "data/gone.parquet#row=0&column=a",
    ]
    found = storage.stat_many(parquet.parent.parent, [*rels, "data/train-00000-of-00001.parquet"])
    assert found == {
        rels[0]: storage.stat(parquet),
        rels[1]: None,
        "data/train-00000-of-00001.parquet": storage.stat(parquet),
    }


def test_a_rewritten_file_is_read_again(parquet):
    cell = f"{parquet}#row=0&column=raw"
    assert cells.read_bytes(cell) == CELLS[0]["bytes"]
    pq.write_table(pa.table({"raw": [b"new bytes"]}), parquet)
    assert cells.read_bytes(cell) == b"new bytes"


def test_what_is_not_there(parquet, tmp_path):
    with pytest.raises(OSError, match="row 7 is past the file's 7 rows"):
        cells.read_bytes(f"{parquet}#row=7&column=image")
    with pytest.raises(OSError, match=r"no column 'label' \(the file holds image, raw\)"):
        cells.read_bytes(f"{parquet}#row=0&column=label")
    with pytest.raises(FileNotFoundError):
        cells.read_bytes(f"{tmp_path}/gone.parquet#row=0&column=image")
    (tmp_path / "junk.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(OSError, match=r"cannot open junk\.parquet"):
        cells.read_bytes(f"{tmp_path}/junk.parquet#row=0&column=image")


def test_row_groups_read_once_are_kept_within_the_budget(parquet, monkeypatch):
    kept = cells._KEPT
    state = storage.stat(parquet)

    def groups_kept() -> set[int]:
        return {key[3] for key in kept.arrays if key[:3] == (str(parquet), *state)}

    for row in (6, 0, 4, 3, 1, 5, 2):  # the order a pack's shuffle asks in
        assert storage.read_bytes(f"{parquet}#row={row}&column=image") == CELLS[row]["bytes"]
    assert groups_kept() == {0, 1, 2}
    monkeypatch.setattr(cells, "KEPT_BYTES", 1)
    assert storage.read_bytes(f"{parquet}#row=0&column=raw") == CELLS[0]["bytes"]
    assert len(kept.arrays) == 1 and kept.bytes == next(iter(kept.arrays.values())).nbytes


def test_row_groups_of_cells_from_the_footer_alone(parquet, tmp_path):
    kept = dict(cells._KEPT.arrays)
    sizes = [pq.ParquetFile(parquet).metadata.row_group(i).total_byte_size for i in range(3)]
    rows = (6, 0, 2, 3, 5)
    block, found = cells.row_groups(parquet.parent, [parquet.name] * len(rows), rows)
    assert block.tolist() == [0, 1, 1, 2, 2]  # numbered as the cells first reach them
    assert found == [sizes[2], sizes[0], sizes[1]]
    assert dict(cells._KEPT.arrays) == kept  # no value read
    arrow = tmp_path / "data-00000-of-00001.arrow"
    table = pa.table({"image": CELLS})
    with pa.OSFile(str(arrow), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=2)  # record batches: rows 0-1, 2-3, 4-5, 6
    files = [arrow.name] * 4 + [f"data/{parquet.name}"]
    block, found = cells.row_groups(tmp_path, files, [6, 5, 0, 1, 6])
    assert block.tolist() == [0, 1, 2, 2, 3]  # batches 3, 2, 0, 0; the Parquet file's group 2
    assert len(found) == 4 and found[3] == sizes[2]
    with pytest.raises(OSError, match="row 7 is past the file's 7 rows"):
        cells.row_groups(parquet.parent, [parquet.name, parquet.name], [6, 7])


@pytest.mark.parametrize("suffix", ["parquet", "arrow"])
def test_an_empty_cell_is_one_line_naming_row_and_column(tmp_path, suffix):
    path = tmp_path / f"train.{suffix}"
    images = [CELLS[0], None, {"bytes": None, "path": "2.png"}, {"bytes": None, "path": None}]
    raw = [CELLS[0]["bytes"], None, b"", None]
    table = pa.table({"image": images, "raw": raw})
    if suffix == "parquet":
        pq.write_table(table, path)
    else:
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table, max_chunksize=3)  # rows 0-2, 3
    assert cells.read_bytes(f"{path}#row=0&column=image") == CELLS[0]["bytes"]
    assert cells.read_bytes(f"{path}#row=2&column=raw") == b""
    for row, column, why in [
        (1, "image", "row 1 of column 'image' is empty"),
        (2, "image", "row 2 of column 'image' holds no image bytes (path '2.png' only)"),
        (3, "image", "row 3 of column 'image' holds no image bytes$"),
        (1, "raw", "row 1 of column 'raw' is empty"),
    ]:
        with pytest.raises(OSError, match=why.replace("(", r"\(").replace(")", r"\)")):
            cells.read_bytes(f"{path}#row={row}&column={column}")
