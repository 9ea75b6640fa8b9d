"""Classes renamed, merged or made the ignore index by name: `--ignore-class`, `--class-map`.

A mapping works on what masks hold (values and colours) and on class names alike, and yields
a new `ClassTable` whose value and colour maps say where every old value and colour goes, so
the converter applies it in the lookup it already does (no second pass over the pixels).
Classes keep their order; an ignored class's successors move down; a class that several
merge into takes the place of the first of them.
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass

from . import storage
from .errors import LabelError
from .flags import flag
from .labels import IGNORED, ClassInfo, ClassTable

IGNORE = "ignore"


@dataclass(frozen=True)
class ClassMapping:
    """What the user asked: classes to ignore and `source -> target` rows, in order."""

    ignore: tuple[str, ...] = ()
    rows: tuple[tuple[str, str], ...] = ()
    source: str | None = None  # the --class-map file's name

    def __bool__(self) -> bool:
        return bool(self.ignore or self.rows)

    def to_json(self) -> dict:
        return {
            "ignore": list(self.ignore),
            "map": [list(r) for r in self.rows],
            "file": self.source,
        }


def read_class_map(path: str | os.PathLike) -> tuple[tuple[str, str], ...]:
    """`source,target` rows of a CSV (a `source,target` header is optional)."""
    try:
        text = storage.read_bytes(path).decode("utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise LabelError(f"cannot read {flag('class_map')} {path}: {exc}") from None
    rows = []
    for line_no, row in enumerate(csv.reader(text.splitlines()), start=1):
        cells = [c.strip() for c in row]
        if not any(cells) or cells[0].startswith("#"):
            continue
        if len(cells) != 2 or not all(cells):
            raise LabelError(f"{path}:{line_no}: expected 'source,target', found {','.join(row)!r}")
        if line_no == 1 and [c.lower() for c in cells] == ["source", "target"]:
            continue
        rows.append((cells[0], cells[1]))
    if not rows:
        raise LabelError(f"{path}: no 'source,target' rows")
    return tuple(rows)


def relabel(table: ClassTable, mapping: ClassMapping) -> ClassTable:
    """`table` with `mapping` applied: new classes, and every old value and colour mapped."""
    if not mapping:
        return table
    names = table.names
    by_name = {name: name for name in names} | {name.lower(): name for name in names}
    target = {name: name for name in names}  # old class name -> new name (None: ignored)
    for name in mapping.ignore:
        target[_class_named(name, by_name, flag("ignore_class", name))] = None
    values: dict[int, str | None] = {v: _name(names, i) for v, i in table.values().items()}
    colors: dict[tuple, str | None] = {c: _name(names, i) for c, i in table.colors().items()}
    added: list[str] = []
    for source, dest in mapping.rows:
        new = None if dest.lower() == IGNORE else by_name.get(dest, by_name.get(dest.lower(), dest))
        if new is not None and new not in names and new not in added:
            added.append(new)
        _apply_row(source, new, by_name, target, values, colors)
    order = _ordered([target[n] for n in names] + added)
    index = {name: i for i, name in enumerate(order)}
    colours = _colours(order, table, target, colors)
    classes = tuple(ClassInfo(i, name, colours.get(name)) for i, name in enumerate(order))

    def new_id(old: str | None) -> int:
        name = target.get(old, old) if old is not None else None
        return IGNORED if name is None else index[name]

    return ClassTable(
        classes,
        table.source,
        tuple(sorted((v, new_id(n)) for v, n in values.items())),
        tuple(sorted((c, new_id(n)) for c, n in colors.items())) if colors else None,
    )


def relabel_ids(old: ClassTable, new: ClassTable) -> dict[int, int]:
    """Old class id -> new class id (IGNORED) for labels that are class ids (classification)."""
    values = new.values()
    return {c.index: values.get(c.index, IGNORED) for c in old.classes}


def _apply_row(source: str, new: str | None, by_name: dict, target: dict, values, colors) -> None:
    """One `source,target` row: a class name, a mask value or an `r g b` colour."""
    old = by_name.get(source, by_name.get(source.lower()))
    if old is not None:
        target[old] = new
        return
    parts = source.split()
    if len(parts) == 1 and parts[0].isdigit():
        values[int(parts[0])] = new
        return
    if len(parts) == 3 and all(p.isdigit() and int(p) <= 255 for p in parts):
        colors[tuple(int(p) for p in parts)] = new
        return
    raise LabelError(
        f"{flag('class_map')}: {source!r} is no class ({', '.join(list(target)[:8])}...), "
        "mask value (a number) or colour ('r g b')"
    )


def _class_named(name: str, by_name: dict, shown: str) -> str:
    """The class a user named, case-insensitively; LabelError listing the classes otherwise."""
    found = by_name.get(name, by_name.get(name.lower()))
    if found is None:
        known = sorted(set(by_name.values()))
        raise LabelError(f"{shown}: no class named {name!r} (classes: {', '.join(known[:20])})")
    return found


def _name(names: list[str], index: int) -> str | None:
    return None if index == IGNORED else names[index]


def _ordered(names: list[str | None]) -> list[str]:
    """Names in first-seen order, each once, ignored ones left out."""
    return list(dict.fromkeys(n for n in names if n is not None))


def _colours(order: list[str], table: ClassTable, target: dict, colors: dict) -> dict:
    """Each new class's display colour: its own old colour, else its first source's."""
    found = {c.name: c.color for c in table.classes if c.color is not None and c.name in order}
    for c in table.classes:
        dest = target.get(c.name)
        if dest is not None and dest not in found and c.color is not None:
            found[dest] = c.color
    for color, dest in colors.items():
        if dest is not None and dest not in found:
            found[dest] = color
    return found
