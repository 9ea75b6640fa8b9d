"""The roles of a list's columns: detected from their values, or stated (`--columns`), each
with the reason a dry run shows.

A column of image files (or of ids that resolve to one under the root) is an image column: the
first is the input image, the others extra image fields named by their headers. A column of
numbers with fractions is numeric (a regression target; integers are class ids unless stated
`number`); a column of strings some of which hold a separator (`|`, `;`, `,`, a space) is
multi-label; any other string (or integer) column is the class. A header naming a split
(`split`, `subset`, `partition`) gives each row its split. A second class column is left out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..errors import SourceError
from ..flags import flag
from .column_rows import Row, number
from .model import ext, is_image

ROLES = ("image", "class", "multi", "number", "split", "skip")
SEPARATORS = ("|", ";", ",", " ")
SPLIT_HEADERS = ("split", "subset", "partition")
LABEL_HEADERS = ("label", "labels", "class", "class_name", "category", "target", "y")
NUMERIC_SHARE = 0.8  # a column is numeric when this share of its values are numbers (the
# others are rejected rows, each named)
PROBED = 64  # values of a column tried against the root's files to tell ids of images


@dataclass(frozen=True)
class Column:
    """One column: its position, header, role, why, and for tags or numbers several to a
    cell, the separator."""

    index: int
    header: str
    role: str
    why: str
    separator: str | None = None


def stated_roles(spec: str | None) -> dict[str, str]:
    """`--columns` as header -> role: `id:image,tags:multi,age:number`."""
    if not spec:
        return {}
    found = {}
    for entry in spec.split(","):
        header, sep, role = entry.strip().rpartition(":")
        if not sep or not header or role not in ROLES:
            raise SourceError(
                f"{flag('columns', spec)}: {entry.strip()!r} is not COLUMN:ROLE "
                f"(roles: {', '.join(ROLES)})"
            )
        found[header.strip()] = role
    return found


def roles(
    header: list[str],
    rows: list[Row],
    stated: Mapping[str, str],
    resolves: Callable[[list[str]], int],
) -> list[Column]:
    """Each column's role and why; `resolves(values)` counts the values that name an image
    file under the root once an extension is added."""
    unknown = sorted(set(stated) - set(header))
    if unknown:
        raise SourceError(
            f"{flag('columns')}: no column {unknown[0]!r}; the columns are {', '.join(header)}"
        )
    found = []
    for index, name in enumerate(header):
        values = [v for v in (row[index] for _, row in rows) if v not in (None, "", [])]
        if name in stated:
            role = stated[name]
            found.append(Column(index, name, role, "stated", _separator(values, role)))
        else:
            found.append(_detected(index, name, values, resolves))
    return _one_class(found)


def _detected(index: int, name: str, values: list, resolves) -> Column:
    """The role the values of one column suggest, and why."""
    if name.lower() in SPLIT_HEADERS:
        return Column(index, name, "split", "its header names a split")
    if not values:
        return Column(index, name, "skip", "no values")
    if all(isinstance(v, list) for v in values):
        items = [x for v in values for x in v]
        numbers = [number(x) for x in items]
        if items and all(n is not None for n in numbers):
            if any(not n.is_integer() for n in numbers):  # type: ignore[union-attr]
                return Column(index, name, "number", "lists of numbers with fractions")
            return Column(index, name, "multi", "lists of integers: tags")
        return Column(index, name, "multi", "lists of strings: tags")
    texts = [str(v) for v in values]
    if all(is_image(t) for t in texts):
        kinds = sorted({ext(t) for t in texts})
        return Column(index, name, "image", f"image files ({', '.join(kinds)})")
    probed = [t for t in texts if not ext(t)][:PROBED]
    if probed and resolves(probed) * 2 >= len(probed):
        return Column(index, name, "image", "ids that resolve to image files under the root")
    numbers = [number(v) for v in values]
    if sum(n is not None for n in numbers) >= NUMERIC_SHARE * len(values):
        if any(n is not None and not n.is_integer() for n in numbers):
            return Column(index, name, "number", "numbers with fractions")
        return Column(index, name, "class", f"integers: class ids ({name}:number for numbers)")
    separator = _separator(texts, "multi")
    if separator is not None:
        cells = [t.split(separator) for t in texts]
        tokens = [number(x) for cell in cells for x in cell if x.strip()]
        if all(n is not None for n in tokens) and any(not n.is_integer() for n in tokens):  # type: ignore[union-attr]
            why = f"numbers with fractions, {separator!r} apart"
            return Column(index, name, "number", why, separator)
        why = f"strings, some holding {separator!r}: tags"
        return Column(index, name, "multi", why, separator)
    return Column(index, name, "class", "strings: class names")


def _separator(values: list, role: str) -> str | None:
    """The first separator some text value holds, for tags and numbers several to a cell."""
    if role not in ("multi", "number"):
        return None
    texts = [v for v in values if isinstance(v, str)]
    return next((s for s in SEPARATORS if any(s in t.strip() for t in texts)), None)


def _one_class(columns: list[Column]) -> list[Column]:
    """One class column: a stated one, else one whose header names labels, else the first;
    the others are left out, saying so."""
    classes = [c for c in columns if c.role == "class"]
    if len(classes) < 2:
        return columns
    chosen = next(
        (c for c in classes if c.why == "stated"),
        next((c for c in classes if c.header.lower() in LABEL_HEADERS), classes[0]),
    )
    return [
        Column(
            c.index,
            c.header,
            "skip",
            f"a second class column ({c.why}); state "
            f"{flag('columns', f'{c.header}:class')} to take it instead of {chosen.header}",
        )
        if c.role == "class" and c is not chosen
        else c
        for c in columns
    ]
