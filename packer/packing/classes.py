"""The pack's classes: the layout's own table, a class file or folder names, then the user's
mapping (`ignore_class`, `class_map`) applied to it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from .. import storage
from ..errors import PackError, SourceError
from ..flags import flag
from ..labels import IGNORED, ClassTable, find_class_table, read_class_table
from ..relabel import ClassMapping, read_class_map, relabel, relabel_ids
from ..sources import SourceScan


def class_mapping(ignore_class: Iterable[str] | str, class_map) -> ClassMapping:
    """The user's class mapping: names to ignore and a class-map file's rows."""
    ignore = (ignore_class,) if isinstance(ignore_class, str) else tuple(ignore_class)
    if class_map is None:
        return ClassMapping(ignore)
    return ClassMapping(ignore, read_class_map(class_map), storage.as_path(class_map).name)


def relabelled(
    found: SourceScan, table: ClassTable | None, mapping: ClassMapping, notes: list[str]
) -> ClassTable:
    """The class table after `mapping`; classification labels follow it, and samples of an
    ignored class are left out."""
    if table is None:
        raise PackError(
            f"{flag('ignore_class')} and {flag('class_map')} need class names, but {found.root} "
            f"has no class table; name one with {flag('classes')}"
        )
    new = relabel(table, mapping)
    notes.append(f"classes mapped: {len(table)} -> {len(new)} ({', '.join(new.names[:8])}...)")
    if found.task == "classification":
        ids = relabel_ids(table, new)
        kept = [replace(s, label=ids[s.label]) for s in found.samples if ids[s.label] != IGNORED]
        notes.append(f"left out {len(found.samples) - len(kept)} samples of ignored classes")
        found.samples = kept
        new = ClassTable(new.classes, new.source)
    return new


def class_table(found: SourceScan, classes, layout: str, notes: list[str]) -> ClassTable | None:
    """The class table: `classes`, else the layout's own, else a file in the source root,
    else folder/list names."""
    if classes is None and found.table is not None:
        notes.append(f"classes from the {found.layout} layout: {len(found.table)}")
        return found.table
    path = storage.as_path(classes) if classes is not None else find_class_table(found.root)
    if path is not None:
        table = read_class_table(path)
        notes.append(f"classes from {path.name}: {len(table)}")
        if found.class_names is not None and len(table) < len(found.class_names):
            raise PackError(
                f"{path} lists {len(table)} classes, the source has "
                f"{len(found.class_names)}: {', '.join(found.class_names)}"
            )
        if found.task == "classification" and table.has_colors and layout == "auto":
            raise SourceError(
                f"{path.name} is a colour table for segmentation masks, but {found.root} has "
                f"no image/mask folder pairs, only class folders "
                f"({', '.join(found.class_names or [])}): if those hold masks, their images "
                f"are missing. To pack them as classes anyway, pass "
                f"{flag('layout', 'class-folders')}"
            )
        return table
    if found.class_names is not None:
        return ClassTable.from_names(
            list(found.class_names),
            "folder names" if found.layout == "class-folders" else "list labels",
        )
    if found.fields is None:  # a list with columns without class-like columns has no classes
        notes.append("no class table found: masks are read as class indices, classes are counted")
    return None
