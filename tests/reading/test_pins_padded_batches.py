"""Padded detection batches (KerasHub's convention, -1 padding): each image keeps its first
`max_boxes` objects in order, and every object cut is counted, over several batches and in a
batch mixing packs; the first cutting batch warns once."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import packer
from packer.reading.loader import Loader
from packer.reading.objects import Padder
from packer.schema import Field
from tests.fixtures.detection import make_detection_coco

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")


# What a detection pack's padded readers pad: KerasHub's boxes and labels.
PADDED = (Field("boxes", (4,), "<f4", ragged=True), Field("labels", (), "<i4", ragged=True))


def ragged(counts: list[int], start: int = 0) -> dict[str, np.ndarray]:
    """Rows of a batch, sample after sample: row r's box is (r, r+1, r+2, r+3), its label r."""
    rows = np.arange(start, start + sum(counts))
    return {
        "boxes": (rows[:, None] + np.arange(4)).astype(np.float32),
        "labels": rows.astype(np.int32),
    }


def expected(counts: list[int], max_boxes: int, start: int = 0) -> tuple[np.ndarray, int]:
    """The padded labels and the count cut, written out sample by sample."""
    labels = np.full((len(counts), max_boxes), -1, np.int32)
    row, cut = start, 0
    for i, n in enumerate(counts):
        kept = min(n, max_boxes)
        labels[i, :kept] = np.arange(row, row + kept)
        cut += n - kept
        row += n
    return labels, cut


def test_each_image_keeps_its_first_max_boxes_objects_and_the_rest_are_counted():
    counts = [3, 0, 5, 2, 1]
    padder = Padder(2, PADDED)
    with pytest.warns(UserWarning, match=r"max_boxes=2 cut 4 objects from a batch"):
        out = padder(ragged(counts), np.array(counts))
    labels, cut = expected(counts, 2)
    np.testing.assert_array_equal(out["labels"], labels)
    assert out["labels"].dtype == np.int32 and out["boxes"].dtype == np.float32
    boxes = np.where(labels[..., None] >= 0, labels[..., None] + np.arange(4), -1)
    np.testing.assert_array_equal(out["boxes"], boxes)
    assert padder.cut == cut == 4


def test_cuts_add_up_over_several_batches_and_only_the_first_warns():
    padder = Padder(3, PADDED)
    batches = [[1, 2], [4, 3, 6], [0, 0], [3, 3], [5]]
    total, start = 0, 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for counts in batches:
            out = padder(ragged(counts, start), np.array(counts))
            labels, cut = expected(counts, 3, start)
            np.testing.assert_array_equal(out["labels"], labels)
            total += cut
            start += sum(counts)
            assert padder.cut == total
    assert total == 1 + 3 + 2
    assert [str(w.message)[:27] for w in caught] == ["max_boxes=3 cut 4 objects f"]


def test_a_batch_that_fits_exactly_cuts_nothing():
    padder = Padder(4, PADDED)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = padder(ragged([4, 4]), np.array([4, 4]))
    assert padder.cut == 0 and (out["labels"] >= 0).all()


def test_max_boxes_of_one_keeps_each_images_first_object():
    padder = Padder(1, PADDED)
    with pytest.warns(UserWarning, match="max_boxes=1 cut 1 objects"):
        out = padder(ragged([2, 1]), np.array([2, 1]))
    assert out["labels"].tolist() == [[0], [2]] and padder.cut == 1


@pytest.mark.parametrize("value", [0, -1, True, 2.0, "3"])
def test_max_boxes_must_be_a_positive_integer(value):
    with pytest.raises(ValueError, match="max_boxes must be a positive integer"):
        Padder(value, PADDED)


def test_a_mixed_batch_counts_the_cut_of_every_pack(tmp_path):
    """Two detection packs mixed: the loader's count is the sum over its batches' rows of the
    objects beyond max_boxes, each pack's rows counted."""
    a = packer.pack(make_detection_coco(tmp_path / "a"), out=tmp_path / "pa", size=(24, 20),
                    task="detection", workers=1).root  # fmt: skip
    b = packer.pack(make_detection_coco(tmp_path / "b"), out=tmp_path / "pb", size=(24, 20),
                    task="detection", format="recordio", workers=1).root  # fmt: skip
    mix = packer.Mixture([packer.Stream(a), packer.Stream(b)])
    loader = Loader(mix, "train", 4, seed=0, max_boxes=2)
    want, packs_seen = 0, set()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        for index in range(len(loader)):
            _, _, counts = loader.objects_batch(index)
            _, padded = loader.padded_batch(index)
            want += int(np.maximum(counts - 2, 0).sum())
            assert loader.padder.cut == want
            ids = np.sort(loader.indices(index))
            packs_seen |= set(loader.split.locate(ids)[0].tolist())
            assert (padded["labels"] >= 0).sum() == np.minimum(counts, 2).sum()
    assert packs_seen == {0, 1} and want > 0
    # one warning, pointing at the code that asked for the batch
    (warning,) = [w for w in caught if "max_boxes=2 cut" in str(w.message)]
    assert warning.filename == __file__
