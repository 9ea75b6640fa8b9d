"""A list with columns as SRC (CSV, TSV, JSON Lines): each kept row a sample whose values are
its columns' (Python samples' machinery: `Sample.values`, each field placed by its kind).

Fields: the first image column is `images` (the input), the class column `labels` (kind
`class`: names sorted, or integer ids), every other column a field named by its header: extra
image columns (kind `image`, bit depth and bands kept), multi-label columns (`multi_hot` over
the sorted tag vocabulary, or the one given), numeric columns (`numbers`, float32). A row that
cannot be packed (an image missing, a tag outside the vocabulary, a non-number) is rejected
with its file and line; the rest are kept.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

import numpy as np

from ..errors import SourceError
from ..flags import flag
from ..labels import ClassTable
from .column_rows import Row, number
from .columns import Column
from .model import IMAGE_EXTENSIONS, Found, ListedFields, Rejection, Values, ext, is_image, stem
from .python_samples import values_digest
from .walk import existing_files

KINDS = {"image": "image", "class": "class", "multi": "multi_hot", "number": "numbers"}
LAYOUT = "list with columns"


class Resolver:
    """Listed paths to files under the root: a path as given, or an id with the one image
    extension present beside it; each folder read once."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.listed: dict[str, tuple[set[str], dict[str, list[str]]]] = {}

    def find(self, text: str) -> tuple[str | None, str | None]:
        """(the file's path relative to the root, None) or (None, why not)."""
        posix = PurePosixPath(text.replace("\\", "/"))
        if posix.is_absolute() or ".." in posix.parts:
            return None, "path leaves the root; paths must be relative to it"
        rel = posix.as_posix()
        files, by_stem = self._folder(rel.rpartition("/")[0])
        if is_image(rel):
            return (rel, None) if rel in files else (None, "missing")
        found = by_stem.get(rel, [])
        if len(found) == 1:
            return found[0], None
        if found:
            return None, f"ambiguous: {', '.join(found)}"
        return None, "missing (no image file of that name, with any extension)"

    def _folder(self, folder: str) -> tuple[set[str], dict[str, list[str]]]:
        """A folder's files, and its image files by stem (read once)."""
        if folder not in self.listed:
            files = existing_files(self.root, [f"{folder}/x" if folder else "x"])
            by_stem: dict[str, list[str]] = {}
            for name in sorted(files):
                if ext(name) in IMAGE_EXTENSIONS:
                    by_stem.setdefault(stem(name), []).append(name)
            self.listed[folder] = files, by_stem
        return self.listed[folder]

    def count(self, texts: list[str]) -> int:
        """How many of `texts` name an image file."""
        return sum(self.find(t)[0] is not None for t in texts)


def field_names(columns: list[Column]) -> dict[int, str]:
    """Each kept column's field: the first image column `images`, the class `labels`, the
    others their headers as field names (letters, digits, _ and -)."""
    names: dict[int, str] = {}
    images = [c for c in columns if c.role == "image"]
    for c in columns:
        if c.role in ("split", "skip"):
            continue
        if images and c is images[0]:
            names[c.index] = "images"
        elif c.role == "class":
            names[c.index] = "labels"
        else:
            names[c.index] = re.sub(r"[^A-Za-z0-9_-]", "_", c.header).lstrip("-") or "column"
    taken = list(names.values())
    for index, name in names.items():
        if taken.count(name) > 1:
            header = next(c.header for c in columns if c.index == index)
            raise SourceError(
                f"column {header!r} would be field {name!r}, as another column: rename one "
                f"or leave it out with {flag('columns', f'{header}:skip')}"
            )
    return names


def scan_columns(
    resolver: Resolver,
    name: str,
    header: list[str],
    rows: list[Row],
    columns: list[Column],
    vocabulary: list[str] | None,
    found: Found,
) -> None:
    """Fill `found` with the rows' samples (their values), rejections, classes and fields."""
    names = field_names(columns)
    images = [c for c in columns if c.role == "image"]
    if not images:
        raise SourceError(
            f"{name}: no column holds image files or ids that resolve to one under "
            f"{resolver.root} "
            f"(columns: {', '.join(header)}); pass {flag('root')} or state one with "
            f"{flag('columns', 'COLUMN:image')}"
        )
    multi = [c for c in columns if c.role == "multi"]
    if vocabulary is not None and not multi:
        raise SourceError(f"{flag('vocabulary')}: {name} has no multi-label column")
    split_col = next((c for c in columns if c.role == "split"), None)
    kept: list[tuple[int, str, dict]] = []
    seen: dict[str, int] = {}
    allowed = None if vocabulary is None else frozenset(vocabulary)
    for line, cells in rows:
        where = f"{name} line {line}"
        row, problem = _row(cells, columns, names, resolver, allowed, where)
        first = row.get("images") or str(cells[images[0].index] or "")
        if problem is None and first in seen:
            problem = f"listed again ({where}); first listed on line {seen[first]}"
        split = str(cells[split_col.index] or "") if split_col else ""
        if problem is None and split and not split.isidentifier():
            problem = f"split {split!r} ({where}) is not a name like train or val"
        if problem is not None:
            found.rejected.append(Rejection(first or where, problem))
            continue
        seen[first] = line
        kept.append((line, split, row))
    _fill(found, columns, names, kept, vocabulary)


