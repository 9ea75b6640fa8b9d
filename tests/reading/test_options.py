"""The readers' options, declared once (`packer.reading.options`): every adapter's signature,
docstring and keywords come from the declaration, and every option reaches the Loader."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import get_type_hints

import fsspec
import numpy as np
import pytest
import tensorflow as tf

import packer
import packer.tf
from packer.keras import PackedSequence, SequenceOptions
from packer.reading.loader import Loader
from packer.reading.options import (
    BATCH_SIZE,
    SPLIT,
    Default,
    LoaderOptions,
    ReaderOptions,
    options_of,
)
from packer.storage import cache as shard_cache
from packer.tf import TfOptions
from packer.torch import PackedDataset, PackedIterable, TorchOptions

FROM_TORCH = {"rank": None, "world_size": None}
# reader -> (its declaration, the defaults it gives otherwise than declared)
READERS = {
    Loader: (LoaderOptions, {}),
    PackedSequence: (SequenceOptions, {}),
    packer.tf.dataset: (TfOptions, {"rank": None, "world_size": None, "uneven": None}),
    PackedDataset: (TorchOptions, FROM_TORCH),
    PackedIterable: (TorchOptions, {**FROM_TORCH, "shuffle": "windows"}),
}


def declared_defaults(declaration: type) -> dict:
    """name -> the default the declaration gives, in the declared order."""
    hints = get_type_hints(declaration, include_extras=True)
    return {name: hint.__metadata__[0].value for name, hint in hints.items()}


@pytest.fixture(scope="module")
def pack(seg_src, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("options") / "npy"
    packer.pack(seg_src, out=out, size=(32, 24), shard_size=5 * 32 * 24 * 4)  # 5, 5, 4
    return out


def test_every_reader_shares_the_declared_options():
    shared = declared_defaults(ReaderOptions)
    assert "cache_bytes" in shared
    for declaration, _ in READERS.values():
        names = list(declared_defaults(declaration))
        assert names[: len(shared)] == list(shared)  # the shared ones first, as declared
    for reader in (Loader, PackedSequence, PackedDataset, PackedIterable):
        assert set(declared_defaults(LoaderOptions)) <= set(declared_defaults(READERS[reader][0]))


@pytest.mark.parametrize("reader", READERS, ids=lambda r: r.__qualname__)
def test_signatures_show_each_declared_option_with_its_default(reader):
    declaration, own = READERS[reader]
    params = list(inspect.signature(reader).parameters.values())
    positional = [(p.name, p.default, p.kind) for p in params[:3]]
    assert positional == [
        ("path", inspect.Parameter.empty, inspect.Parameter.POSITIONAL_OR_KEYWORD),
        (SPLIT.name, SPLIT.default, inspect.Parameter.POSITIONAL_OR_KEYWORD),
        (BATCH_SIZE.name, BATCH_SIZE.default, inspect.Parameter.POSITIONAL_OR_KEYWORD),
    ]
    keywords = {p.name: p.default for p in params[3:]}
    assert keywords == declared_defaults(declaration) | own
    assert {p.kind for p in params[3:]} == {inspect.Parameter.KEYWORD_ONLY}  # no **kwargs
    hints = get_type_hints(declaration)
    assert all(p.annotation == hints[p.name] for p in params[3:])
    doc = inspect.getdoc(reader)
    for name, default in keywords.items():
        assert f"- {name}={default!r}" in doc  # each option listed under the docstring
    assert doc.count("- ") >= len(keywords) + 2  # split and batch_size too


def test_a_reader_says_how_its_default_differs_and_keeps_the_declared_help():
    declared = {o.name: o for o in options_of(LoaderOptions)}
    torch_rank = {o.name: o for o in PackedDataset.OPTIONS}["rank"]
    assert torch_rank.default is None and "torch.distributed" in torch_rank.shown
    assert torch_rank.help == declared["rank"].help and torch_rank.type == declared["rank"].type
    assert "torch.distributed's rank" in inspect.getdoc(PackedDataset)
    with pytest.raises(TypeError, match="declares no rnak"):
        options_of(LoaderOptions, rnak=Default(None))


def test_options_are_keywords_and_a_misspelt_one_names_the_right_one(pack):
    with pytest.raises(TypeError, match=r"PackedSequence\(\) got an unexpected keyword "):
        PackedSequence(pack, shuffel=False)
    with pytest.raises(TypeError, match="did you mean 'shuffle'"):
        PackedDataset(pack, shuffel=False)
    with pytest.raises(TypeError, match="did you mean 'batch_size'"):
        packer.tf.dataset(pack, batch_sise=4)
    with pytest.raises(TypeError, match="positional"):
        Loader(pack, "train", 4, False)  # shuffle and the rest: by keyword only
    assert len(Loader(pack, "train", 4)) == 4 and len(PackedSequence(pack, "val", 4)) == 2


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
