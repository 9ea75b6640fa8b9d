"""Splits of a source: folder names that mean a split, --split fractions, hashed assignment.

A hashed split depends on the sample's relative path alone, so adding files never moves the
samples already packed from one split to another.
"""

from __future__ import annotations

import hashlib
import math
import unicodedata
from collections.abc import Mapping

SPLIT_NAMES = frozenset({"train", "training", "val", "valid", "validation", "test", "testing"})


def parse_split_spec(text: str) -> dict[str, float]:
    """Parse "train=0.9,val=0.1" into fractions, so a CLI flag becomes a validated mapping."""
    fractions: dict[str, float] = {}
    for item in text.split(","):
        name, sep, value = (part.strip() for part in item.partition("="))
        if not sep or not name:
            raise ValueError(f"split spec {text!r}: expected name=fraction pairs like train=0.9")
        if name in fractions:
            raise ValueError(f"split spec {text!r}: {name!r} appears twice")
        try:
            fractions[name] = float(value)
        except ValueError:
            raise ValueError(f"split spec {text!r}: {value!r} is not a number") from None
    return check_fractions(fractions)


def check_fractions(fractions: Mapping[str, float]) -> dict[str, float]:
    """Validate split fractions: identifier names, positive finite values summing to 1."""
    if not fractions:
        raise ValueError("split fractions are empty; expected e.g. train=0.9,val=0.1")
    for name, value in fractions.items():
        if not str(name).isidentifier():
            raise ValueError(f"split name {name!r} must be an identifier like train or val")
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"split {name}={value}: fractions must be positive")
    total = math.fsum(fractions.values())
    if abs(total - 1) > 1e-6:
        raise ValueError(f"split fractions sum to {total:g}, not 1")
    return dict(fractions)


def assign_split(relative_path: str, fractions: Mapping[str, float]) -> str:
    """Pick a split from a hash of the path, so adding files never moves existing samples."""
    text = unicodedata.normalize("NFC", relative_path).encode("utf-8", "surrogateescape")
    point = int.from_bytes(hashlib.sha256(text).digest()[:8], "big") / 2**64
    bound, name = 0.0, ""
    for name, fraction in fractions.items():
        bound += fraction
        if point < bound:
            return name
    if not name:
        raise ValueError("assign_split needs at least one split fraction")
    return name  # the fractions summed a hair under 1


def folder_split(rel: str) -> str:
    """The innermost folder of rel named like a split (train, val, ...), or ""."""
    for part in reversed(rel.split("/")[:-1]):
        if part.lower() in SPLIT_NAMES:
            return part
    return ""
