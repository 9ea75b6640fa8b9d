"""Packs from Python samples (issue 38, part 2) with field kinds defined only in tests: a list of
dicts of image paths (8-bit RGB and 16-bit grey PNGs), class names, a float32 plane moved as
pixels and per-object (x, y) rows moved as points; read back exact at identity geometry, as
OpenCV resizes and as exact scaling elsewhere, byte-identical across worker counts."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

import packer
from packer.errors import PackError
from packer.packing import session
from packer.reading.batches import BatchReader
from tests.fixtures.field_kinds import HEAT, SPOTS  # the kinds test_heat and test_spots
from tests.fixtures.packs import manifest_hashes

FIELDS = {"heat": HEAT.name, "spots": SPOTS.name}
NAMES = ["dog", "cat", "owl"]
W, H = 40, 30


def make_samples(folder, count=7):
    """`count` dicts: an RGB and a 16-bit grey PNG (W x H), a class name, a heat plane and
    1-3 spots, all the test's own values."""
    rng = np.random.default_rng(0)
    folder.mkdir(parents=True, exist_ok=True)
    samples = []
    for i in range(count):
        rgb = rng.integers(0, 256, (H, W, 3), np.uint8)
        depth = rng.integers(500, 4120, (H, W), np.uint16)
        cv2.imwrite(str(folder / f"rgb_{i}.png"), rgb[..., ::-1])
        cv2.imwrite(str(folder / f"depth_{i}.png"), depth)
        spots = (rng.random((1 + i % 3, 2)) * [W, H]).astype(np.float32)
        samples.append(
            {
                "images": str(folder / f"rgb_{i}.png"),
                "labels": NAMES[i % 3],
                "depth": str(folder / f"depth_{i}.png"),
                "heat": rng.random((H, W), np.float32),
                "spots": spots,
            }
        )
    return samples


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    return make_samples(tmp_path_factory.mktemp("src"))


def read_all(out):
    """Every sample's fixed fields and ragged rows, by provenance (the image's path)."""
    split = packer.open(out)["train"]
    reader = BatchReader(split)
    indices = np.arange(split.count)
    batch = {k: v.copy() for k, v in reader.read(indices).items()}
    objects = reader.objects(indices)
    return {
        split.source(i): ({k: v[i] for k, v in batch.items()}, objects[i]) for i in indices.tolist()
    }


def test_values_exact_at_identity_geometry(samples, tmp_path):
    ds = packer.pack(samples, out=tmp_path / "p", fields=FIELDS, progress=False)
    assert ds.manifest["task"] == "custom"
    kinds = {f["name"]: (f["kind"], f["dtype"]) for f in ds.manifest["fields"]}
    assert kinds == {
        "images": ("image", "|u1"),
        "labels": ("class", "<i4"),
        "depth": ("image", "<u2"),
        "heat": ("test_heat", "<f4"),
        "spots": ("test_spots", "<f4"),
    }
    assert [c["name"] for c in ds.classes] == sorted(NAMES)
    found = read_all(tmp_path / "p")
    assert len(found) == len(samples)
    for sample in samples:
        fixed, objects = found[sample["images"]]
        rgb = cv2.imread(sample["images"])[..., ::-1]
        np.testing.assert_array_equal(fixed["images"], rgb)
        depth = cv2.imread(sample["depth"], cv2.IMREAD_UNCHANGED)
        np.testing.assert_array_equal(fixed["depth"][..., 0], depth)
        assert fixed["labels"] == sorted(NAMES).index(sample["labels"])
        np.testing.assert_array_equal(fixed["heat"], sample["heat"])
        np.testing.assert_array_equal(objects["spots"], sample["spots"])


