"""The rows of a list with columns: a CSV, a TSV or a JSON Lines file, each row with its line
number and one cell per column (text in CSV and TSV; JSON values in JSON Lines, where a list
of tags or numbers stays a list). A CSV or TSV names its columns in a first row when that row
holds no image path and no number; otherwise its columns are `column_1`, `column_2`, ...
"""

from __future__ import annotations

import csv
import json

from .model import Rejection, is_image

COLUMN_EXTENSIONS = (".csv", ".tsv", ".jsonl")

# (line number, one cell per column: text, a JSON value, or None where a row has none)
Row = tuple[int, list]


def read_rows(text: str, name: str, list_kind: str) -> tuple[list[str], list[Row], list[Rejection]]:
    """The column names, the rows and the lines that are no row (a JSON Lines line that is
    not a JSON object), each named by its file and line."""
    if list_kind == ".jsonl":
        return _json_lines(text, name)
    reader = csv.reader(text.splitlines(), delimiter="\t" if list_kind == ".tsv" else ",")
    rows = [(reader.line_num, row) for row in reader if any(cell.strip() for cell in row)]
    if not rows:
        return [], [], []
    width = max(len(row) for _, row in rows)
    if is_header(rows[0][1]):
        header = [cell.strip() for cell in rows.pop(0)[1]]
        header += [f"column_{i + 1}" for i in range(len(header), width)]
    else:
        header = [f"column_{i + 1}" for i in range(width)]
    cells = [(n, [c.strip() for c in row] + [None] * (len(header) - len(row))) for n, row in rows]
    return header, cells, []


def is_header(first: list[str]) -> bool:
    """A first row of names: no cell is empty, an image path or a number."""
    cells = [cell.strip() for cell in first]
    return all(cells) and not any(is_image(c) or number(c) is not None for c in cells)


def number(value) -> float | None:
    """A cell's finite number (text or JSON), else None."""
    if isinstance(value, bool) or value is None or isinstance(value, list):
        return None
    try:
        found = float(value)
    except (TypeError, ValueError):
        return None
    return found if found - found == 0 else None  # not inf, not nan


def _json_lines(text: str, name: str) -> tuple[list[str], list[Row], list[Rejection]]:
    """JSON Lines: one object a line; the columns are their keys in the order first met."""
    objects, rejected = [], []
    for line, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except ValueError as exc:
            value, why = None, f"not JSON ({exc.msg})"
        else:
            why = "not a JSON object"
        if not isinstance(value, dict):
            rejected.append(Rejection(f"{name} line {line}", why))
            continue
        objects.append((line, value))
    header = list(dict.fromkeys(key for _, value in objects for key in value))
    rows = [(line, [_cell(value.get(key)) for key in header]) for line, value in objects]
    return header, rows, rejected


def _cell(value):
    """A JSON value as a cell: text stripped, numbers and lists as they are."""
    return value.strip() if isinstance(value, str) else value
