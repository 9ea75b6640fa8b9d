"""Real Keras trains from lists with columns: a sigmoid multi-label head on the multi-hot
tags (float32, what `binary_crossentropy` takes without a cast) and a regression head on a
numeric column, one epoch each from `PackedSequence`."""

from __future__ import annotations

from pathlib import Path

import keras
import numpy as np
import pytest

import packer
from packer.keras import PackedSequence
from tests.fixtures.column_lists import TAGS, H, W, rows, write_images, write_list

COUNT = 12


@pytest.fixture(scope="module")
def top(tmp_path_factory) -> Path:
    top = tmp_path_factory.mktemp("columns")
    write_images(top / "train", COUNT)
    return top


def _model(outputs: int | None, activation: str | None) -> keras.Model:
    """Pixels scaled, averaged per band, one dense head (`outputs` None: one number)."""
    inputs = keras.Input((H, W, 3))
    x = keras.layers.Rescaling(1 / 255)(inputs)
    x = keras.layers.GlobalAveragePooling2D()(x)
    x = keras.layers.Dense(outputs or 1, activation=activation)(x)
    if outputs is None:
        x = keras.layers.Reshape(())(x)
    return keras.Model(inputs, x)


def test_sigmoid_multi_label_head_trains(top, tmp_path):
    src = write_list(top / "tags.csv", rows(COUNT), ("id", "tags"))
    packer.pack(src, out=tmp_path / "out", root=top / "train", progress=False)
    seq = PackedSequence(tmp_path / "out", batch_size=4, shuffle=True, seed=0)
    _, targets = seq[0]
    assert targets.dtype == np.float32 and targets.shape == (4, len(TAGS))
    model = _model(len(TAGS), "sigmoid")
    model.compile(optimizer="adam", loss="binary_crossentropy")
    history = model.fit(seq, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


def test_regression_head_trains(top, tmp_path):
    src = write_list(top / "ages.jsonl", rows(COUNT), ("id", "age"))
    packer.pack(src, out=tmp_path / "out", root=top / "train", progress=False)
    seq = PackedSequence(tmp_path / "out", batch_size=4, shuffle=True, seed=0)
    _, targets = seq[0]
    assert targets.dtype == np.float32 and targets.shape == (4,)
    model = _model(None, None)
    model.compile(optimizer="adam", loss="mse")
    history = model.fit(seq, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