@pytest.mark.parametrize("size, mode", [((25, 20), "stretch"), ((30, 30), "fill")])
def test_pixels_as_opencv_resizes_and_points_scaled_exactly(samples, tmp_path, size, mode):
    out = tmp_path / "p"
    packer.pack(samples, out=out, fields=FIELDS, size=size, resize=mode, progress=False)
    found = read_all(out)
    for sample in samples:
        fixed, objects = found[sample["images"]]
        if mode == "stretch":
            heat = cv2.resize(sample["heat"], size, interpolation=cv2.INTER_LINEAR)
            scale, shift = np.array([size[0] / W, size[1] / H]), np.zeros(2)
        else:  # the centred 30x30 crop, no resize
            heat = sample["heat"][:, 5:35]
            scale, shift = np.ones(2), np.array([5.0, 0.0])
        np.testing.assert_array_equal(fixed["heat"], heat)
        spots = ((sample["spots"].astype(np.float64) - shift) * scale).astype(np.float32)
        np.testing.assert_array_equal(objects["spots"], spots)
        assert fixed["depth"].shape == (size[1], size[0], 1)


def test_byte_identical_across_worker_counts(samples, tmp_path):
    options = dict(fields=FIELDS, size=(20, 15), shard_size=3 * 20 * 15 * 12, progress=False)
    packer.pack(samples, out=tmp_path / "w1", workers=1, **options)
    packer.pack(samples, out=tmp_path / "w2", workers=2, **options)
    one, two = manifest_hashes(tmp_path / "w1"), manifest_hashes(tmp_path / "w2")
    assert len(one) > 5 and one == two


def test_dry_run_shows_the_inferred_fields_and_why(samples):
    text = packer.pack(samples, out="unused", dry_run=True)
    assert "images: image [30, 40, 3] uint8 (an image file: the input image)" in text
    assert "labels: class [] int32 (a string: a class name)" in text
    assert "depth: image [30, 40, 1] uint16 (an image file: an extra image field)" in text
    assert "heat: pixels [30, 40] float32 (a float array [30, 40]: pixels" in text
    assert "classes: 3: cat, dog, owl" in text
    given = packer.pack(samples, out="unused", fields=FIELDS, dry_run=True)
    assert "heat: test_heat [30, 40] float32 (given in fields=)" in given


def test_the_classification_preset_is_named_only_for_its_fields(samples, tmp_path):
    pairs = [{"images": s["images"], "labels": s["labels"]} for s in samples]
    ds = packer.pack(pairs, out=tmp_path / "c", progress=False)
    assert ds.manifest["task"] == "classification"
    renamed = [{"image": s["images"], "label": s["labels"]} for s in samples]
    assert packer.pack(renamed, out=tmp_path / "r", progress=False).manifest["task"] == "custom"


def test_a_generator_is_read_once_in_order_and_said_so(samples, tmp_path):
    text = packer.pack((s for s in samples), out=tmp_path / "g", fields=FIELDS, dry_run=True)
    assert "read once, in order" in text
    ds = packer.pack((s for s in samples), out=tmp_path / "g", fields=FIELDS, progress=False)
    assert ds["train"].count == len(samples)


def test_bad_values_are_rejected_naming_the_sample(samples, tmp_path):
    bad = [dict(s) for s in samples]
    bad[1]["spots"] = np.zeros((0, 2), np.float32)  # 0 objects: fine
    for s in bad:
        s["score"] = np.uint8(7)
        s["boxes"] = np.zeros((len(s["spots"]), 4), np.float32)
    bad[3]["score"] = np.int64(300)  # does not fit the first sample's uint8
    bad[4]["boxes"] = np.zeros((5, 4), np.float32)  # 5 boxes, fewer spots
    ds = packer.pack(
        bad,
        out=tmp_path / "b",
        fields={**FIELDS, "boxes": "boxes", "score": "array"},
        progress=False,
    )
    reasons = {r["path"]: r["reason"] for r in ds.manifest["rejected"]}  # relative to the root
    assert reasons == {
        "rgb_3.png": "score: values 300..300 do not fit uint8",
        "rgb_4.png": "ragged fields differ in rows: spots has 2, boxes has 5",
    }
    assert ds["train"].count == len(samples) - 2


def test_one_line_errors(samples, tmp_path):
    with pytest.raises(PackError, match="0 samples"):
        packer.pack([], out=tmp_path / "e")
    with pytest.raises(PackError, match=r"fields\['heat'\]: unknown field kind 'no_such'"):
        packer.pack(samples, out=tmp_path / "e", fields={"heat": "no_such"})
    with pytest.raises(PackError, match="fields='nope': the first sample has no such key"):
        packer.pack(samples, out=tmp_path / "e", fields={"nope": "class"})