def _row(cells, columns, names, resolver, allowed, where) -> tuple[dict, str | None]:
    """One row's values by field (tags as lists, numbers as float32), or why it is refused."""
    row: dict = {}
    for c in columns:
        if c.index not in names:
            continue
        field, value = names[c.index], cells[c.index]
        if value in (None, "", []):
            return row, f"no value in column {c.header} ({where})"
        if c.role == "image":
            rel, why = resolver.find(str(value))
            if rel is None:
                text = "listed" if field == "images" else f"its {c.header}"
                return row, f"{text} {value} ({where}): {why}"
            row[field] = rel
        elif c.role == "class":
            row[field] = str(value)
        elif c.role == "multi":
            tags = _split(value, c.separator)
            outside = sorted(set(tags) - allowed) if allowed is not None else []
            if outside:
                return (
                    row,
                    f"tag {outside[0]!r} of column {c.header} ({where}) is not in the vocabulary",
                )
            row[field] = tags
        else:
            numbers = _numbers(value, c.separator)
            if numbers is None:
                return row, f"{c.header} {value!r} ({where}) is not a number"
            row[field] = numbers
    return row, None


def _numbers(value, separator: str | None) -> np.ndarray | None:
    """A cell's numbers as float32: one (a scalar), or a JSON list's or several a cell (a
    vector); None when any item is not a number."""
    items = value if isinstance(value, list) else _split(value, separator)
    found = [number(v) for v in items]
    if not found or any(n is None for n in found):
        return None
    return np.asarray(found if len(found) > 1 or isinstance(value, list) else found[0], np.float32)


def _split(value, separator: str | None) -> list[str]:
    """A cell's items: a JSON list's, or its text split by the separator (empty items out)."""
    if isinstance(value, list):
        return [str(v).strip() for v in value if str(v).strip()]
    text = str(value)
    parts = text.split(separator) if separator else [text]
    return [p.strip() for p in parts if p.strip()]


def _fill(found: Found, columns, names, kept, vocabulary) -> None:
    """Samples, classes, vocabularies and fields of the kept rows."""
    classes = next(
        (names[c.index] for c in columns if c.role == "class" and c.index in names), None
    )
    ids = None
    if classes is not None:
        labels = [row[classes] for _, _, row in kept]
        if all(v.isascii() and v.isdigit() for v in labels):
            found.class_names = [str(i) for i in range(max(map(int, labels), default=-1) + 1)]
            ids = {v: int(v) for v in labels}
        else:
            found.class_names = sorted(set(labels))
            ids = {v: i for i, v in enumerate(found.class_names)}
    vocabularies = {}
    for c in columns:
        if c.role == "multi" and c.index in names:
            tags = vocabulary or sorted({t for _, _, row in kept for t in row[names[c.index]]})
            vocabularies[names[c.index]] = {t: i for i, t in enumerate(tags)}
    if classes is None and len(vocabularies) == 1:  # the tags name the classes
        ((field, tags),) = vocabularies.items()
        source = "the given vocabulary" if vocabulary else f"the sorted tags of {field}"
        found.table = ClassTable.from_names(list(tags), source)
    for _, split, row in kept:
        values = dict(row)
        if classes is not None:
            values[classes] = np.int32(ids[row[classes]])  # type: ignore[index]
        for field, index in vocabularies.items():
            hot = np.zeros(len(index), np.float32)
            hot[[index[t] for t in row[field]]] = 1
            values[field] = hot
        files = tuple(
            values[names[c.index]] for c in columns if c.role == "image" and c.index in names
        )
        image = values["images"]
        found.items.append((image, split, None, None))
        found.values[image] = Values(len(found.values), values, files, values_digest(values))
    kinds = {names[c.index]: KINDS[c.role] for c in columns if c.index in names}
    kinds = {"images": "image", **kinds}  # the input first
    recorded = {
        "columns": {
            c.header: {
                "role": c.role,
                "why": c.why,
                **({"field": names[c.index]} if c.index in names else {}),
            }
            for c in columns
        },
        **({"vocabularies": {f: list(v) for f, v in vocabularies.items()}} if vocabularies else {}),
    }
    found.fields = ListedFields(kinds, recorded)
    found.task = "classification" if kinds == {"images": "image", "labels": "class"} else "custom"
    found.why = "\n         ".join(
        f"column {c.header}: {c.role}{f' -> {names.get(c.index)}' * (c.index in names)} ({c.why})"
        for c in columns
    )
    found.left_out += [f"column {c.header}: {c.why}" for c in columns if c.role == "skip"]
