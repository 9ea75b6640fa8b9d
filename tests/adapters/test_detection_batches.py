"""Detection packs through every reader: packer.torch yields lists of per-image dicts of tensors
(torchvision's convention) that a real torch model trains on; PackedSequence and
packer.tf.dataset yield boxes/labels padded to max_boxes with -1 (KerasHub's), cuts counted;
rank sharding and exact resume as for any pack; augmentation moves the objects in each."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

import packer
import packer.keras
import packer.tf
import packer.torch
from packer.augment import numpy_exec
from tests.fixtures.detection import make_detection_coco

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
SIZE = (36, 28)


@pytest.fixture(scope="module")
def pack(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("readers")
    src = make_detection_coco(root / "coco")
    return packer.pack(src, out=root / "p", format="tfrecord", size=SIZE, task="instances").root


def by_image(path: Path) -> dict[bytes, dict]:
    """Every train sample's target, by its image's bytes (the fixture's images all differ)."""
    part = packer.open(path)["train"]
    return {part[i][0].tobytes(): part[i][1] for i in range(part.count)}


def test_torch_batches_are_lists_of_dicts_of_tensors(pack):
    expected = by_image(pack)
    ds = packer.torch.PackedDataset(pack, "train", batch_size=4, seed=1)
    seen = 0
    for images, targets in DataLoader(ds, batch_size=None, num_workers=1):
        assert images.dtype == torch.uint8 and images.shape[1:] == (28, 36, 3)
        assert isinstance(targets, list) and len(targets) == len(images)
        for image, target in zip(images, targets, strict=True):
            want = expected[image.numpy().tobytes()]
            assert target["boxes"].dtype == torch.float32 and target["labels"].dtype == torch.int64
            assert target["masks"].dtype == torch.uint8
            assert target["masks"].shape == (len(want["labels"]), 28, 36)
            np.testing.assert_array_equal(target["boxes"].numpy(), want["boxes"])
            np.testing.assert_array_equal(target["labels"].numpy(), want["labels"])
            seen += 1
    assert seen == len(expected)


class TinyDetector(torch.nn.Module):
    """A few convolutions predicting, per image, a box per class and whether the class is
    present: enough for a real loss on real targets and a real optimiser step."""

    def __init__(self, classes: int) -> None:
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1)
        )
        self.head = torch.nn.Linear(8, classes * 5)
        self.classes = classes

    def forward(self, images: torch.Tensor, targets: list[dict]) -> torch.Tensor:
        out = self.head(self.features(images).flatten(1)).view(len(images), self.classes, 5)
        loss = images.new_zeros(())
        for row, target in zip(out, targets, strict=True):
            present = torch.zeros(self.classes)
            present[target["labels"]] = 1
            loss = loss + torch.nn.functional.binary_cross_entropy_with_logits(row[:, 0], present)
            if len(target["labels"]):
                predicted = row[target["labels"], 1:] * 36
                loss = loss + torch.nn.functional.smooth_l1_loss(predicted, target["boxes"])
        return loss / len(images)


def test_a_torch_model_trains_a_step_on_detection_batches(pack):
    ds = packer.torch.PackedDataset(pack, "train", batch_size=4, layout="NCHW", seed=0)
    model = TinyDetector(len(packer.open(pack).classes))
    optimiser = torch.optim.SGD(model.parameters(), lr=0.01)
    images, targets = next(iter(DataLoader(ds, batch_size=None)))
    before = [p.detach().clone() for p in model.parameters()]
    loss = model(images.float() / 255, targets)
    loss.backward()
    optimiser.step()
    assert torch.isfinite(loss) and loss > 0
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_ranks_share_each_epoch_and_resume_is_exact(pack):
    expected = by_image(pack)
    ranks = [
        packer.torch.PackedDataset(pack, "train", batch_size=2, seed=3, rank=r, world_size=2)
        for r in (0, 1)
    ]
    seen = [img.numpy().tobytes() for ds in ranks for i in range(len(ds)) for img in ds[i][0]]
    assert set(seen) == set(expected)
    whole = packer.torch.PackedDataset(pack, "train", batch_size=2, seed=3)
    state = whole.state_dict(batches=1)
    resumed = packer.torch.PackedDataset(pack, "train", batch_size=2, seed=5)
    resumed.load_state_dict(state)
    for index in range(len(resumed)):
        (a, ta), (b, tb) = whole[index + 1], resumed[index]
        assert torch.equal(a, b)
        for x, y in zip(ta, tb, strict=True):
            assert torch.equal(x["masks"], y["masks"]) and torch.equal(x["boxes"], y["boxes"])


def test_packed_sequence_pads_to_max_boxes_with_minus_one(pack):
    expected = by_image(pack)
    most = max(len(t["labels"]) for t in expected.values())
    seq = packer.keras.PackedSequence(pack, "train", batch_size=3, shuffle=False, max_boxes=8)
    for index in range(len(seq)):
        images, targets = seq[index]
        assert set(targets) == {"boxes", "labels"}
        assert targets["boxes"].shape == (len(images), 8, 4) and targets["labels"].dtype == np.int32
        for image, boxes, labels in zip(images, targets["boxes"], targets["labels"], strict=True):
            want = expected[image.tobytes()]
            n = len(want["labels"])
            np.testing.assert_array_equal(labels[:n], want["labels"])
            np.testing.assert_array_equal(boxes[:n], want["boxes"])
            assert (labels[n:] == -1).all() and (boxes[n:] == -1).all() and n <= most < 8


