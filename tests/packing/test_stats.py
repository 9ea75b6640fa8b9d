"""The stored statistics, recounted from the packed arrays themselves rather than from the
manifest's own counts: per-channel mean/std, class pixel (or image) counts, the pixels outside
the class table, and the class weights a loss gets from them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import packer
from packer.synthetic import make_classification, make_segmentation

# Under 64 rows every row of an image enters the channel statistics, so they must equal a
# count over every packed pixel.
SIZE = (40, 30)


def _every_sample(split) -> dict[str, np.ndarray]:
    return {k: v.copy() for k, v in split.reader.read(np.arange(split.count)).items()}


def _channel_stats(images: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    pixels = images.reshape(-1, 3).astype(np.float64)
    return pixels.mean(axis=0), pixels.std(axis=0)


def _expected_weights(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """docs/readers.md's two formulas, from counts made here."""
    present = counts > 0
    inverse = np.zeros(len(counts))
    inverse[present] = counts.sum() / (present.sum() * counts[present])
    frequency = counts / counts.sum()
    median = np.zeros(len(counts))
    median[present] = np.median(frequency[present]) / frequency[present]
    return inverse, median


@pytest.fixture(scope="module")
def seg_pack(tmp_path_factory) -> Path:
    """A segmentation pack whose masks hold a colour outside the class table."""
    root = tmp_path_factory.mktemp("stats")
    src = make_segmentation(root / "src", {"train": 9, "val": 4}, SIZE, seed=3)
    for path in sorted((src / "train_labels").iterdir())[:3]:
        rgb = np.asarray(Image.open(path).convert("RGB")).copy()
        rgb[:5, :7] = (1, 2, 3)  # unknown: becomes the ignore index
        Image.fromarray(rgb).save(path)
    packer.pack(src, out=root / "out", size=SIZE, workers=1)
    return root / "out"


def test_channel_stats_and_class_pixels_are_those_of_the_packed_arrays(seg_pack):
    ds = packer.open(seg_pack)
    stats = ds.manifest["stats"]
    ignore = ds.manifest["ignore_index"]
    for name in ds.splits:
        arrays = _every_sample(ds[name])
        stored = stats["splits"][name]
        mean, std = _channel_stats(arrays["images"])
        np.testing.assert_allclose(stored["mean"], mean, atol=1e-3)
        np.testing.assert_allclose(stored["std"], std, atol=1e-3)
        masks = arrays["masks"]
        counted = {c: int((masks == i).sum()) for i, c in enumerate(ds.class_names)}
        assert stored["class_pixels"] == counted
        outside = int((masks == ignore).sum())
        assert stored["other_pixels"] == ({str(ignore): outside} if outside else {})
        assert sum(counted.values()) + outside == masks.size
    assert stats["splits"]["train"]["other_pixels"] == {str(ignore): 3 * 5 * 7}
    assert {k: stats[k] for k in ("mean", "std", "class_pixels")} == {
        k: stats["splits"]["train"][k] for k in ("mean", "std", "class_pixels")
    }


def test_class_weights_are_those_of_the_recounted_pixels(seg_pack):
    ds = packer.open(seg_pack)
    for split in (None, "val"):
        masks = _every_sample(ds[split or "train"])["masks"]
        counts = np.array([(masks == i).sum() for i in range(len(ds.classes))], np.float64)
        inverse, median = _expected_weights(counts)
        np.testing.assert_allclose(list(ds.class_weights(split=split).values()), inverse)
        got = ds.class_weights("median_frequency", split=split)
        np.testing.assert_allclose(list(got.values()), median)


def test_classification_stats_and_weights_are_those_of_the_packed_arrays(tmp_path):
    src = make_classification(tmp_path / "src", {"ants": 7, "bees": 3, "cats": 5}, SIZE)
    ds = packer.pack(src, out=tmp_path / "out", size=SIZE, workers=1)
    arrays = _every_sample(ds["train"])
    stats = ds.manifest["stats"]
    mean, std = _channel_stats(arrays["images"])
    np.testing.assert_allclose(stats["mean"], mean, atol=1e-3)
    np.testing.assert_allclose(stats["std"], std, atol=1e-3)
    counts = np.bincount(arrays["labels"].astype(np.int64), minlength=3)
    assert stats["class_images"] == dict(zip(ds.class_names, counts.tolist(), strict=True))
    inverse, _ = _expected_weights(counts.astype(np.float64))
    np.testing.assert_allclose(list(ds.class_weights().values()), inverse)


def test_a_chunk_of_rejected_records_leaves_one_band_statistics_whole():
    """A 1-band 8-bit pack (--channels 1) whose chunk had every record rejected: that chunk
    counted nothing and must not reshape or blank the shard's histogram."""
    from packer.fields.presets import fields_for
    from packer.packing.stats import ChunkStats, merge

    grey = np.arange(64, dtype=np.uint8).reshape(8, 8, 1)
    counted = ChunkStats()
    fields = fields_for("classification", (8, 8), np.dtype(np.uint8), ("uint8", 1))
    counted.add({"images": grey, "labels": np.int32(0)}, "test", fields)
    merged = merge([ChunkStats(), counted])
    hist = np.asarray(merged["channel_hist"])
    assert hist.shape == (1, 256) and hist.sum() > 0
    np.testing.assert_array_equal(hist, counted.channel_hist)
