"""The Hugging Face datasets layout: Parquet files as the Hub lays them out, or a
`datasets.save_to_disk` folder; images inside the files, decoded once as any other image.

Hub Parquet: `data/<split>-00000-of-0000N.parquet` (the split from the file name) or
`<config>/<split>/*.parquet` (the split from the folder), one config at a time. `save_to_disk`:
Arrow files listed by `state.json` (with `dataset_info.json`), a `dataset_dict.json` naming
one such folder per split. Each row is a sample whose image (and label image) is a cell path
(`storage.cells`) the converter's workers read themselves; class labels and objects are read here,
column by column, never the images. Which column does what is `hf_columns`' choice, which a dry
run shows. SRC may be a URL storage reaches (`s3://`, `hf://datasets/<owner>/<name>`, ...): the
files are listed and the state files read through storage, a Parquet file by parts (its footer,
the columns read here: `storage.ranges`), an Arrow file whole into the local cache.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from .. import storage
from ..errors import SourceError
from ..flags import flag
from ..storage import cells, ranges
from .hf_columns import Columns, choose, features_of
from .hf_objects import row_objects
from .model import AnnotationOptions, Folder, Found, Rejection, Tree, folders, is_image, join
from .splits import SPLIT_NAMES

NAME = "hf-datasets"
LOOKED_FOR = (
    "Hugging Face datasets: data/<split>-00000-of-0000N.parquet, <config>/<split>/*.parquet, "
    "or a datasets.save_to_disk folder (state.json or dataset_dict.json with Arrow files)"
)
DESCRIPTION = (
    "Hugging Face datasets: Hub Parquet files (data/<split>-*.parquet, <config>/<split>/"
    "*.parquet) or a save_to_disk folder; images inside the files"
)
_SHARDED = re.compile(r"^(?P<split>.+?)-\d+-of-\d+\.(?:parquet|arrow)$")
_DEFAULT_CONFIGS = ("", "data", "default")


@dataclass(frozen=True)
class DataFile:
    """One Parquet or Arrow file of the dataset: where it is (relative to SRC), its split and
    config, and the features `dataset_info.json` gives for it (used when the file has none)."""

    rel: str
    split: str
    config: str = ""
    features: dict | None = None


def detect(tree: Tree, annotations: AnnotationOptions) -> str | None:
    """Why the source is a Hugging Face dataset (its Parquet or save_to_disk files), or None.
    Parquet files beside image files are not taken for one (`--layout hf-datasets` reads them)."""
    top = tree[""].files
    if "dataset_dict.json" in top:
        return "Hugging Face save_to_disk folder: dataset_dict.json"
    if "state.json" in top and any(name.endswith(".arrow") for name in top):
        return "Hugging Face save_to_disk folder: state.json with Arrow files"
    parquet = _parquet(tree)
    if parquet and not any(is_image(n) for _, names in folders(tree, "") for n in names):
        more = f" and {len(parquet) - 1} more" if len(parquet) > 1 else ""
        return f"Hugging Face Parquet files: {parquet[0]}{more}"
    return None


def scan(root: Path, tree: Tree, annotations: AnnotationOptions) -> Found:
    """Every row of every file as a sample, with the columns chosen for the task."""
    files = _files(root, tree)
    if not files:
        raise SourceError(f"{flag('layout', NAME)}: {root} holds no {LOOKED_FOR}")
    first = _open(root, files[0])
    columns = choose(first.schema, _features(first, files[0]), annotations.task, files[0].rel)
    task = "detection" if columns.objects else "segmentation" if columns.mask else "classification"
    found = Found(NAME, task, LOOKED_FOR, split_origin="dataset file names")
    found.class_names = columns.class_names
    counts = []
    for data_file in files:
        table = first if data_file is files[0] else _open(root, data_file)
        rows = _rows(table, data_file, columns)
        found.items.extend(rows)
        counts.append(f"{data_file.rel} ({len(rows):,} rows)")
    found.rejected.extend(_unlabelled(found, columns))
    shown = "; ".join(counts[:3]) + (
        f"; and {len(counts) - 3} more files" if len(counts) > 3 else ""
    )
    found.why = f"Hugging Face dataset: {shown}; columns {columns.described()}"
    found.notes.extend(columns.unused)
    return found


def scan_file(path: Path, annotations: AnnotationOptions) -> tuple[Path, Found]:
    """One Parquet file as SRC: its folder is the root, its split from its name (else none)."""
    path = path.resolve()
    return path.parent, scan(path.parent, {"": Folder(files=[path.name])}, annotations)


def _parquet(tree: Tree) -> list[str]:
    """Every Parquet file under SRC, by path."""
    return sorted(
        join(folder, name)
        for folder, names in folders(tree, "")
        for name in names
        if name.lower().endswith(".parquet")
    )


def _files(root: Path, tree: Tree) -> list[DataFile]:
    """The dataset's files with their splits: save_to_disk's state files, else Parquet's names;
    a folder holding several configs asks for one of them."""
    top = tree[""].files
    if "dataset_dict.json" in top:
        splits = _json(root, "dataset_dict.json").get("splits") or []
        return [f for split in splits for f in _saved(root, split, split)]
    if "state.json" in top:
        return _saved(root, "", "")
    found = [_parquet_file(rel) for rel in _parquet(tree)]
    configs = sorted({f.config for f in found})
    if len(configs) > 1:
        raise SourceError(
            f"{root} holds {len(configs)} configs ({', '.join(c or '(top)' for c in configs)}): "
            f"pack one at a time, with its folder as SRC (e.g. {root / (configs[-1] or '.')})"
        )
    return found


def _parquet_file(rel: str) -> DataFile:
    """A Parquet file's split and config from its path: `<split>-00000-of-00001.parquet` or
    `<split>.parquet` in a config folder (`data/` is the default one), else
    `<config>/<split>/<name>.parquet`."""
    folder, _, name = rel.rpartition("/")
    sharded = _SHARDED.match(name)
    stem = name.rsplit(".", 1)[0]
    if sharded or stem.lower() in SPLIT_NAMES or not folder:
        split = sharded["split"] if sharded else stem if stem.lower() in SPLIT_NAMES else ""
        return DataFile(rel, split, _config(folder))
    parent, _, split = folder.rpartition("/")
    return DataFile(rel, split, _config(parent))


def _config(folder: str) -> str:
    return "" if folder in _DEFAULT_CONFIGS else folder


def _saved(root: Path, folder: str, split: str) -> list[DataFile]:
    """The Arrow files a save_to_disk folder's state.json lists, with its dataset_info.json
    features and its split (state.json's `_split` when the folder is not a split's)."""
    state = _json(root, join(folder, "state.json"))
    info = _json(root, join(folder, "dataset_info.json"), missing_ok=True)
    split = split or state.get("_split") or ""
    names = [f.get("filename") for f in state.get("_data_files") or [] if isinstance(f, dict)]
    return [DataFile(join(folder, n), split, features=info.get("features")) for n in names if n]


def _json(root: Path, rel: str, missing_ok: bool = False) -> dict:
    """A small JSON file of a save_to_disk folder; SourceError naming it when unreadable."""
    try:
        data = json.loads(storage.read_text(root / rel))
    except FileNotFoundError:
        if missing_ok:
            return {}
        raise SourceError(f"cannot read {rel}: no such file") from None
    except (OSError, ValueError) as exc:
        raise SourceError(f"cannot read {rel}: {exc}") from None
    if not isinstance(data, dict):
        raise SourceError(f"{rel}: expected a JSON object")
    return data


class _Table:
    """A dataset file opened for its schema and the label columns (never the image bytes).
    A Parquet file's footer is read once; its columns through pyarrow's `ParquetReader`
    (`cells.parquet_reader`: without `pyarrow.parquet`'s imports, and `pq.read_table` would
    import `pyarrow.dataset`, half a second). A file at a URL:
    its footer and the chunks of each column asked for, fetched by ranged requests
    (`storage.ranges`); an Arrow file whole, into the local cache where the pack's workers
    find it."""

    def __init__(self, path: Path, rel: str) -> None:
        import pyarrow as pa

        self.rel, self.arrow, self.parquet, self.remote = rel, None, None, None
        try:
            state = storage.stat(path) if storage.is_url(path) else None
            if storage.is_url(path) and state is None:
                raise FileNotFoundError(2, "No such file or directory", str(path))
            if rel.endswith(".arrow"):
                local = ranges.cached(str(path), state, 0, state[0]) if state else path
                self.arrow = pa.ipc.open_stream(pa.memory_map(str(local))).read_all()
                self.schema, self.rows = self.arrow.schema, self.arrow.num_rows
            elif state:
                self.remote = (str(path), state)
                metadata = ranges.footer(str(path), *state)
                self.schema, self.rows = metadata.schema.to_arrow_schema(), metadata.num_rows
            else:
                self.parquet = cells.parquet_reader(str(path), extensions=True)  # as ParquetFile
                self.schema, self.rows = self.parquet.schema_arrow, self.parquet.metadata.num_rows
        except (OSError, ValueError) as exc:
            raise SourceError(f"cannot read {rel}: {exc}") from None

    def column(self, name: str) -> list:
        """One column's values, read alone."""
        if self.arrow is not None:
            return self.arrow.column(name).to_pylist()
        try:
            if self.remote is not None:
                table = ranges.read_columns(*self.remote, [name])
            else:
                leaves = ranges.leaves(self.parquet.metadata, name)
                table = self.parquet.read_all(column_indices=leaves, use_threads=False)
        except (OSError, ValueError) as exc:
            raise SourceError(f"cannot read column {name!r} of {self.rel}: {exc}") from None
        return table.column(name).to_pylist()


