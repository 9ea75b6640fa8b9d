"""Placeholder: the cityscapes layout (being written)."""

from __future__ import annotations

NAME = "cityscapes"


def detect(tree, annotations):
    return None


def scan(root, tree, annotations):
    raise NotImplementedError
