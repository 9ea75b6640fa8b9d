"""Object fields through one TFRecord Example and one RecordIO detection label, field by field:
crowd and difficult flags stay apart, labels keep the Object Detection API's +1 offset and
MXNet's [A, B, objects...] header, and a sample of more than 8 objects (bit-packed planes of
more than one byte, objects after the eighth) comes back plane for plane."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from packer.errors import RecordIOError
from packer.fields.presets import fields_for
from packer.formats import recordio_objects, tfrecord_objects, tfrecord_wire

SIZE = (7, 5)  # (W, H): 35 pixels a plane, 5 bytes bit-packed
NAMES = ["cat", "dog", "eel"]


def sample(count: int) -> dict[str, np.ndarray]:
    """`count` objects whose every field differs from object to object: plane k has pixel k
    (and only it) set, so a plane read in another object's place, or a byte of a plane lost,
    shows."""
    rng = np.random.default_rng(count)
    w, h = SIZE
    x1 = rng.integers(0, w - 1, count).astype(np.float32)
    y1 = rng.integers(0, h - 1, count).astype(np.float32)
    boxes = np.stack([x1, y1, x1 + 1, y1 + 1], axis=1)
    masks = np.zeros((count, h, w), np.uint8)
    masks.reshape(count, w * h)[np.arange(count), np.arange(count) % (w * h)] = 1
    return {
        "boxes": boxes,
        "labels": (np.arange(count) % len(NAMES)).astype(np.int32),
        "iscrowd": (np.arange(count) % 2 == 0).astype(np.uint8),  # crowd: even objects
        "difficult": (np.arange(count) % 3 == 1).astype(np.uint8),  # difficult: another set
        "masks": masks,
    }


def tfrecord_round_trip(record: dict[str, np.ndarray]) -> tuple[dict, dict]:
    """(the decoded fields, the Example's raw lists) of one Example holding `record`."""
    fields = fields_for("instances", SIZE, np.uint8)[1:]
    features: dict = {}
    for field in fields:
        features |= tfrecord_objects.encode(field, record[field.name], SIZE, NAMES)
    data = b"".join(bytes(p) for p in tfrecord_wire.encode_example(features))
    lists = tfrecord_wire.decode_lists(data, 0, len(data))
    decoded = {f.name: tfrecord_objects.decode(f, lists, data, SIZE) for f in fields}
    return decoded, {"data": data, "lists": lists}


@pytest.mark.parametrize("count", [1, 9, 17])
def test_tfrecord_object_fields_come_back_field_by_field(count):
    record = sample(count)
    decoded, raw = tfrecord_round_trip(record)
    for name in ("labels", "iscrowd", "difficult", "masks"):
        np.testing.assert_array_equal(decoded[name], record[name], err_msg=name)
    np.testing.assert_allclose(decoded["boxes"], record["boxes"], rtol=1e-6)
    # the Object Detection API's keys: labels 1-based, flags under their own keys
    data, lists = raw["data"], raw["lists"]
    labels = tfrecord_objects._ints(data, lists[tfrecord_objects.LABEL])
    np.testing.assert_array_equal(labels, record["labels"] + 1)
    crowd = tfrecord_objects._ints(data, lists["image/object/is_crowd"])
    difficult = tfrecord_objects._ints(data, lists["image/object/difficult"])
    np.testing.assert_array_equal(crowd, record["iscrowd"])
    np.testing.assert_array_equal(difficult, record["difficult"])
    _, _, _, start, stop = lists[tfrecord_objects.TEXT]
    texts = tfrecord_wire.bytes_values(data, start, stop)
    assert texts == [NAMES[i].encode() for i in record["labels"]]
    # the API's PNG_MASKS: one lossless PNG an object, the same planes
    _, _, _, start, stop = lists[tfrecord_objects.MASK_PNG]
    pngs = tfrecord_wire.bytes_values(data, start, stop)
    planes = [cv2.imdecode(np.frombuffer(p, np.uint8), cv2.IMREAD_UNCHANGED) for p in pngs]
    np.testing.assert_array_equal(np.array(planes).reshape(record["masks"].shape), record["masks"])


def test_tfrecord_boxes_are_stored_normalised_by_width_and_height():
    record = sample(3)
    _, raw = tfrecord_round_trip(record)
    w, h = SIZE
    data, lists = raw["data"], raw["lists"]
    for k, key in enumerate(tfrecord_objects.BOX_KEYS):
        _, _, _, start, stop = lists[key]
        stored = tfrecord_objects._packed(data, start, stop, "<f4")
        expected = record["boxes"][:, k] / (w if k % 2 == 0 else h)
        np.testing.assert_allclose(stored, expected.astype(np.float32), rtol=1e-6)


def test_a_tfrecord_sample_without_objects():
    decoded, _ = tfrecord_round_trip(sample(0))
    assert decoded["boxes"].shape == (0, 4) and decoded["labels"].shape == (0,)
    assert decoded["masks"].shape == (0, SIZE[1], SIZE[0])


@pytest.mark.parametrize("count", [1, 9, 17])
def test_recordio_label_keeps_crowd_and_difficult_apart(count):
    record = sample(count)
    fields = fields_for("instances", SIZE, np.uint8)[1:]
    values = recordio_objects.label(record, SIZE)
    # MXNet's detection label: [A=2, B=7, then 7 values an object]
    assert values[:2].tolist() == [2.0, 7.0] and values.size == 2 + 7 * count
    table = values[2:].reshape(count, 7)
    np.testing.assert_array_equal(table[:, 0], record["labels"])
    np.testing.assert_array_equal(table[:, 5], record["iscrowd"])
    np.testing.assert_array_equal(table[:, 6], record["difficult"])
    w, h = SIZE
    np.testing.assert_allclose(table[:, 1:5], record["boxes"] / [w, h, w, h], rtol=1e-6)
    masks = next(f for f in fields if f.name == "masks")
    payload = b"IMAGE" + recordio_objects.mask_trailer(masks, record["masks"])
    image, rows = recordio_objects.split_trailer(payload)
    assert bytes(image) == b"IMAGE" and rows.shape == (count, masks.nbytes)
    got = recordio_objects.objects(fields, values, rows, SIZE)
    for name in ("labels", "iscrowd", "difficult", "masks"):
        np.testing.assert_array_equal(got[name], record[name], err_msg=name)
        assert got[name].dtype == np.dtype(next(f.dtype for f in fields if f.name == name))
    np.testing.assert_allclose(got["boxes"], record["boxes"], rtol=1e-6)


def test_recordio_label_of_mxnet_width_five_has_no_flags():
    """im2rec's own labels have 5 values an object (class, corners): no crowd, no difficult."""
    fields = fields_for("detection", SIZE, np.uint8)[1:]
    values = [2, 5, 1, 0.0, 0.2, 0.5, 0.6, 2, 0.1, 0.0, 1.0, 1.0]  # as a list of numbers too
    got = recordio_objects.objects(fields, values, None, SIZE)
    np.testing.assert_array_equal(got["labels"], [1, 2])
    np.testing.assert_array_equal(got["iscrowd"], [0, 0])
    np.testing.assert_array_equal(got["difficult"], [0, 0])
    np.testing.assert_allclose(got["boxes"], [[0, 1, 3.5, 3], [0.7, 0, 7, 5]], rtol=1e-6)


def test_recordio_label_with_a_wider_header_and_six_values_an_object():
    """A header of A=3 values (one extra) and B=6: crowd read, difficult absent."""
    fields = fields_for("detection", SIZE, np.uint8)[1:]
    values = np.array([3, 6, 99, 1, 0, 0, 1, 1, 1], np.float32)
    got = recordio_objects.objects(fields, values, None, SIZE)
    np.testing.assert_array_equal(got["labels"], [1])
    np.testing.assert_array_equal(got["iscrowd"], [1])
    np.testing.assert_array_equal(got["difficult"], [0])


def test_a_recordio_label_of_an_image_without_objects_is_the_header_alone():
    fields = fields_for("instances", SIZE, np.uint8)[1:]
    values = recordio_objects.label(sample(0), SIZE)
    assert values.tolist() == [2.0, 7.0]
    got = recordio_objects.objects(fields, values, np.zeros((0, 5), np.uint8), SIZE)
    assert got["boxes"].shape == (0, 4) and got["labels"].shape == (0,)
    assert got["masks"].shape == (0, SIZE[1], SIZE[0])


@pytest.mark.parametrize(
    "values", [[2.0], [2, 4, 1, 0, 0, 1], [2, 7, 1, 0, 0, 1, 1, 0]], ids=["short", "B<5", "ragged"]
)
def test_recordio_labels_that_are_no_detection_label_are_refused(values):
    fields = fields_for("detection", SIZE, np.uint8)[1:]
    with pytest.raises(RecordIOError):
        recordio_objects.objects(fields, np.array(values, np.float32), None, SIZE)


def test_recordio_mask_trailer_is_checked():
    fields = fields_for("instances", SIZE, np.uint8)[1:]
    masks = next(f for f in fields if f.name == "masks")
    record = sample(2)
    trailer = recordio_objects.mask_trailer(masks, record["masks"])
    assert recordio_objects.split_trailer(b"no trailer here") == (b"no trailer here", None)
    with pytest.raises(RecordIOError, match="promises 2 x 5 bytes"):
        recordio_objects.split_trailer(trailer[masks.nbytes + 1 :])  # rows cut short
    # exactly the rows and nothing before them is still whole
    image, rows = recordio_objects.split_trailer(trailer)
    assert bytes(image) == b"" and rows.shape == (2, masks.nbytes)
    # an image of no objects: the trailer alone (12 bytes) is still a trailer
    empty = recordio_objects.mask_trailer(masks, record["masks"][:0])
    image, rows0 = recordio_objects.split_trailer(empty)
    assert len(empty) == 12 and bytes(image) == b"" and rows0.shape == (0, masks.nbytes)
    values = recordio_objects.label(record, SIZE)
    with pytest.raises(RecordIOError, match="no mask for each"):
        recordio_objects.objects(fields, values, rows[:1], SIZE)
