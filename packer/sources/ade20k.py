"""Placeholder: the ade20k layout (being written)."""

from __future__ import annotations

NAME = "ade20k"


def detect(tree, annotations):
    return None


def scan(root, tree, annotations):
    raise NotImplementedError
