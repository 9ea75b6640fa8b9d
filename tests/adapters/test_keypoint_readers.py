"""A keypoints pack through the three readers: torch gives torchvision's `keypoints` `[N, K, 3]`
per image (what `keypointrcnn_resnet50_fpn` takes) beside boxes and labels, through DataLoader
workers too; Keras and tf.data pad them to `[B, max_boxes, K, 3]` with -1. A small keypoint
model of the test's own trains a step on them (torchvision's Keypoint R-CNN where it imports).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

import packer
import packer.torch
from tests.fixtures.keypoints import make_coco_keypoints

SIZE = (64, 48)
K = 5


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    src = make_coco_keypoints(tmp_path_factory.mktemp("coco"))
    out = tmp_path_factory.mktemp("pack") / "p"
    packer.pack(src, out=out, size=SIZE, resize="none", progress=False)
    return out


def _objects(out) -> list[dict]:
    """Every sample's ragged rows, in the pack's order."""
    from packer.reading.batches import BatchReader

    split = packer.open(out)["train"]
    return BatchReader(split).objects(np.arange(split.count))


@pytest.mark.parametrize("workers", [0, 2])
def test_torch_gives_torchvision_keypoints_per_image(pack, workers):
    dataset = packer.torch.PackedDataset(pack, batch_size=2, shuffle=False, layout="NCHW")
    want = _objects(pack)
    k = 0
    for images, targets in DataLoader(dataset, batch_size=None, num_workers=workers):
        assert images.shape[1:] == (3, SIZE[1], SIZE[0])
        for target in targets:
            points = target["keypoints"]
            assert points.dtype == torch.float32 and points.shape == (len(target["boxes"]), K, 3)
            np.testing.assert_array_equal(points.numpy(), want[k]["keypoints"])
            assert target["labels"].dtype == torch.int32 or target["labels"].dtype == torch.int64
            k += 1
    assert k == len(want)


def test_keras_and_tf_pad_keypoints_to_max_boxes(pack):
    want = _objects(pack)
    _, targets = packer.keras.PackedSequence(pack, batch_size=4, shuffle=False)[0]
    assert set(targets) == {"boxes", "labels", "keypoints"}
    slots = targets["boxes"].shape[1]
    assert targets["keypoints"].shape == (4, slots, K, 3)
    for row, objects in enumerate(want):
        n = len(objects["keypoints"])
        np.testing.assert_array_equal(targets["keypoints"][row, :n], objects["keypoints"])
        assert (targets["keypoints"][row, n:] == -1).all()
    _, tf_targets = next(iter(packer.tf.dataset(pack, batch_size=4, shuffle=False)))
    assert tf_targets["keypoints"].shape[1:] == (slots, K, 3)
    np.testing.assert_array_equal(tf_targets["keypoints"].numpy(), targets["keypoints"])


class TinyKeypointNet(torch.nn.Module):
    """Per image a feature vector; per object its box's corners and that vector give its K
    points (x, y) and a visibility logit: the smallest model that learns keypoints per box."""

    def __init__(self) -> None:
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, stride=2, padding=1),
            torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1),
            torch.nn.Flatten(),
        )
        self.head = torch.nn.Linear(8 + 4, K * 3)

    def forward(self, images: torch.Tensor, boxes: list[torch.Tensor]) -> list[torch.Tensor]:
        features = self.features(images)
        return [
            self.head(torch.cat([f.expand(len(b), -1), b / 64], dim=1)).view(-1, K, 3)
            for f, b in zip(features, boxes, strict=True)
        ]


def test_a_small_keypoint_model_trains_a_step_from_packer_torch(pack):
    torch.manual_seed(0)
    model = TinyKeypointNet()
    optimiser = torch.optim.SGD(model.parameters(), lr=0.1)
    dataset = packer.torch.PackedDataset(pack, batch_size=4, layout="NCHW")
    images, targets = next(iter(DataLoader(dataset, batch_size=None)))
    inputs = images.float() / 255
    boxes = [t["boxes"] for t in targets]
    before = [p.detach().clone() for p in model.parameters()]
    predicted = model(inputs, boxes)
    loss = torch.zeros(())
    for out, target in zip(predicted, targets, strict=True):
        points = target["keypoints"]
        labelled = points[..., 2] > 0
        loss = loss + ((out[..., :2] - points[..., :2] / 64) ** 2).sum(-1)[labelled].sum()
        seen = (points[..., 2] == 2).float()
        loss = loss + torch.nn.functional.binary_cross_entropy_with_logits(
            out[..., 2], seen, reduction="sum"
        )
    loss.backward()
    optimiser.step()
    assert torch.isfinite(loss) and loss > 0
    assert all(not torch.equal(a, p) for a, p in zip(before, model.parameters(), strict=True))


def test_keypoint_rcnn_trains_a_step_where_torchvision_imports(pack):
    detection = pytest.importorskip("torchvision.models.detection")
    model = detection.keypointrcnn_resnet50_fpn(
        weights=None, weights_backbone=None, num_classes=2, num_keypoints=K, min_size=48
    )
    dataset = packer.torch.PackedDataset(pack, batch_size=2, layout="NCHW")
    images, targets = next(iter(DataLoader(dataset, batch_size=None)))
    targets = [
        {"boxes": t["boxes"], "labels": t["labels"].long() + 1, "keypoints": t["keypoints"]}
        for t in targets
    ]
    model.train()
    losses = model(list(images.float() / 255), targets)
    assert "loss_keypoint" in losses and torch.isfinite(sum(losses.values()))
