"""Field kinds: the registry of what a field's values can be (`FieldKind`), and lookup.

Built-in kinds are listed in `BUILTIN` (name -> class); a kind defined elsewhere (a plug-in,
a test) joins with `register(kind)`. `kind_of(field)` is what every stage asks.
"""

from __future__ import annotations

import copyreg

from ..schema import Field
from .boxes import Boxes
from .class_id import ClassId
from .flag import Flag
from .image import Image
from .keypoints import Keypoints
from .kind import GEOMETRIES, FieldKind
from .mask import Mask
from .multi_hot import MultiHot
from .numbers import Numbers
from .object_class import ObjectClass
from .object_mask import ObjectMask
from .pixels import Pixels

BUILTIN: dict[str, type[FieldKind]] = {
    k.name: k
    for k in (
        FieldKind,
        Image,
        Mask,
        ClassId,
        Boxes,
        ObjectClass,
        Flag,
        ObjectMask,
        Pixels,
        Keypoints,
        MultiHot,
        Numbers,
    )
}
_KINDS: dict[str, FieldKind] = {name: cls() for name, cls in BUILTIN.items()}


def register(kind: FieldKind) -> FieldKind:
    """Add `kind` (an instance) under its name; a name taken by another kind is an error."""
    if not isinstance(kind, FieldKind):
        raise TypeError(f"register() takes a FieldKind instance, not {type(kind).__name__}")
    known = _KINDS.get(kind.name)
    if known is not None and type(known) is not type(kind):
        raise ValueError(f"field kind {kind.name!r} is registered already ({known!r})")
    _KINDS[kind.name] = kind
    return kind


def get(name: str) -> FieldKind:
    """The kind registered as `name`; an unknown one is a one-line error naming the known."""
    try:
        return _KINDS[name]
    except KeyError:
        raise ValueError(
            f"unknown field kind {name!r}; known: {', '.join(sorted(_KINDS))} "
            "(a kind of your own joins with packer.fields.register)"
        ) from None


def kind_of(field: Field) -> FieldKind:
    """The kind of `field`."""
    return get(field.kind)


def _reduce_field(field: Field) -> tuple:
    """Pickle a field with its kind when that is not built in, so that a worker process
    started by spawn knows a kind the parent registered."""
    args = (field.name, field.shape, field.dtype, field.ragged, field.packing, field.kind)
    args += (field.flip_order,) if field.flip_order or field.encoding != "raw" else ()
    args += (field.encoding,) if field.encoding != "raw" else ()
    if field.kind in BUILTIN:
        return Field, args
    return _field_with_kind, (args, get(field.kind))


def _field_with_kind(args: tuple, kind: FieldKind) -> Field:
    """A field whose kind came with it: registered unless this process knows that name
    already (a forked worker has the parent's own kind)."""
    if kind.name not in _KINDS:
        register(kind)
    return Field(*args)


copyreg.pickle(Field, _reduce_field)


__all__ = ["BUILTIN", "GEOMETRIES", "FieldKind", "get", "kind_of", "register"]
