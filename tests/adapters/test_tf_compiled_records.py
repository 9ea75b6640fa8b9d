"""`packer.tf.dataset`'s compiled read of uncompressed tfrecord packs: the same batches as the
numpy_function read (the Loader's), shuffled, split among ranks and resumed, and every record
checked (framing and CRC32C) before its bytes are handed out: a damaged one is one line naming
the shard file and the record, at the batch that holds it. Segmentation packs (every field at
one place of every record) and classification packs (a class id's varint of 1-3 bytes, so
records of unequal length and the image's place varying with it)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import packer
import packer.tf
from packer.fields.class_id import ClassId
from packer.formats.tfrecord_wire import (
    _delimited,
    bytes_feature,
    decode_lists,
    encode_example,
    float_feature,
    frame,
    int64_feature,
    int64_values,
    scan,
)
from packer.reading.loader import Loader
from packer.schema import Field
from tests.adapters.test_tf_compiled import expected, same

SIZE = (32, 24)


# Class ids of 1, 2 and 3 varint bytes: records of unequal length in most shards, one shard
# (the packer's order) of equal ones, whose image sits at one place.
CLASS_IDS = [0, 5, 1, 3, 2, 127, 128, 300, 20000, 7, 1, 200, 16384, 9]


@pytest.fixture(scope="module", params=["seg", "cls"])
def pack(request, seg_src, tmp_path_factory) -> Path:
    """A segmentation tfrecord pack of 3 shards (5, 5 and 4 train records), or a
    classification one of 4 (4, 4, 4, 2) with the class ids above."""
    root = tmp_path_factory.mktemp("tf-compiled-records")
    if request.param == "seg":
        shard = 5 * SIZE[0] * SIZE[1] * 4
        packer.pack(seg_src, out=root / "seg", format="tfrecord", size=SIZE, shard_size=shard)
        return root / "seg"
    return classification(root / "cls", CLASS_IDS)


def classification(out: Path, ids: list[int]) -> Path:
    """A tfrecord pack of 24x32 random images, one a class id, shards of 4 records."""
    rng = np.random.default_rng(0)
    samples = [{"image": rng.integers(0, 255, (24, 32, 3), np.uint8), "label": i} for i in ids]
    shard = 5 * 24 * 32 * 3
    packer.pack(samples, out=out, format="tfrecord", fields={"image": "image"}, shard_size=shard)
    return out


def test_classification_records_differ_in_length(pack):
    lengths = [scan(path)[1] for path in sorted((pack / "train").glob("*.tfrecord"))]
    if pack.name == "cls":
        assert any(len(set(n.tolist())) > 1 for n in lengths)
        assert any(len(set(n.tolist())) == 1 for n in lengths)


@pytest.mark.parametrize("shuffle", [True, False])
def test_each_iteration_reads_the_next_epoch_as_the_loader(pack, shuffle):
    batches = packer.tf.dataset(pack, batch_size=4, shuffle=shuffle, seed=7)
    assert batches.packer_read == "compiled"
    options = {"shuffle": "global" if shuffle else False, "seed": 7, "uneven": "allow"}
    for epoch in range(3):
        same(batches, expected(pack, 4, epoch, **options))


@pytest.mark.parametrize("rank", [0, 1])
def test_ranks_read_their_share(pack, rank):
    batches = packer.tf.dataset(pack, batch_size=2, seed=3, rank=rank, world_size=2)
    assert batches.packer_read == "compiled"
    for epoch in range(2):
        same(batches, expected(pack, 2, epoch, seed=3, rank=rank, world_size=2))


def test_resumed_start_then_whole_epochs(pack):
    whole = len(Loader(pack, "train", 3, seed=5))
    batches = packer.tf.dataset(pack, batch_size=3, seed=5, start=whole + 2, normalize="unit")
    assert batches.packer_read == "compiled"
    wanted = expected(pack, 3, 1, seed=5, uneven="allow", normalize="unit")[2:]
    got = list(batches.as_numpy_iterator())
    assert len(got) == len(wanted)
    for (x, y), (ex, ey) in zip(got, wanted, strict=True):
        np.testing.assert_allclose(x, ex, rtol=1e-6)
        np.testing.assert_array_equal(y, ey)


def damaged(pack: Path, to: Path, record: int, where: str) -> Path:
    """A copy of `pack` whose first train shard has one byte changed in `record`'s data (its
    image bytes) or in its data CRC."""
    copy = Path(shutil.copytree(pack, to))
    path = sorted((copy / "train").glob("*.tfrecord"))[0]
    starts, lengths = scan(path)
    at = int(starts[record]) + (
        int(lengths[record]) if where == "crc" else int(lengths[record]) // 2
    )
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize("where", ["data", "crc"])
def test_a_damaged_record_is_one_line_at_its_batch(pack, tmp_path, where):
    path = damaged(pack, tmp_path / "damaged", 3, where)
    batches = packer.tf.dataset(tmp_path / "damaged", batch_size=2, shuffle=False)
    assert batches.packer_read == "compiled"
    iterator = iter(batches)
    next(iterator)  # records 0, 1 (record 3's batch is being read ahead)
    with pytest.raises(tf.errors.DataLossError) as caught:
        next(iterator)  # records 2, 3
    message = caught.value.message
    assert f"{path}: record 3 is corrupted (data CRC mismatch)" in message
    assert "\n" not in message.strip()
    with pytest.raises(tf.errors.DataLossError):  # checked again, never taken for sound
        list(batches)


def relabelled(pack: Path, to: Path, labels: dict[int, int | list], cut: int = -1) -> Path:
    """A copy of `pack` whose first train shard's records have the class ids `labels` gives
    (record index -> id, or the label's whole feature), each record written again (a varint of
    another length); record `cut`'s image a byte short."""
    copy = Path(shutil.copytree(pack, to))
    path = sorted((copy / "train").glob("*.tfrecord"))[0]
    data = path.read_bytes()
    out = []
    for i, (start, length) in enumerate(zip(*scan(path), strict=True)):
        lists = decode_lists(data, int(start), int(start + length))
        features = {}
        for key, (kind, begin, end, *_) in lists.items():
            if kind == 1:
                features[key] = bytes_feature(data[begin : end - (i == cut)])
            else:
                values = int64_values(data, begin, end)
                label = labels.get(i, values[0]) if "class" in key else None
                features[key] = (  # an id, or the feature itself (a list of its pieces)
                    int64_feature(values)
                    if label is None
                    else label
                    if isinstance(label, list)
                    else int64_feature([label])
                )
        out += frame(encode_example(features))
    path.write_bytes(b"".join(out))
    return copy


