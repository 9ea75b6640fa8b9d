"""The readers' options (`packer.reading.options`): every option reaches the Loader, and the
shard cache options bound the cache of every reader (the model itself: test_option_model)."""

from __future__ import annotations

from pathlib import Path

import fsspec
import numpy as np
import pytest
import tensorflow as tf

import packer
import packer.tf
from packer.keras import PackedSequence
from packer.reading.loader import Loader
from packer.storage import cache as shard_cache
from packer.torch import PackedDataset, PackedIterable


@pytest.fixture(scope="module")
def pack(seg_src, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("options") / "npy"
    packer.pack(seg_src, out=out, size=(32, 24), shard_size=5 * 32 * 24 * 4)  # 5, 5, 4
    return out


def test_options_are_keywords(pack):
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'shuffel'"):
        PackedSequence(pack, shuffel=False)
    with pytest.raises(TypeError, match="positional"):
        Loader(pack, "train", 4, False)  # shuffle and the rest: by keyword only
    assert len(Loader(pack, "train", 4)) == 4 and len(PackedSequence(pack, "val", 4)) == 2


@pytest.mark.parametrize("given", ["32", 2.0, True, 0, None])
@pytest.mark.parametrize(
    "make",
    [PackedSequence, PackedDataset, PackedIterable, packer.tf.dataset],
    ids=["keras", "torch-map", "torch-iterable", "tf"],
)
def test_a_batch_size_that_is_no_whole_number_is_refused_in_one_line(pack, make, given):
    with pytest.raises(ValueError, match=r"^batch_size=.*: expected a whole number of samples"):
        make(pack, batch_size=given)
    assert len(PackedSequence(pack, batch_size=np.int64(4))) == 4  # NumPy's integers are whole


@pytest.mark.parametrize(
    "make",
    [
        lambda pack, **o: PackedSequence(pack, **o).loader,
        lambda pack, **o: PackedDataset(pack, **o).loader,
        lambda pack, **o: PackedIterable(pack, **o).loader,
        lambda pack, **o: packer.tf.dataset(pack, **o).packer_position.loader,
    ],
    ids=["keras", "torch-map", "torch-iterable", "tf"],
)
def test_every_option_reaches_the_loader(pack, make, tmp_path):
    given = {"shuffle": False, "seed": 3, "cache_dir": tmp_path, "cache_bytes": 12345}
    given |= {"drop_remainder": True, "rank": 1, "world_size": 2, "uneven": "drop"}
    loader = make(pack, batch_size=4, **given)
    sampler = loader.sampler
    assert loader.cache == (tmp_path, 12345)
    assert (sampler.batch_size, sampler.shuffle, sampler.seed) == (4, False, 3)
    assert (sampler.rank, sampler.world_size, sampler.uneven) == (1, 2, "drop")
    assert sampler.drop_remainder


def epoch_of(reader) -> list[np.ndarray]:
    """The images of every batch of one epoch (of a tf.data dataset, or an indexed reader)."""
    if isinstance(reader, tf.data.Dataset):
        return [images.numpy() for images, _ in reader]
    return [np.asarray(reader[i][0]) for i in range(len(reader))]


@pytest.mark.parametrize("kind", ["keras", "torch", "tf", "tf-streamed"])
def test_cache_bytes_bounds_the_shard_cache_of_every_reader(seg_src, tmp_path, monkeypatch, kind):
    """A pack at a URL (fsspec's in-process memory://) read through each adapter with
    `cache_bytes`: the batches are the local pack's, the cache stays within the bound."""
    monkeypatch.setattr(shard_cache, "GRACE", 0.0)  # evict as soon as the bound says so
    fmt = "tfrecord" if kind == "tf-streamed" else "npy"
    local = tmp_path / "local"
    packer.pack(seg_src, out=local, size=(32, 24), format=fmt, shard_size=5 * 32 * 24 * 4)
    url = f"memory://reader-options-{kind}/packed"
    memory = fsspec.filesystem("memory")
    memory.put(f"{local}/", f"{url}/", recursive=True)
    shard_file = max(p.stat().st_size for p in (local / "train").iterdir())
    bound = 2 * shard_file + 1000  # one shard's files, not two
    cache = tmp_path / "cache"
    options = {"batch_size": 3, "shuffle": False}
    try:
        if kind == "keras":
            make = PackedSequence
        elif kind == "torch":
            make = PackedDataset
        else:
            options["stream"] = kind == "tf-streamed"
            make = packer.tf.dataset
        got = epoch_of(make(url, cache_dir=cache, cache_bytes=bound, **options))
        want = epoch_of(make(local, **options))
    finally:
        memory.rm(f"memory://reader-options-{kind}", recursive=True)
    assert len(got) == len(want) == 5 and all(map(np.array_equal, got, want))
    files = [p for p in cache.rglob("*") if p.is_file() and ".locks" not in p.parts]
    assert files and sum(p.stat().st_size for p in files) <= bound
    assert not any(p.name.startswith("train-00000") for p in files)  # the first shard evicted
