"""Detection packs mixed: a mixture's batches carry each pack's boxes, labels and masks, its
classes reconciled by name through a read-time class map (a lookup on labels, never a re-pack),
in PackedSequence (padded) and packer.torch (one dict per image), augmented alike."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import packer
import packer.keras
import packer.torch
from tests.fixtures.detection import make_detection_coco

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
SIZE = (36, 28)


@pytest.fixture(scope="module")
def packs(tmp_path_factory) -> tuple[Path, Path, dict[str, str]]:
    """Pack a, and pack b of the same images with every category renamed ("b_" + name)."""
    root = tmp_path_factory.mktemp("mixdet")
    src = make_detection_coco(root / "a")
    other = make_detection_coco(root / "b")
    renamed = {}
    for path in (other / "annotations").glob("*.json"):
        data = json.loads(path.read_text())
        for category in data["categories"]:
            renamed[f"b_{category['name']}"] = category["name"]
            category["name"] = f"b_{category['name']}"
        path.write_text(json.dumps(data))
    options = dict(size=SIZE, task="instances", workers=1)
    a = packer.pack(src, out=root / "pa", **options).root
    b = packer.pack(other, out=root / "pb", format="tfrecord", **options).root
    return a, b, renamed


def by_image(path: Path) -> dict[bytes, dict]:
    part = packer.open(path)["train"]
    return {part[i][0].tobytes(): part[i][1] for i in range(part.count)}


def test_a_detection_mixture_reads_every_packs_objects_with_reconciled_labels(packs):
    a, b, renamed = packs
    expected = by_image(a)
    mix = packer.Mixture([packer.Stream(a), packer.Stream(b, repeat=2, class_map=renamed)])
    seq = packer.keras.PackedSequence(mix, "train", batch_size=4, seed=0)
    tds = packer.torch.PackedDataset(mix, "train", batch_size=4, seed=0)
    seen = 0
    for k in range(len(seq)):
        images, padded = seq[k]
        torch_images, targets = tds[k]
        np.testing.assert_array_equal(torch_images.numpy(), images)
        for j, image in enumerate(images):
            want = expected[image.tobytes()]
            n = len(want["labels"])
            assert padded["labels"][j, :n].tolist() == want["labels"].tolist()
            assert (padded["labels"][j, n:] == -1).all()
            np.testing.assert_allclose(padded["boxes"][j, :n], want["boxes"], atol=1e-4)
            assert targets[j]["labels"].tolist() == want["labels"].tolist()
            np.testing.assert_array_equal(targets[j]["masks"].numpy(), want["masks"])
            seen += 1
    assert seen == 3 * len(expected)  # a once, b twice


def test_a_detection_mixture_augments_its_objects_as_a_pack_does(packs):
    a, b, renamed = packs
    augment = packer.Augment(horizontal_flip=True, width_shift_range=0.3, seed=0)
    mix = packer.Mixture([packer.Stream(a), packer.Stream(b, class_map=renamed)])
    plain = packer.keras.PackedSequence(mix, "train", batch_size=4, seed=0)
    moved = packer.keras.PackedSequence(mix, "train", batch_size=4, seed=0, augment=augment)
    changed = 0
    for k in range(len(plain)):
        (_, before), (_, after) = plain[k], moved[k]
        assert after["boxes"].shape == before["boxes"].shape
        changed += int(not np.array_equal(before["boxes"], after["boxes"]))
    assert changed
