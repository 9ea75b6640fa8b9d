"""Class tables and the mapping of mask pixels (indices, palette entries, colours) to class ids.

Masks are labels, not pictures: palette masks are read as indices and, when the class table
has colours, mapped through each file's own palette; colour masks map through the table;
anything not in the table becomes the ignore index and is reported with its pixel count.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from . import storage
from .errors import LabelError
from .yaml_names import YAML_SUFFIXES, read_yaml_names

CLASS_DICT_NAMES = ("class_dict.csv",)
NAMES_FILE_NAMES = ("class_names.txt", "classes.txt", "labels.txt")
UNKNOWN_REPORT_LIMIT = 8  # distinct unknown values listed per file


@dataclass(frozen=True)
class ClassInfo:
    """One class: its index in the packed targets, its name and (optionally) its mask colour."""

    index: int
    name: str
    color: tuple[int, int, int] | None = None

    def to_json(self) -> dict:
        return {"index": self.index, "name": self.name, "color": self.color and list(self.color)}


# A mask value or colour and the class id it becomes (IGNORED: the ignore index).
IGNORED = -1
ValueMap = tuple[tuple[int, int], ...]
ColorMap = tuple[tuple[tuple[int, int, int], int], ...]


@dataclass(frozen=True)
class ClassTable:
    """An ordered list of classes and where it came from (a file, folder names, list labels).

    By default a mask value is its class id and a colour is its class's colour. A layout whose
    masks hold other ids (Cityscapes' label ids, ADE20K's shifted ones) or a class mapping
    (`--ignore-class`, `--class-map`) says instead which value (`value_map`) and which colour
    (`color_map`) becomes which class; values and colours absent from a map are unknown.
    """

    classes: tuple[ClassInfo, ...]
    source: str
    value_map: ValueMap | None = None
    color_map: ColorMap | None = None

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.classes]

    @property
    def has_colors(self) -> bool:
        if self.color_map is not None:
            return True
        return bool(self.classes) and all(c.color is not None for c in self.classes)

    def values(self) -> dict[int, int]:
        """Mask value -> class id (IGNORED for the ignore index)."""
        if self.value_map is not None:
            return dict(self.value_map)
        return {c.index: c.index for c in self.classes}

    def mapping_json(self) -> dict | None:
        """The value and colour maps as the manifest records them; None without maps."""
        if self.value_map is None and self.color_map is None:
            return None
        return {
            "values": {str(v): i for v, i in self.value_map or ()},
            "colors": [[*c, i] for c, i in self.color_map or ()],
        }

    def colors(self) -> dict[tuple[int, int, int], int]:
        """Mask colour -> class id (IGNORED for the ignore index)."""
        if self.color_map is not None:
            return dict(self.color_map)
        return {c.color: c.index for c in self.classes if c.color is not None}

    def __len__(self) -> int:
        return len(self.classes)

    @classmethod
    def from_names(cls, names: list[str], source: str) -> ClassTable:
        return cls(tuple(ClassInfo(i, n) for i, n in enumerate(names)), source)


def find_class_table(root: Path) -> Path | None:
    """The class_dict.csv or names file in a source root, if there is one (never classes.json)."""
    for name in CLASS_DICT_NAMES + NAMES_FILE_NAMES:
        if storage.is_file(root / name):
            return root / name
    return None


def read_class_table(path: Path) -> ClassTable:
    """Read a `name,r,g,b` CSV (row N = class N), a YAML's `names` (Ultralytics' data.yaml)
    or a names file (line N = class N)."""
    text = storage.read_bytes(path).decode("utf-8-sig").replace("\r\n", "\n")
    if path.suffix.lower() in YAML_SUFFIXES:
        return ClassTable.from_names(read_yaml_names(text, path.name), path.name)
    first = text.lstrip().splitlines()[0] if text.strip() else ""
    if path.suffix.lower() == ".csv" or first.replace(" ", "").lower().startswith("name,r,g,b"):
        return _read_class_dict(path, text)
    names = [line.strip() for line in text.splitlines() if line.strip()]
    if not names:
        raise LabelError(f"{path}: the class names file is empty")
    return ClassTable.from_names(names, path.name)


def _read_class_dict(path: Path, text: str) -> ClassTable:
    """Parse class_dict.csv; duplicate colours would make masks ambiguous, so they are refused."""
    rows = list(csv.reader(text.splitlines()))
    header = [h.strip().lower() for h in rows[0]]
    if header[:4] != ["name", "r", "g", "b"]:
        raise LabelError(f"{path}: expected a header 'name,r,g,b', found {','.join(rows[0])!r}")
    classes: list[ClassInfo] = []
    seen: dict[tuple[int, int, int], str] = {}
    for line_no, row in enumerate(rows[1:], start=2):
        if not row or not "".join(row).strip():
            continue
        try:
            name = row[0].strip()
            color = tuple(int(v) for v in row[1:4])
        except (ValueError, IndexError):
            raise LabelError(f"{path}:{line_no}: expected 'name,r,g,b', found {row!r}") from None
        if len(color) != 3 or not all(0 <= v <= 255 for v in color):
            raise LabelError(f"{path}:{line_no}: colour {row[1:4]} is not three values 0..255")
        if color in seen:
            raise LabelError(
                f"{path}:{line_no}: colour {color} is used by both {seen[color]!r} and {name!r}"
            )
        seen[color] = name
        classes.append(ClassInfo(len(classes), name, color))  # type: ignore[arg-type]
    if not classes:
        raise LabelError(f"{path}: no classes listed")
    return ClassTable(tuple(classes), path.name)


def preview_colors(count: int) -> np.ndarray:
    """Distinct display colours (the Pascal VOC bit-interleaved palette) for classes without one."""
    colors = np.zeros((count, 3), np.uint8)
    for i in range(count):
        c, r, g, b = i, 0, 0, 0
        for j in range(8):
            r |= ((c >> 0) & 1) << (7 - j)
            g |= ((c >> 1) & 1) << (7 - j)
            b |= ((c >> 2) & 1) << (7 - j)
            c >>= 3
        colors[i] = (r, g, b)
    return colors


def mask_dtype(num_classes: int | None, ignore_index: int) -> np.dtype:
    """uint8 while every class id and the ignore index fit in a byte, else uint16."""
    largest = max(ignore_index, (num_classes or 0) - 1)
    return np.dtype(np.uint8 if largest <= 255 else "<u2")


@dataclass
class MappedMask:
    """Class ids for one mask plus the values that were not in the table (value -> pixel count)."""

    ids: np.ndarray
    unknown: dict[str, int]


class LabelMapper:
    """Turns mask pixels into class ids; built once per worker (reusing its lookup table)."""

    def __init__(self, table: ClassTable | None, ignore_index: int, dtype: np.dtype) -> None:
        self.table = table
        self.ignore_index = ignore_index
        self.dtype = np.dtype(dtype)
        self.num_classes = len(table) if table is not None else None
        self._color_lut: np.ndarray | None = None
        self._values_lut: np.ndarray | None = None

    def map(self, values: np.ndarray, kind: str, palette: np.ndarray | None = None) -> MappedMask:
        """Map a mask's raw `values` by their `kind`: "index" (class ids), "palette" (indices
        into `palette`, an (N, 3) uint8 RGB table) or "color" ((H, W, 3) uint8 RGB)."""
        if kind == "color":
            return self._map_colors(values)
        if kind == "palette" and self.table is not None and self.table.has_colors:
            palette_ids = self._palette_ids(palette)
            return self._map_through(palette_ids, values, lambda v: _palette_key(palette, v))
        return self._map_indices(values)

    def _map_indices(self, values: np.ndarray) -> MappedMask:
        """Index masks hold class ids; values past the table (other than ignore) are unknown."""
        if self.table is not None and self.table.value_map is not None:
            return self._map_through(self._value_lut(), values, lambda v: f"index {v}")
        # Without a table every value that the packed masks can hold is its own class; one
        # they cannot hold (300 in 8-bit masks) is unknown, never wrapped around.
        limit = self.num_classes
        if limit is None:
            limit = np.iinfo(self.dtype).max + 1 if self.dtype.kind in "ui" else None
        if limit is None or values.max(initial=0) < limit:
            return MappedMask(values.astype(self.dtype, copy=False), {})
        bad = (values >= limit) & (values != self.ignore_index)
        if not bad.any():
            return MappedMask(values.astype(self.dtype, copy=False), {})
        unknown = _count_values(values[bad], lambda v: f"index {v}")
        ids = values.astype(self.dtype, copy=True)
        ids[bad] = self.ignore_index
        return MappedMask(ids, unknown)

    def _palette_ids(self, palette: np.ndarray) -> np.ndarray:
        """Class id + 1 of each palette entry, via its colour; 0 for entries not in the table."""
        ids = np.zeros(256, self._lut_dtype())
        ids[: len(palette)] = self._lut()[_color_keys(palette[np.newaxis])[0]][:256]
        return ids

    def _map_through(self, lut: np.ndarray, values: np.ndarray, describe) -> MappedMask:
        """Look `values` up in `lut` (class id + 1; 0: not in the table); values not in the
        table become the ignore index and are counted."""
        ids = np.take(lut, values)  # 2x faster than lut[values] for large tables
        bad = ids == 0
        ids -= 1  # class ids; all ones where bad
        if not bad.any():
            return MappedMask(ids.astype(self.dtype, copy=False), {})
        unknown = _count_values(values[bad], describe)
        ids[bad] = self.ignore_index
        return MappedMask(ids.astype(self.dtype, copy=False), unknown)

    def _map_colors(self, rgb: np.ndarray) -> MappedMask:
        if self.table is None or not self.table.has_colors:
            raise LabelError(
                "this mask holds colours, but there is no class table with colours "
                "(put a class_dict.csv with name,r,g,b in the source folder, or name one as the "
                "class table: --classes / classes=)"
            )
        return self._map_through(self._lut(), _color_keys(rgb), _describe_color_key)

    def _lut(self) -> np.ndarray:
        """A 2**24-entry colour -> class id + 1 table, 0 for colours not in the table (32 MB
        of address space, built once per worker; class ids are below the ignore index, so
        id + 1 fits 16 bits).

        Zero is the empty entry so that the table comes zero-filled from the kernel (calloc):
        building it touches only the pages its colours fall on (about 1 ms, 10 MB resident
        for CamVid's 12 colours with transparent huge pages), where filling it with a sentinel
        wrote all 32 MB (4-6 ms when huge pages are at hand, 60-300 ms in a new worker on a
        busy machine).
        """
        if self._color_lut is None:
            lut = np.zeros(1 << 24, self._lut_dtype())
            for color, index in self.table.colors().items():  # type: ignore[union-attr]
                lut[_color_key(*color)] = self._lut_entry(index)
            self._color_lut = lut
        return self._color_lut

    def _value_lut(self) -> np.ndarray:
        """Mask value -> class id + 1 (0: unknown) from the table's value map; the ignore
        index itself stays the ignore index unless the map says otherwise."""
        if self._values_lut is None:
            values = self.table.values()  # type: ignore[union-attr]
            lut = np.zeros(max(65536, max(values, default=0) + 1), self._lut_dtype())
            lut[self.ignore_index] = self.ignore_index + 1
            for value, index in values.items():
                lut[value] = self._lut_entry(index)
            self._values_lut = lut
        return self._values_lut

    def _lut_dtype(self) -> np.dtype:
        """uint16 while the ignore index + 1 fits it (always, but for ignore index 65535)."""
        return np.dtype(np.uint16 if self.ignore_index < 65535 else np.uint32)

    def _lut_entry(self, index: int) -> int:
        return (self.ignore_index if index == IGNORED else index) + 1


def _color_key(r: int, g: int, b: int) -> int:
    """The key of one colour: its bytes R, G, B read as a little-endian integer."""
    return r | (g << 8) | (b << 16)


def _color_keys(rgb: np.ndarray) -> np.ndarray:
    """(H, W, 3) uint8 RGB as (H, W) uint32 keys (see `_color_key`).

    OpenCV appends an alpha byte and the four bytes are read as one little-endian integer;
    masking the alpha off leaves the key: 30x faster than shifting and or-ing three planes.
    """
    rgba = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2RGBA)
    keys = rgba.view("<u4")[..., 0]
    keys &= 0xFFFFFF
    return keys


def _describe_color_key(key: int) -> str:
    return f"colour ({key & 255},{(key >> 8) & 255},{key >> 16})"


def _palette_key(palette: np.ndarray, index: int) -> str:
    r, g, b = (int(v) for v in palette[index]) if index < len(palette) else (-1, -1, -1)
    return f"palette index {index} = colour ({r},{g},{b})"


def _count_values(values: np.ndarray, describe) -> dict[str, int]:
    """The most frequent unknown values with their pixel counts, described for a human."""
    uniq, counts = np.unique(values, return_counts=True)
    order = np.argsort(-counts, kind="stable")[:UNKNOWN_REPORT_LIMIT]
    return {describe(int(uniq[i])): int(counts[i]) for i in order}