def _open(root: Path, data_file: DataFile) -> _Table:
    return _Table(root / data_file.rel, data_file.rel)


def _features(table: _Table, data_file: DataFile) -> dict:
    """The file's own features (schema metadata), else its dataset_info.json's."""
    return features_of(table.schema.metadata) or data_file.features or {}


def _rows(table: _Table, data_file: DataFile, columns: Columns) -> list:
    """The file's rows as Items: a cell path per image, the label or objects of each row."""
    names = set(table.schema.names)
    wanted = [c for c in (columns.image, columns.mask, columns.label, columns.objects) if c]
    missing = [c for c in wanted if c not in names]
    if missing:
        raise SourceError(
            f"{data_file.rel}: no column {missing[0]!r}, which the dataset's first file has; "
            "every file of a dataset holds the same columns"
        )
    rel, split = data_file.rel, data_file.split
    images = [cells.cell_key(rel, r, columns.image) for r in range(table.rows)]
    if columns.label:
        labels = table.column(columns.label)
        return [(i, split, None, label) for i, label in zip(images, labels, strict=True)]
    if columns.mask:
        masks = [cells.cell_key(rel, r, columns.mask) for r in range(table.rows)]
        return [(i, split, m, None) for i, m in zip(images, masks, strict=True)]
    classes = len(columns.class_names or [])
    values = table.column(columns.objects)
    return [
        (i, split, row_objects(v, cells.cell_key(rel, r, columns.objects), classes), None)
        for r, (i, v) in enumerate(zip(images, values, strict=True))
    ]


def _unlabelled(found: Found, columns: Columns) -> list[Rejection]:
    """Rows without a class (ClassLabel's -1, as Hub test splits often have), left out."""
    if not columns.label:
        return []
    kept, rejected = [], []
    classes = len(columns.class_names or [])
    for item in found.items:
        label = item[3]
        if isinstance(label, int) and 0 <= label < classes:
            kept.append(item)
        else:
            why = "no label" if label in (None, -1) else f"label {label} is not a class"
            rejected.append(Rejection(item[0], f"{why} in column {columns.label!r}"))
    found.items = kept
    return rejected