class Stop(Exception):
    """Raised inside a worker to interrupt a pack after its first shard."""


class StopAfterFirstShard(session.Converter):
    def finalize_shard(self, task, results):
        if any(self.out.glob("*/*.receipt.json")):
            raise Stop("interrupted")
        return super().finalize_shard(task, results)


def test_an_interrupted_pack_of_the_same_samples_finishes(samples, tmp_path, monkeypatch):
    options = dict(fields=FIELDS, shard_size=2 * W * H * 12, progress=False, workers=1)
    monkeypatch.setattr(session, "Converter", StopAfterFirstShard)
    with pytest.raises(Stop):
        packer.pack(samples, out=tmp_path / "i", **options)
    monkeypatch.undo()
    ds = packer.pack(samples, out=tmp_path / "i", **options)
    assert ds.manifest["run"]["resumed_shards"] == 1
    assert ds["train"].count == len(samples)
    again = packer.pack(samples, out=tmp_path / "i", **options)
    assert again.manifest == ds.manifest  # up to date: nothing packed again


def test_objects_whose_box_leaves_the_frame_leave_every_ragged_field(samples, tmp_path):
    objects = [dict(s) for s in samples[:3]]
    for s in objects:  # one box inside the centred 30x30 crop, one left of it (x < 5)
        s["spots"] = np.float32([[20, 10], [2, 3]])
        s["boxes"] = np.float32([[10, 5, 30, 25], [0, 0, 4, 4]])
        s["classes"] = np.int32([1, 2])
    fields = {**FIELDS, "boxes": "boxes", "classes": "object_class"}
    ds = packer.pack(objects, out=tmp_path / "o", fields=fields, size=30, progress=False)
    found = read_all(tmp_path / "o")
    for s in objects:
        rows = found[s["images"]][1]
        np.testing.assert_array_equal(rows["boxes"], np.float32([[5, 5, 25, 25]]))
        np.testing.assert_array_equal(rows["spots"], np.float32([[15, 10]]))
        np.testing.assert_array_equal(rows["classes"], np.int32([1]))
    dropped = sorted((d["path"], d["object"], d["reason"]) for d in ds.manifest["dropped_objects"])
    assert dropped == [(f"rgb_{i}.png", 1, "outside the frame") for i in range(3)]
    assert ds["train"].count == 3


@pytest.mark.parametrize("shape", [(H, W, 3), (H, W)])
def test_images_given_as_arrays_keep_their_bands(tmp_path, shape):
    rng = np.random.default_rng(2)
    pixels = [rng.integers(0, 256, shape, np.uint8) for _ in range(3)]
    samples = [{"images": p, "labels": i % 2} for i, p in enumerate(pixels)]
    ds = packer.pack(samples, out=tmp_path / "a", fields={"images": "image"}, progress=False)
    assert ds.manifest["task"] == "classification"
    # provenance "sample <index>" (the split's source() joins it to the root: the last part)
    found = {Path(k).name: v for k, v in read_all(tmp_path / "a").items()}
    for i, p in enumerate(pixels):
        fixed, _ = found[f"<sample {i}>"]
        np.testing.assert_array_equal(fixed["images"].reshape(shape), p)
        assert fixed["labels"] == i % 2


def test_changed_values_and_files_are_packed_again_and_said(tmp_path):
    samples = make_samples(tmp_path / "src", 4)
    out = tmp_path / "u"
    packer.pack(samples, out=out, fields=FIELDS, progress=False)
    samples[1]["heat"] = np.zeros((H, W), np.float32)
    ds = packer.pack(samples, out=out, fields=FIELDS, progress=False)
    assert ds.manifest["run"]["update"]["text"] == "1 samples' values changed (rgb_1.png)"
    cv2.imwrite(samples[2]["images"], np.zeros((H, W, 3), np.uint8))
    ds = packer.pack(samples, out=out, fields=FIELDS, progress=False)
    assert ds.manifest["run"]["update"]["text"] == "1 changed (rgb_2.png)"
    found = read_all(out)
    assert not found[samples[1]["images"]][0]["heat"].any()
    assert not found[samples[2]["images"]][0]["images"].any()
