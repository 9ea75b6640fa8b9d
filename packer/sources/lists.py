"""The list layout: an im2rec .lst, a path,label CSV, or a list with columns (CSV, TSV, JSON
Lines), paths relative to the list's folder (or to `root`).

Labels that are image paths make an image,mask list (segmentation); otherwise they are class
indices or class names (classification). A CSV may have a header row (detected: a first row
without an image path, followed by rows with one, or naming known columns) and a `split`
column, which then gives each sample its split. A list whose columns say more (ids without
extension, tags, numbers, extra images; any TSV or JSON Lines; roles stated with `columns`)
is a list with columns (`columns`, `column_list`): each column a field.
"""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path, PurePosixPath

from ..errors import SourceError
from ..flags import flag
from .column_list import Resolver, scan_columns
from .column_rows import read_rows
from .columns import Column, roles, stated_roles
from .model import AnnotationOptions, Found, Rejection, Tree, ext, is_image
from .walk import existing_files, kind, locate, read_text, resolve

_LIST_EXTENSIONS = (".lst", ".csv", ".tsv", ".jsonl")
_PATH_COLUMNS = ("path", "image", "filename", "file", "filepath", "image_path", "img")
_LABEL_COLUMNS = ("label", "class", "class_name", "category", "target", "mask", "y")
_SPLIT_COLUMNS = ("split", "subset", "partition")
_CLASS_TABLE_HEADER = ("name", "r", "g", "b")  # a class_dict.csv given as SRC by mistake

# (line number, path, label, split or "")
Row = tuple[int, str, str, str]

NAME = "list"
DESCRIPTION = (
    "an im2rec .lst, a path,label[,split] CSV, or a CSV/TSV/JSON Lines file with columns as SRC"
)
LOOKED_FOR = "a .lst, .csv, .tsv or .jsonl list file given as SRC"


def detect(tree: Tree, annotations: AnnotationOptions) -> str | None:
    """Never a folder's layout: a list is a file given as SRC (see `scan_list_file`)."""
    return None


def scan(root: Path, tree: Tree, annotations: AnnotationOptions) -> Found:
    """A folder asked to be read as a list: refused, naming what a list is."""
    raise SourceError(
        f"{flag('layout', NAME)} needs the .lst or .csv file itself as SRC, not {root}"
    )


def scan_list_file(
    path: Path,
    layout: str,
    masks: str | os.PathLike | None,
    mask_suffix: str | None,
    root: str | os.PathLike | None = None,
    columns: str | None = None,
    vocabulary: str | os.PathLike | None = None,
) -> tuple[Path, Found]:
    """Read an im2rec .lst, a CSV list or a list with columns; the paths inside are relative
    to `root`, by default the list's own folder. `columns` states column roles, `vocabulary`
    names a file of the tags a multi-label column may hold (one a line)."""
    list_kind = ext(path.name)
    if list_kind not in _LIST_EXTENSIONS:
        raise SourceError(
            f"{path}: SRC must be a folder, a .lst/.csv/.tsv/.jsonl list file or a .parquet file"
        )
    if layout not in ("auto", NAME):
        raise SourceError(
            f"{flag('layout', layout)} needs a folder as SRC, not the list file {path.name}"
        )
    if masks is not None or mask_suffix is not None:
        raise SourceError(f"{flag('masks')}/{flag('mask_suffix')} do not apply to a list file")
    text = read_text(path, str(path), encoding="utf-8-sig")
    if root is not None and kind(locate(root)) != "folder":
        raise SourceError(f"{flag('root', str(root))}: no such folder")
    top = resolve(path.parent if root is None else locate(root))
    if list_kind != ".lst":
        found = _with_columns(top, path.name, text, list_kind, columns, vocabulary)
        if found is not None:
            return top, found
    rows = _lst_rows(text, path.name) if list_kind == ".lst" else _csv_rows(text, path.name)
    found = Found(f"list ({list_kind})", "classification", f"the files listed in {path.name}")
    if any(split for *_, split in rows):
        found.split_origin = f"split column of {path.name}"
    _list_samples(top, path.name, rows, found)
    return top, found


