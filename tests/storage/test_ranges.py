"""Parts of a remote file (memory:// here, in this process): a Parquet footer and columns read
from the bytes that hold them alone, a part fetched into the local cache once and refused when
its file changed meanwhile, the least recently used parts evicted past the bound."""

from __future__ import annotations

import os
import time

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from packer.storage import cache as cache_module
from packer.storage import ranges, remote
from packer.storage.cache import GRACE


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PACKER_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def memory_parquet(name: str, rows: int = 12) -> str:
    """A Parquet file of `rows` rows in row groups of 4 (a {bytes, path} struct and a label)."""
    table = pa.table(
        {
            "image": [{"bytes": bytes([r]) * 3000, "path": f"{r}.png"} for r in range(rows)],
            "label": list(range(rows)),
        }
    )
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, row_group_size=4)
    url = f"memory://ranges/{name}.parquet"
    fsspec.filesystem("memory").pipe_file(url, sink.getvalue().to_pybytes())
    return url


def test_spans_serve_only_what_was_fetched():
    spans = ranges.Spans(100, {10: b"abcdef"})
    spans.seek(12)
    assert spans.read(3) == b"cde"
    assert spans.seek(-2, os.SEEK_END) == 98
    spans.seek(14)
    with pytest.raises(OSError, match="bytes 14-18 were not fetched"):
        spans.read(4)


def test_a_footer_and_a_column_come_from_their_bytes_alone(cache):
    url = memory_parquet("columns")
    state = remote.stat(url)
    metadata = ranges.footer(url, *state)
    assert (metadata.num_rows, metadata.num_row_groups) == (12, 3)
    assert ranges.read_columns(url, state, ["label"]).column("label").to_pylist() == list(range(12))
    image = ranges.leaves(metadata, "image")
    assert len(image) == 2  # bytes and path
    start, end = ranges.span(metadata, 1, image)
    assert end - start < state[0] / 2  # one row group's image column, not the file
    part = ranges.cached(url, state, start, end).read_bytes()
    reader = pq.ParquetFile(
        ranges.Spans(state[0], {start: part}), metadata=metadata, pre_buffer=False
    )
    column = reader.read_row_group(1, columns=["image"]).column("image")
    assert [v["path"] for v in column.to_pylist()] == ["4.png", "5.png", "6.png", "7.png"]


def test_a_part_is_fetched_once_and_refused_when_its_file_changed(cache):
    url = memory_parquet("changed")
    state = remote.stat(url)
    first = ranges.cached(url, state, 0, 8)
    assert first.read_bytes() == fsspec.filesystem("memory").cat_file(url, 0, 8)
    first.write_bytes(b"kept....")  # the same size: taken as there, not fetched again
    assert ranges.cached(url, state, 0, 8).read_bytes() == b"kept...."
    time.sleep(0.01)
    memory_parquet("changed", rows=8)  # another file under the same name
    with pytest.raises(OSError, match="changed while it was read"):
        ranges.cached(url, state, 8, 16)
    assert not list(first.parent.glob(".tmp-*"))


def test_the_least_recently_used_parts_go_past_the_bound(cache, monkeypatch):
    url = memory_parquet("evicted")
    state = remote.stat(url)
    monkeypatch.setenv("PACKER_CACHE_BYTES", "2500")
    old = ranges.cached(url, state, 0, 1000)
    recent = ranges.cached(url, state, 1000, 2000)
    long_ago = time.time() - 2 * GRACE
    os.utime(old, (long_ago, long_ago))
    os.utime(recent, (long_ago + 1, long_ago + 1))
    newest = ranges.cached(url, state, 2000, 3000)
    assert not old.exists() and recent.exists() and newest.exists()


def test_parts_share_a_fixed_set_of_lock_files(cache, monkeypatch):
    monkeypatch.setattr(cache_module, "LOCK_FILES", 4)
    url = memory_parquet("locks", rows=40)
    state = remote.stat(url)
    whole = fsspec.filesystem("memory").cat_file(url)
    for start in range(0, 3000, 100):  # 30 parts, each its own bytes
        assert ranges.cached(url, state, start, start + 100).read_bytes() == whole[start:][:100]
    locks = {p.name for p in (cache / ".locks").iterdir()} - {
        "evict-sources",
        "evict-sources.bytes",
    }
    assert 1 <= len(locks) <= 4  # not one lock file left behind a part


def test_parts_walk_the_cache_a_tenth_of_its_bound_apart(cache, monkeypatch):
    """Many small parts: the folder is walked when the tallied bytes would pass the bound, not
    once a part, and stays within the bound."""
    monkeypatch.setenv("PACKER_CACHE_BYTES", "20000")
    monkeypatch.setattr(cache_module, "GRACE", 0.0)
    walks = []
    real = cache_module._evict
    monkeypatch.setattr(cache_module, "_evict", lambda *a: walks.append(a) or real(*a))
    url = memory_parquet("tally", rows=40)
    state = remote.stat(url)
    for start in range(0, 60_000, 500):  # 120 parts of 500 bytes: 3x the bound
        ranges.cached(url, state, start, start + 500)
    held = sum(p.stat().st_size for p in (cache / "sources").rglob("*") if p.is_file())
    assert held <= 20_000
    # a walk a part would be 120; the tally's: the first fetch's, then one each time
    # 2,000 bytes (a tenth of the bound, 4 parts) have come since: (60,000 - 20,000) / 2,000
    assert 2 <= len(walks) <= 21
    walked = len(walks)
    (cache / ".locks" / "evict-sources.bytes").write_text("cut sh")  # a killed write: walks
    ranges.cached(url, state, 60_000, 60_500)
    assert len(walks) == walked + 1
    assert int((cache / ".locks" / "evict-sources.bytes").read_text()) > 0


def test_a_store_without_times_dates_a_file_by_its_content_id():
    """The Hub's listing has sizes and content ids (`blob_id`, LFS `sha256`), no time: the id
    stands in for it, so a same-size replacement is a new state (and the parts cached from
    the old file are not taken for the new one's)."""
    from packer.storage.remote import _mtime_ns

    old = _mtime_ns({"size": 10, "blob_id": "a" * 40})
    assert old == _mtime_ns({"size": 10, "blob_id": "a" * 40})  # stable, as listings repeat it
    assert old != _mtime_ns({"size": 10, "blob_id": "b" * 40})
    lfs = _mtime_ns({"size": 10, "lfs": {"sha256": "c" * 64}})
    assert lfs not in (0, old)
    assert _mtime_ns({"size": 10, "mtime": 7.9}) == 7 * 10**9  # a time wins where there is one