def test_negative_and_large_class_ids_as_the_loader(tmp_path):
    out = relabelled(classification(tmp_path / "cls", CLASS_IDS), tmp_path / "big",
                     {0: -1, 1: 2**31 - 1, 2: -(2**31)})  # fmt: skip
    batches = packer.tf.dataset(out, batch_size=3, shuffle=False)
    assert batches.packer_read == "compiled"
    wanted = expected(out, 3, 0, shuffle=False, uneven="allow")
    assert {-1, 2**31 - 1, -(2**31)} <= set(np.concatenate([y for _, y in wanted]).tolist())
    same(batches, wanted)


def test_a_class_id_beyond_its_dtype_is_one_line(tmp_path):
    """No quiet narrowing: 2**31 in an int32 class field is refused, never wrapped."""
    out = relabelled(classification(tmp_path / "cls", CLASS_IDS), tmp_path / "big", {1: 2**31})
    batches = packer.tf.dataset(out, batch_size=4, shuffle=False)
    assert batches.packer_read == "compiled"
    with pytest.raises(tf.errors.DataLossError) as caught:
        list(batches)
    message = caught.value.message.strip()
    assert ": record 1: image/class/label: value 2147483648 does not fit int32" in message
    assert "\n" not in message
    with pytest.raises(OSError, match="record 1: image/class/label 2147483648 does not fit"):
        Loader(out, "train", 4, shuffle=False).batch(0)  # the Python reader: refused too


OVER_64_BITS = bytes([0x85, *[0x80] * 8, 0x02])  # 2**64 + 5: a 65-bit varint


@pytest.mark.parametrize(
    "feature, why",
    [
        (float_feature(np.array([1.0], "<f4")), "not an int64 feature"),
        (_delimited(3, _delimited(1, [OVER_64_BITS])), "over 64 bits"),
        (int64_feature([7, 9]), "2 values, one expected"),
    ],
    ids=["float list", "over 64 bits", "two values"],
)
def test_a_label_that_is_not_one_int64_is_refused_by_both_reads(tmp_path, feature, why):
    """No quiet first value, wrap or kind change: both reads refuse record 1 in one line."""
    out = relabelled(classification(tmp_path / "cls", CLASS_IDS), tmp_path / "odd", {1: feature})
    batches = packer.tf.dataset(out, batch_size=4, shuffle=False)
    assert batches.packer_read == "compiled"
    with pytest.raises(tf.errors.DataLossError) as caught:
        list(batches)
    message = caught.value.message.strip()
    assert ": record 1: image/class/label" in message and why in message
    assert "\n" not in message
    with pytest.raises(OSError, match=f"record 1: .*{why}"):
        Loader(out, "train", 4, shuffle=False).batch(0)


def test_a_streamed_class_id_beyond_its_dtype_is_refused():
    """The gzip pack's streamed parse casts in the graph: checked, never wrapped."""
    field = Field("label", (), "int32", kind="class")
    parsed = {ClassId.tf_key: tf.constant([1, 2**31 - 1], tf.int64)}
    assert ClassId().tf_value(field, parsed, None).numpy().tolist() == [1, 2**31 - 1]
    parsed = {ClassId.tf_key: tf.constant([1, 2**31], tf.int64)}
    with pytest.raises(tf.errors.InvalidArgumentError, match="does not fit int32"):
        ClassId().tf_value(field, parsed, None)


def test_an_image_of_the_wrong_size_is_one_line(tmp_path):
    out = relabelled(classification(tmp_path / "cls", CLASS_IDS), tmp_path / "cut", {}, cut=2)
    batches = packer.tf.dataset(out, batch_size=4, shuffle=False)
    assert batches.packer_read == "compiled"
    with pytest.raises(tf.errors.DataLossError) as caught:
        list(batches)
    message = caught.value.message.strip()
    assert ": record 2: image/raw holds 2303 bytes, 2304 expected" in message
    assert "\n" not in message