def _with_columns(
    top: Path,
    name: str,
    text: str,
    list_kind: str,
    columns: str | None,
    vocabulary: str | os.PathLike | None,
) -> Found | None:
    """A list with columns, or None for a path,label[,split] CSV (read as it always was)."""
    header, rows, bad = read_rows(text, name, list_kind)
    stated = stated_roles(columns)
    resolver = Resolver(top)
    found_roles = roles(header, rows, stated, resolver.count) if rows else []
    if list_kind == ".csv" and not stated and vocabulary is None and _plain(found_roles):
        return None
    tags = None
    if vocabulary is not None:
        listed = read_text(locate(vocabulary), str(vocabulary)).splitlines()
        tags = sorted({t.strip() for t in listed if t.strip()})
    found = Found(f"list ({list_kind}, columns)", "custom", f"the rows of {name}")
    found.rejected.extend(bad)
    if any(c.role == "split" for c in found_roles):
        found.split_origin = f"split column of {name}"
    scan_columns(resolver, name, header, rows, found_roles, tags, found)
    return found


def _plain(columns: list[Column]) -> bool:
    """Columns a path,label[,split] CSV has: one column of image paths (with extensions) and
    a class column or a mask column, a split column, and columns left out; or no image
    column at all (its errors say what a list needs)."""
    used = [c for c in columns if c.role != "skip"]
    images = [c for c in used if c.role == "image"]
    if not images:
        return True
    if not all(c.why.startswith("image files") for c in images):
        return False
    if any(c.role in ("multi", "number") for c in used) or len(images) > 2:
        return False
    if len(images) == 2:
        mask = images[1].header.lower()
        return mask.startswith("column_") or mask in _LABEL_COLUMNS
    return True


def list_file_note(tree: Tree) -> list[str]:
    """Point out list files next to the folders, which a user may have meant to pack from."""
    lists = [
        name
        for name in tree[""].files
        if ext(name) in _LIST_EXTENSIONS and name.lower() != "class_dict.csv"
    ]
    if not lists:
        return []
    return [f"SRC also holds {', '.join(lists)}; pass a list file as SRC to pack from it instead"]


def _lst_rows(text: str, name: str) -> list[Row]:
    """Parse im2rec lines index<TAB>label<TAB>path into (line, path, label)."""
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        columns = line.split("\t")
        if len(columns) < 3:
            raise SourceError(
                f"{name} line {number}: expected index<TAB>label<TAB>path (im2rec), "
                f"found {len(columns)} tab-separated columns"
            )
        if len(columns) > 3:
            raise SourceError(
                f"{name} line {number}: {len(columns) - 2} label columns; multi-label lists "
                "are not supported (one class index per image)"
            )
        rows.append((number, columns[2].strip(), _lst_label(columns[1], name, number), ""))
    return rows


