"""BatchReader: reused batch memory never overwrites a batch someone still holds."""

from __future__ import annotations

import numpy as np

import packer


def test_held_batches_are_never_overwritten_released_ones_are_reused(seg_src, tmp_path):
    ds = packer.pack(seg_src, out=tmp_path / "p", size=(32, 24))
    reader = ds["train"].reader
    first = reader.read(np.arange(4))
    kept_copy = {k: v.copy() for k, v in first.items()}
    view = first["images"][1]  # a view keeps the whole batch alive too
    del first
    second = reader.read(np.arange(4, 8))
    assert not np.shares_memory(second["images"], view)
    assert np.array_equal(view, kept_copy["images"][1])
    address = second["images"].__array_interface__["data"][0]
    del second
    third = reader.read(np.arange(8, 12))
    assert third["images"].__array_interface__["data"][0] == address  # released memory reused
    assert np.array_equal(view, kept_copy["images"][1])
