"""How the augmentation moves each field of a batch: by its kind's geometry, never its name.

The readers' executors are given the pack's fields (`schema.Field`: each field's kind says its
`geometry` and, for "pixels", its `interpolation`); a user's own dicts may name the geometries
(``{"heat": "pixels", "spots": "points"}``), and otherwise their keys follow the convention
albumentations and torchvision users know: "boxes" are boxes, "masks" per-object planes,
"keypoints" points, anything else rides along untouched.

A "points" field whose rows hold K points may carry a flip order (`schema.Field.flip_order`,
YOLO's `flip_idx`): the point each one becomes when a sample's image is mirrored, so that
left and right keep their names.

Fixed fields (one array a sample, ``[B, ...]``) move as "pixels", "labels", "points" or
"none"; ragged fields (rows per object) as "boxes", "points", "planes" or "none".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

FIXED = ("pixels", "labels", "points", "none")
RAGGED = ("boxes", "points", "planes", "none")
# torchvision's and albumentations' target keys, for dicts given without geometries
CONVENTION = {"boxes": "boxes", "masks": "planes", "keypoints": "points"}


@dataclass(frozen=True)
class Move:
    """One field's move: its geometry, the interpolation of a "pixels" field, and whether
    it holds rows per object (ragged) rather than one array a sample; for "points" rows of K
    points, the order they take when the image is mirrored (empty: kept)."""

    geometry: str
    interpolation: str = "linear"
    ragged: bool = False
    flip_order: tuple[int, ...] = ()


def moves(fields: Iterable[Any] | Mapping[str, Any], *, ragged: bool = False) -> dict[str, Move]:
    """Each field's `Move`, by name.

    ``fields``: the pack's `schema.Field` objects, or a mapping of name to a `Move`, a
    `packer.fields.FieldKind` or a geometry name (ragged when ``ragged``). A
    geometry a field cannot have (a fixed "boxes", a ragged "pixels") is a one-line error.
    """
    from ..fields import FieldKind, kind_of

    if isinstance(fields, Mapping):
        found = {name: _move(value, ragged, FieldKind) for name, value in fields.items()}
    else:
        found = {}
        for field in fields:
            kind = kind_of(field)
            found[field.name] = Move(
                kind.geometry, kind.interpolation, field.ragged, field.flip_order
            )
    for name, move in found.items():
        allowed = RAGGED if move.ragged else FIXED
        if move.geometry not in allowed:
            what = "per-object (ragged)" if move.ragged else "fixed"
            raise ValueError(
                f"field {name!r}: augmentation moves {what} fields as {', '.join(allowed)}, "
                f"not {move.geometry!r}"
            )
    return found


def _move(value: Any, ragged: bool, kind_class: type) -> Move:
    if isinstance(value, Move):
        return value
    if isinstance(value, kind_class):
        return Move(value.geometry, value.interpolation, value.ragged)
    if not isinstance(value, str):
        raise ValueError(f"a geometry is a name, a FieldKind or a Move, not {value!r}")
    return Move(value, "linear", ragged)


def by_convention(keys: Iterable[str], geometries: Mapping[str, Any] | None) -> dict[str, Move]:
    """The per-object `Move` of each target key: ``geometries`` when given (keys it leaves
    out ride along), else the convention (`CONVENTION`)."""
    given = CONVENTION if geometries is None else geometries
    return moves({key: given.get(key, "none") for key in keys}, ragged=True)


def input_field(found: Mapping[str, Move]) -> str | None:
    """The field the colour changes touch: the first "pixels" field (the pack's image)."""
    return next((name for name, m in found.items() if m.geometry == "pixels"), None)