def _lst_label(text: str, name: str, number: int) -> str:
    """An im2rec label ("1.000000") as an integer string, or an error if it is no class index."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value.is_integer() and value >= 0):
        raise SourceError(f"{name} line {number}: label {text!r} is not a class index")
    return str(int(value))


def _csv_rows(text: str, name: str) -> list[Row]:
    """Parse path,label[,split] CSV rows (header optional, detected) into Rows."""
    reader = csv.reader(text.splitlines())
    rows = [(reader.line_num, row) for row in reader if any(cell.strip() for cell in row)]
    if rows and [cell.strip().lower() for cell in rows[0][1][:4]] == list(_CLASS_TABLE_HEADER):
        raise SourceError(
            f"{name} is a class table (name,r,g,b), not a list of images: pass it with "
            f"{flag('classes')} and give the image folder as SRC"
        )
    split_col = None
    if rows and _is_header(rows):
        header = [cell.strip().lower() for cell in rows.pop(0)[1]]
        path_col = next((header.index(c) for c in _PATH_COLUMNS if c in header), None)
        label_col = next((header.index(c) for c in _LABEL_COLUMNS if c in header), None)
        split_col = next((header.index(c) for c in _SPLIT_COLUMNS if c in header), None)
        if path_col is None:
            path_col = _image_column(rows[0][1]) if rows else 0
        if label_col is None:
            taken = {path_col, split_col}
            label_col = next((i for i in range(len(header)) if i not in taken), 1)
    else:
        path_col = _image_column(rows[0][1]) if rows else 0
        label_col = 1 if path_col == 0 else 0
    result = []
    for number, row in rows:
        if len(row) <= max(path_col, label_col) or not row[label_col].strip():
            raise SourceError(f"{name} line {number}: expected path,label columns")
        split = row[split_col].strip() if split_col is not None and split_col < len(row) else ""
        if split and not split.isidentifier():
            raise SourceError(
                f"{name} line {number}: split {split!r} is not a name like train or val"
            )
        result.append((number, row[path_col].strip(), row[label_col].strip(), split))
    return result


def _is_header(rows: list[tuple[int, list[str]]]) -> bool:
    """A first row without an image path, naming known columns or followed by a row with one."""
    first = [cell.strip() for cell in rows[0][1]]
    if any(is_image(cell) for cell in first):
        return False
    known = set(_PATH_COLUMNS + _LABEL_COLUMNS + _SPLIT_COLUMNS)
    if any(cell.lower() in known for cell in first):
        return True
    return len(rows) > 1 and any(is_image(cell.strip()) for cell in rows[1][1])


def _image_column(row: list[str]) -> int:
    """The first column of a data row holding an image path (0 when none does)."""
    return next((i for i, cell in enumerate(row) if is_image(cell.strip())), 0)


def _list_samples(root: Path, name: str, rows: list[Row], found: Found) -> None:
    """Turn list rows into samples; labels that are image paths make an image,mask list."""
    labels = [label for _, _, label, _ in rows]
    segmentation = bool(labels) and all(is_image(label) for label in labels)
    index = {} if segmentation else _label_index(labels, found)
    if segmentation:
        found.task = "segmentation"
    listed = [
        raw for _, raw, label, _ in rows for raw in ((raw, label) if segmentation else (raw,))
    ]
    present = existing_files(root, [_list_path(raw)[0] for raw in listed])
    seen: dict[str, int] = {}
    for number, raw, label, split in rows:
        where = f"{name} line {number}"
        rel, problem = _list_path(raw)
        problem = f"{problem} ({where})" if problem else _listed_problem(rel, seen, present, where)
        if problem:
            found.rejected.append(Rejection(rel or raw, problem))
            continue
        seen[rel] = number
        if not segmentation:
            found.items.append((rel, split, None, index[label]))
            continue
        mask = _list_path(label)[0]
        if mask not in present:
            found.rejected.append(Rejection(rel, f"its mask {label} ({where}) is missing"))
            continue
        found.items.append((rel, split, mask, None))


def _listed_problem(rel: str, seen: dict[str, int], present: set[str], where: str) -> str | None:
    """Why a listed path is not packed (listed twice, not an image, missing), or None."""
    if rel in seen:
        return f"listed again ({where}); first listed on line {seen[rel]}"
    if not is_image(rel):
        return f"not an image file type ({ext(rel) or 'no extension'}; {where})"
    if rel not in present:
        return f"listed in {where} but missing"
    return None


def _label_index(labels: list[str], found: Found) -> dict[str, int]:
    """Map labels to class indices: integers as given, names by sorted position."""
    if all(label.isascii() and label.isdigit() for label in labels):
        top = max((int(label) for label in labels), default=-1)
        found.class_names = [str(i) for i in range(top + 1)]
        return {label: int(label) for label in labels}
    found.class_names = sorted(set(labels))
    return {label: i for i, label in enumerate(found.class_names)}


def _list_path(text: str) -> tuple[str, str | None]:
    """A listed path in POSIX form relative to the list's folder, or why it cannot be one."""
    if not text:
        return "", "empty path"
    posix = PurePosixPath(text.replace("\\", "/"))
    if posix.is_absolute() or ".." in posix.parts:
        return "", "path leaves the list file's folder; paths must be relative to it"
    return posix.as_posix(), None
