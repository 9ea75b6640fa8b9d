"""Statistics ask each field's kind: a record with fields of kinds packer does not know (a
fixed float plane, ragged points) is counted as its known fields say, the unknown ones count
nothing and raise nothing, and the manifest's stats are those of the preset without them."""

from __future__ import annotations

import numpy as np

from packer import fields, manifest
from packer.fields.presets import fields_for
from packer.packing.stats import ChunkStats, merge
from tests.fixtures.field_kinds import CLASSES, SIZE, custom_fields, custom_record


def _receipt(records: list[dict], fields_) -> dict:
    stats = ChunkStats()
    for record in records:
        stats.add(record, "test", fields_)
    return {"name": "train-0", "split": "train", "count": len(records), **merge([stats])}


def _manifest(fields_, receipt: dict) -> dict:
    return manifest.build(
        fmt="npy",
        task="custom",
        fields=fields_,
        table=CLASSES,
        receipts=[{**receipt, "files": [], "rejected": [], "unknown": []}],
        source={},
        options={},
        run={},
        rejected=[],
        fingerprint="",
        converter_revision=0,
    )


def _stats(fields_, receipt: dict) -> dict:
    return _manifest(fields_, receipt)["stats"]


def test_unknown_kinds_count_nothing_and_the_rest_counts_as_the_classification_preset():
    records = [custom_record(i) for i in range(5)]
    custom = _receipt(records, custom_fields())
    preset = fields_for("classification", SIZE, np.dtype(np.uint8))
    classification = _receipt([{k: r[k] for k in ("images", "labels")} for r in records], preset)
    assert custom == classification
    assert custom["class_counts"] == {"0": 3, "1": 2} and "objects" not in custom
    assert _stats(custom_fields(), custom) == _stats(preset, classification)
    stats = _stats(custom_fields(), custom)
    assert stats["class_images"] == {"cold": 3, "hot": 2} and stats["other_images"] == {}


def test_a_pack_with_ragged_fields_lists_its_dropped_objects_and_without_boxes_no_object_stats():
    receipt = _receipt([custom_record(0)], custom_fields())
    data = _manifest(custom_fields(), receipt)
    assert data["dropped_objects"] == [] and "objects" not in data["stats"]


def test_each_kind_says_what_one_value_adds():
    image = np.arange(2 * 3 * 3, dtype=np.uint16).reshape(2, 3, 3)
    key, moments = fields.get("image").count_channels(image)
    assert key == "channel_moments" and moments[:, 0].tolist() == [6, 6, 6]
    assert moments[:, 1].tolist() == image.reshape(-1, 3).sum(axis=0).tolist()
    mask = np.array([[0, 2], [2, 300]], np.uint16)
    assert fields.get("mask").count_classes(mask)[[0, 2, 300]].tolist() == [1, 2, 1]
    assert fields.get("class").count_classes(np.int32(3)).tolist() == [0, 0, 0, 1]
    assert fields.get("object_class").count_classes(np.array([1, 1], np.int32)).tolist() == [0, 2]
    boxes = np.array([[0, 0, 10, 10], [0, 0, 40, 40], [0, 0, 100, 100]], np.float32)
    assert fields.get("boxes").count_objects(boxes) == {
        "images_with_3": 1,
        "small": 1,
        "medium": 1,
        "large": 1,
    }
    for kind in (fields.get("test_heat"), fields.get("test_spots"), fields.get("flag")):
        value = np.ones((4, 2), np.float32)
        assert kind.count_channels(value) is None and kind.count_classes(value) is None
        assert kind.count_objects(value) is None and kind.stats_entries([], CLASSES) == {}


def test_a_detection_record_counts_its_objects_and_their_classes():
    rng = np.random.default_rng(1)
    record = {
        "images": rng.integers(0, 256, (24, 32, 3), np.uint8),
        "boxes": np.array([[1, 2, 9, 9], [0, 0, 32, 24]], np.float32),
        "labels": np.array([2, 1], np.int32),
        "iscrowd": np.zeros(2, np.uint8),
        "difficult": np.zeros(2, np.uint8),
    }
    given = ChunkStats()
    given.add(record, "test", fields_for("detection", SIZE, np.dtype(np.uint8)))
    assert merge([given])["class_counts"] == {"1": 1, "2": 1}
    assert merge([given])["objects"] == {"images_with_2": 1, "small": 2}


def test_tags_are_counted_per_image_unless_a_class_column_is_beside_them():
    from packer.schema import Field

    image = Field("images", (2, 2, 3), "|u1", kind="image")
    tags = Field("tags", (3,), "<f4", kind="multi_hot")
    label = Field("labels", (), "<i4", kind="class")
    pixels = np.zeros((2, 2, 3), np.uint8)
    records = [
        {"images": pixels, "tags": np.array(t, np.float32), "labels": np.int32(c)}
        for t, c in (([1, 0, 1], 0), ([1, 1, 0], 1), ([0, 0, 1], 1))
    ]
    only_tags = _receipt([{k: r[k] for k in ("images", "tags")} for r in records], (image, tags))
    assert only_tags["class_counts"] == {"0": 2, "1": 1, "2": 2}
    # the class column counts; the tags beside it (listed first) do not mix in
    both = _receipt(records, (image, tags, label))
    assert both["class_counts"] == {"0": 1, "1": 2}
