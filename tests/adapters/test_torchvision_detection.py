"""A real torchvision detection model trains a step from packer.torch's detection batches,
where torchvision imports (it does not beside the CPU-only torch wheel of CI's machines:
there this file skips). torchvision keeps label 0 for the background, so the pack's labels
0..K-1 go in as 1..K with num_classes K + 1."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader

import packer
import packer.torch
from tests.fixtures.detection import make_detection_coco

detection = pytest.importorskip("torchvision.models.detection")
pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")


def test_mask_rcnn_trains_a_step_on_packed_instances(tmp_path):
    src = make_detection_coco(tmp_path / "coco")
    pack = packer.pack(src, out=tmp_path / "p", size=(96, 72), task="instances", workers=1)
    classes = len(pack.classes)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = detection.maskrcnn_resnet50_fpn(
        weights=None, weights_backbone=None, num_classes=classes + 1, min_size=72, max_size=96
    ).to(device)
    optimiser = torch.optim.SGD(model.parameters(), lr=0.01)
    dataset = packer.torch.PackedDataset(pack.root, "train", batch_size=2, layout="NCHW")
    images, targets = next(iter(DataLoader(dataset, batch_size=None, num_workers=1)))
    inputs = (images.float() / 255).to(device)
    targets = [
        {"boxes": t["boxes"].to(device), "labels": (t["labels"] + 1).to(device),
         "masks": t["masks"].to(device)}
        for t in targets
    ]  # fmt: skip
    model.train()
    losses = model(list(inputs), targets)
    assert {"loss_classifier", "loss_box_reg", "loss_mask"} <= set(losses)
    total = sum(losses.values())
    heads = list(model.roi_heads.parameters())
    before = [p.detach().clone() for p in heads]
    total.backward()
    optimiser.step()
    assert torch.isfinite(total)
    assert any(not torch.equal(a, p) for a, p in zip(before, heads, strict=True))