def test_max_boxes_cuts_are_counted_and_warned_of(pack):
    seq = packer.keras.PackedSequence(pack, "train", batch_size=6, shuffle=False, max_boxes=2)
    with pytest.warns(UserWarning, match="max_boxes=2 cut"):
        _, targets = seq[0]
    total = sum(len(t["labels"]) for t in by_image(pack).values())
    assert seq.loader.padder.cut == total - (targets["labels"] >= 0).sum() > 0


def test_packed_sequence_workers_give_the_same_batches(pack):
    one = packer.keras.PackedSequence(pack, "train", batch_size=2, seed=4, max_boxes=6)
    two = packer.keras.PackedSequence(pack, "train", batch_size=2, seed=4, max_boxes=6, workers=2)
    try:
        for index in range(len(one)):
            (a, ta), (b, tb) = one[index], two[index]
            np.testing.assert_array_equal(a, b)
            np.testing.assert_array_equal(ta["boxes"], tb["boxes"])
    finally:
        two.close()


@pytest.mark.parametrize("stream", [False, True])
def test_tf_dataset_pads_to_max_boxes(pack, stream):
    import packer.tf

    expected = by_image(pack)
    batches = packer.tf.dataset(
        pack, "train", batch_size=4, shuffle=False, max_boxes=7, stream=stream
    )
    seen = 0
    for images, targets in batches:
        assert targets["boxes"].shape[1:] == (7, 4) and targets["labels"].shape[1:] == (7,)
        for image, boxes, labels in zip(
            images.numpy(), targets["boxes"].numpy(), targets["labels"].numpy(), strict=True
        ):
            want = expected[image.tobytes()]
            n = len(want["labels"])
            np.testing.assert_allclose(boxes[:n], want["boxes"], atol=1e-4)
            assert labels[:n].tolist() == want["labels"].tolist() and (labels[n:] == -1).all()
            seen += 1
    assert seen == len(expected)


def test_augmentation_moves_objects_alike_in_every_reader(pack):
    augment = packer.Augment(horizontal_flip=True, width_shift_range=0.3, zoom_range=0.3, seed=0)
    part = packer.open(pack)["train"]
    options = dict(batch_size=4, seed=3, shuffle=False, augment=augment)
    seq = packer.keras.PackedSequence(pack, "train", **options)
    tds = packer.torch.PackedDataset(pack, "train", **options)
    tfds = list(packer.tf.dataset(pack, "train", **options))
    moved_any = False
    for k in range(len(seq)):
        indices = np.arange(4 * k, min(4 * k + 4, part.count))
        images = np.stack([part[i][0] for i in indices])
        raw = [part[i][1] for i in indices]
        params = augment.draw(0, indices, images.shape[1:3])
        want_images, _, want = numpy_exec.apply(images, None, params, targets=raw)
        images_k, padded = seq[k]
        np.testing.assert_array_equal(images_k, want_images)
        torch_images, torch_targets = tds[k]
        np.testing.assert_array_equal(torch_images.numpy(), want_images)
        tf_images, tf_targets = tfds[k]
        assert tuple(tf_images.shape) == want_images.shape
        for j, target in enumerate(want):
            n = len(target["labels"])
            moved_any |= n != len(raw[j]["labels"]) or not np.array_equal(
                target["boxes"], raw[j]["boxes"]
            )
            np.testing.assert_allclose(padded["boxes"][j, :n], target["boxes"], atol=1e-4)
            assert (padded["labels"][j, n:] == -1).all()
            np.testing.assert_array_equal(torch_targets[j]["masks"].numpy(), target["masks"])
            np.testing.assert_allclose(torch_targets[j]["boxes"].numpy(), target["boxes"])
            np.testing.assert_allclose(
                tf_targets["boxes"].numpy()[j, :n], target["boxes"], atol=1e-3
            )
            assert tf_targets["labels"].numpy()[j, :n].tolist() == target["labels"].tolist()
    assert moved_any


def test_augment_device_moves_objects_as_the_workers_do(pack):
    augment = packer.Augment(horizontal_flip=True, width_shift_range=0.3, zoom_range=0.3, seed=0)
    options = dict(batch_size=4, seed=3, augment=augment, layout="NCHW")
    on_cpu = packer.torch.PackedDataset(pack, "train", **options)
    on_device = packer.torch.PackedDataset(pack, "train", augment_device="cpu", **options)
    loader = DataLoader(on_device, batch_size=None, num_workers=1)
    for k, batch in enumerate(loader):
        images, targets = batch  # augmented where it is unpacked
        want_images, want = on_cpu[k]
        assert images.shape == want_images.shape
        assert (images.int() - want_images.int()).abs().float().mean() < 1.0
        for got, expected in zip(targets, want, strict=True):
            assert got["labels"].dtype == torch.int64
            assert got["labels"].tolist() == expected["labels"].tolist()
            np.testing.assert_allclose(got["boxes"].numpy(), expected["boxes"], atol=1e-3)
            agree = (got["masks"] == expected["masks"]).float().mean()
            assert agree >= 0.9999 or got["masks"].numel() == 0


def test_one_hot_of_objects_is_refused_in_one_line(pack):
    with pytest.raises(ValueError, match="one_hot=True does not apply"):
        packer.torch.PackedDataset(pack, "train", batch_size=2, one_hot=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        packer.torch.PackedDataset(pack, "train", batch_size=2)
