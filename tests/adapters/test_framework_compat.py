"""The framework seams: `packer.parallel` is a plain function, the Keras and torch workarounds
(`packer.keras.compat`, `packer.torch.compat`) still see what they look for in the installed
versions, and a version outside the supported range fails in one line. `scripts/compat.sh` runs
this file (and the resume tests) against the oldest supported Keras too."""

from __future__ import annotations

import inspect
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import packer
from packer.errors import FrameworkVersionError, ReorderError


@pytest.fixture(scope="module")
def pack(seg_src, tmp_path_factory) -> Path:
    """14 train samples, 32x24."""
    out = tmp_path_factory.mktemp("compat") / "p"
    packer.pack(seg_src, out=out, size=(32, 24))
    return out


def test_packer_parallel_is_a_function_the_package_exports():
    from packer import parallel

    assert inspect.isfunction(packer.parallel) and parallel is packer.parallel
    assert type(sys.modules[parallel.__module__]) is types.ModuleType  # no class swapped in


@pytest.mark.parametrize("framework", ["keras", "torch"])
def test_a_framework_outside_the_supported_range_fails_in_one_line(framework):
    compat = pytest.importorskip(f"packer.{framework}.compat")
    compat.check_version(__import__(framework).__version__)  # the installed one is supported
    (low_major, low_minor), (high_major, _) = compat.SUPPORTED
    too_old = f"{low_major}.{low_minor - 1}.0" if low_minor else f"{low_major - 1}.99.0"
    for version in (too_old, f"{high_major}.0.0"):
        with pytest.raises(FrameworkVersionError, match=rf"(?i)supports {framework} >=") as error:
            compat.check_version(version)
        assert "\n" not in str(error.value) and version in str(error.value)


def test_torch_samplers_that_reorder_are_still_seen_before_training(pack):
    """packer.torch.compat reads the sampler asking for the length: it must still find it in this
    torch, when the DataLoader or the sampler is made."""
    pytest.importorskip("torch")
    from torch.utils.data import DataLoader, DistributedSampler

    from packer.torch import PackedDataset

    ds = PackedDataset(pack, batch_size=3)
    for make in (
        lambda: DataLoader(ds, batch_size=None, shuffle=True),
        lambda: DistributedSampler(ds, num_replicas=2, rank=0),
    ):
        with pytest.raises(ReorderError, match="give the DataLoader shuffle=False") as error:
            make()
        assert "\n" not in str(error.value)
    assert len(DataLoader(ds, batch_size=None, shuffle=False)) == len(ds)


def tiny_model():
    import keras

    model = keras.Sequential(
        [keras.Input((24, 32, 3)), keras.layers.Rescaling(1 / 255), keras.layers.Conv2D(4, 1)]
    )
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=255)
    model.compile(optimizer="sgd", loss=loss)
    return model


@pytest.mark.parametrize("workers", [1, 2])
def test_fit_shuffling_a_told_reader_is_refused_in_one_line(pack, tmp_path, workers):
    """Keras' shuffle=True reorders the batches of a PyDataset, which no restart can replay:
    BackupAndRestore(reader=) sees the order Keras asks for them in and says what to do."""
    pytest.importorskip("keras")
    from packer.keras import BackupAndRestore, PackedSequence

    seq = PackedSequence(pack, batch_size=1, seed=0, workers=workers)  # 14 batches
    backup = BackupAndRestore(tmp_path / "backup", save_freq=1, reader=seq)
    with pytest.raises(ReorderError, match=r"give fit\(\.\.\., shuffle=False\)") as error:
        tiny_model().fit(seq, epochs=1, shuffle=True, verbose=0, callbacks=[backup])
    assert "\n" not in str(error.value)
    seq.close()


def test_fit_in_order_with_a_told_reader_backs_up_its_position(pack, tmp_path):
    pytest.importorskip("keras")
    from packer.keras import BackupAndRestore, PackedSequence

    seq = PackedSequence(pack, batch_size=3, seed=0)
    backup = BackupAndRestore(tmp_path / "backup", save_freq=2, reader=seq, delete_checkpoint=False)
    tiny_model().fit(seq, epochs=1, shuffle=False, verbose=0, callbacks=[backup])
    newest = max((tmp_path / "backup").iterdir(), key=lambda p: int(p.name))
    metadata = (newest / "training_metadata.json").read_text()
    assert '"reader": {' in metadata  # the reader's place, beside Keras' epoch and batch


def test_a_reader_that_is_no_packer_reader_is_refused_in_one_line(tmp_path):
    pytest.importorskip("keras")
    from packer.keras import BackupAndRestore

    with pytest.raises(TypeError, match=r"takes a packer reader .* not ndarray"):
        BackupAndRestore(tmp_path, reader=np.zeros(3))


def test_mid_epoch_backups_without_a_reader_warn_once_naming_reader(tmp_path):
    pytest.importorskip("keras")
    import warnings

    from packer.keras import BackupAndRestore
    from packer.keras.backup import _warn_once_without_reader

    _warn_once_without_reader.cache_clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        BackupAndRestore(tmp_path / "a", save_freq="epoch")  # whole epochs: nothing to lose
        BackupAndRestore(tmp_path / "b", save_freq=5)
        BackupAndRestore(tmp_path / "c", save_freq=5)
    said = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    assert len(said) == 1 and "without reader=" in said[0] and "repeats" in said[0], said
