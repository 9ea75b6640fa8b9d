"""The padded readers' targets (KerasHub's): each padded ragged field becomes `[B, max_boxes,
*row]` of its own dtype, whatever its name, padded with -1, cuts counted; the fields not
padded (per-object masks) are never read for them."""

from __future__ import annotations

import numpy as np
import pytest

import packer
from packer.reading.loader import Loader
from packer.reading.objects import Padder
from packer.schema import Field
from tests.fixtures.detection import make_detection_coco

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")


def test_any_ragged_field_is_padded_by_its_own_shape_and_dtype():
    fields = (Field("points", (2, 2), "<f4", ragged=True), Field("ids", (), "<i2", ragged=True))
    counts = np.array([2, 0, 3])
    rows = {
        "points": np.arange(5 * 4, dtype=np.float32).reshape(5, 2, 2),
        "ids": np.array([7, 8, 9, 10, 11], np.int16),
    }
    padder = Padder(2, fields)
    with pytest.warns(UserWarning, match="max_boxes=2 cut 1 objects"):
        padded = padder(rows, counts)
    assert list(padded) == ["points", "ids"] and padder.cut == 1
    assert padded["points"].shape == (3, 2, 2, 2) and padded["points"].dtype == np.float32
    assert padded["ids"].tolist() == [[7, 8], [-1, -1], [9, 10]]
    np.testing.assert_array_equal(padded["points"][2], rows["points"][2:4])
    assert (padded["points"][1] == -1).all()
    assert [f.shape for f in padder.padded_fields()] == [(2, 2, 2), (2,)]


def test_padded_batches_read_no_masks(tmp_path, monkeypatch):
    src = make_detection_coco(tmp_path / "coco")
    pack = packer.pack(src, out=tmp_path / "p", size=(36, 28), task="instances", workers=1)
    loader = Loader(pack.root, "train", batch_size=3, seed=0)
    asked = []
    reader = loader.split.reader
    original = reader.ragged
    monkeypatch.setattr(
        reader, "ragged", lambda i, names=None: asked.append(names) or original(i, names)
    )
    _, targets = loader.padded_batch(0)
    assert set(targets) == {"boxes", "labels"} and asked == [("boxes", "labels")]
    _, fields, counts = loader.objects_batch(0)
    assert "masks" in fields  # the per-image readers still read every field
    np.testing.assert_array_equal(targets["labels"], loader.padder(fields, counts)["labels"])
