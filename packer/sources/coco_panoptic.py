"""Placeholder: the coco_panoptic layout (being written)."""

from __future__ import annotations

NAME = "coco-panoptic"


def detect(tree, annotations):
    return None


def scan(root, tree, annotations):
    raise NotImplementedError
