"""The list layout: an im2rec .lst or a path,label CSV, paths relative to the list's folder.

Labels that are image paths make an image,mask list (segmentation); otherwise they are class
indices or class names (classification).
"""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path, PurePosixPath

from ..errors import SourceError
from .model import Found, Rejection, Tree, ext, is_image
from .walk import existing_files, read_text, resolve

_LIST_EXTENSIONS = (".lst", ".csv")
_PATH_COLUMNS = ("path", "image", "filename", "file", "filepath", "image_path", "img")
_LABEL_COLUMNS = ("label", "class", "class_name", "category", "target", "mask", "y")


def scan_list_file(
    path: Path, layout: str, masks: str | os.PathLike | None, mask_suffix: str | None
) -> tuple[Path, Found]:
    """Read an im2rec .lst or a CSV list; the paths inside are relative to the list's folder."""
    kind = ext(path.name)
    if kind not in _LIST_EXTENSIONS:
        raise SourceError(f"{path}: SRC must be a folder or a .lst/.csv list file")
    if layout not in ("auto", "list"):
        raise SourceError(f"--layout {layout} needs a folder as SRC, not the list file {path.name}")
    if masks is not None or mask_suffix is not None:
        raise SourceError("--masks/--mask-suffix do not apply to a list file")
    text = read_text(path, str(path), encoding="utf-8-sig")
    rows = _lst_rows(text, path.name) if kind == ".lst" else _csv_rows(text, path.name)
    root = resolve(path.parent)
    found = Found(f"list ({kind})", "classification", f"the files listed in {path.name}")
    _list_samples(root, path.name, rows, found)
    return root, found


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


def _lst_rows(text: str, name: str) -> list[tuple[int, str, str]]:
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
        rows.append((number, columns[2].strip(), _lst_label(columns[1], name, number)))
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


def _csv_rows(text: str, name: str) -> list[tuple[int, str, str]]:
    """Parse path,label CSV rows (header optional) into (line, path, label)."""
    reader = csv.reader(text.splitlines())
    rows = [(reader.line_num, row) for row in reader if any(cell.strip() for cell in row)]
    path_col, label_col = 0, 1
    if rows and not is_image(rows[0][1][0].strip()):  # the first row is a header
        header = [cell.strip().lower() for cell in rows.pop(0)[1]]
        path_col = next((header.index(c) for c in _PATH_COLUMNS if c in header), 0)
        label_col = next((header.index(c) for c in _LABEL_COLUMNS if c in header), 1)
    result = []
    for number, row in rows:
        if len(row) <= max(path_col, label_col) or not row[label_col].strip():
            raise SourceError(f"{name} line {number}: expected path,label columns")
        result.append((number, row[path_col].strip(), row[label_col].strip()))
    return result


def _list_samples(root: Path, name: str, rows: list[tuple[int, str, str]], found: Found) -> None:
    """Turn list rows into samples; labels that are image paths make an image,mask list."""
    labels = [label for _, _, label in rows]
    segmentation = bool(labels) and all(is_image(label) for label in labels)
    index = {} if segmentation else _label_index(labels, found)
    if segmentation:
        found.task = "segmentation"
    listed = [raw for _, raw, label in rows for raw in ((raw, label) if segmentation else (raw,))]
    present = existing_files(root, [_list_path(raw)[0] for raw in listed])
    seen: dict[str, int] = {}
    for number, raw, label in rows:
        where = f"{name} line {number}"
        rel, problem = _list_path(raw)
        problem = f"{problem} ({where})" if problem else _listed_problem(rel, seen, present, where)
        if problem:
            found.rejected.append(Rejection(rel or raw, problem))
            continue
        seen[rel] = number
        if not segmentation:
            found.items.append((rel, "", None, index[label]))
            continue
        mask = _list_path(label)[0]
        if mask not in present:
            found.rejected.append(Rejection(rel, f"its mask {label} ({where}) is missing"))
            continue
        found.items.append((rel, "", mask, None))


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
