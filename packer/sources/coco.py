"""Placeholder: the coco layout (being written)."""

from __future__ import annotations

NAME = "coco"


def detect(tree, annotations):
    return None


def scan(root, tree, annotations):
    raise NotImplementedError
