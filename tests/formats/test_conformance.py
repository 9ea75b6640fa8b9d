"""Format conformance, once over every registered format: a shard written and read back exactly.

Each format writes a shard through its ChunkWriter (two chunks, the first with a rejected
input's gap) and `finalize`, and must read back every record exactly through `open_shard`;
the FileInfos must match the files; its options must refuse bad values and keep the defaults
the manifest records. No format module may import TensorFlow.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pkgutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from packer import formats
from packer.fields.presets import fields_for
from packer.formats import ShardJob, tfrecord_parse
from packer.options import Option, Options, declared, option
from packer.schema import Field

SHARD = "train-00000-of-00001"
SIZE = (6, 4)  # (W, H)
FIELDS = {
    "seg-u8": fields_for("segmentation", SIZE, np.dtype(np.uint8)),
    "seg-u16": fields_for("segmentation", SIZE, np.dtype("<u2")),
    "cls": fields_for("classification", SIZE, np.dtype(np.uint8)),
}
# The options each format records in the manifest when none is given: they must never change.
RECORDED_DEFAULTS = {
    "npy": {},
    "tfrecord": {"compression": "none", "index": False},
    "recordio": {"encoding": "raw", "quality": 95},
}
# Chunk 0 plans samples 0..3 and loses sample 2 to a rejection; chunk 1 plans samples 4..6.
CHUNKS = ((0, 0, [0, 1, 3]), (1, 4, [4, 5, 6]))


@dataclass(frozen=True)
class Chunk:
    """Stands in for the packing side's chunk task: a `formats.ChunkPosition`."""

    shard: str
    chunk: int
    start: int


def make_records(fields: tuple[Field, ...], count: int) -> list[dict[str, np.ndarray]]:
    """`count` random samples of `fields`, labels small enough for any format's label type."""
    rng = np.random.default_rng(7)
    records = []
    for _ in range(count):
        record = {}
        for f in fields:
            dtype = np.dtype(f.dtype)
            high = 10 if f.name == "labels" else np.iinfo(dtype).max
            record[f.name] = rng.integers(0, high, f.shape, dtype, endpoint=True)
        records.append(record)
    return records


def write_shard(root: Path, name: str, fields: tuple[Field, ...], options: dict):
    """Pack the CHUNKS' samples as one shard of format `name`: (shard entry, kept records)."""
    fmt = formats.get(name)
    records = make_records(fields, 7)
    part_dir = root / "parts"
    part_dir.mkdir()
    (root / "train").mkdir()
    kept = []
    for chunk, start, samples in CHUNKS:
        writer = fmt.ChunkWriter(part_dir, Chunk(SHARD, chunk, start), fields, options)
        for i in samples:
            writer.write(records[i])
            kept.append(records[i])
        writer.close()
    sources = tuple((f"src/{i}.png", None) for _, _, samples in CHUNKS for i in samples)
    chunks = tuple(chunk for chunk, _, _ in CHUNKS)
    job = ShardJob(root, SHARD, "train", chunks, fields, part_dir, options, sources)
    files = fmt.finalize(job)
    assert not list(part_dir.iterdir()), "finalize must remove the chunks' parts"
    shard = {"name": SHARD, "count": job.count, "files": [f.to_json() for f in files]}
    return shard, kept


@pytest.mark.parametrize("task", FIELDS)
@pytest.mark.parametrize("name", formats.FORMATS)
def test_a_shard_reads_back_exactly_what_was_written(tmp_path, name, task):
    fields = FIELDS[task]
    fmt = formats.get(name)
    shard, kept = write_shard(tmp_path, name, fields, dict(fmt.OPTIONS))
    assert shard["count"] == len(kept) == 6
    reader = fmt.open_shard(tmp_path, "train", shard, fields, dict(fmt.OPTIONS))
    try:
        for local in (np.arange(6), np.array([0, 2, 5]), np.array([3])):
            out = {f.name: np.empty((len(local), *f.shape), f.dtype) for f in fields}
            reader.read_into(local, out)
            for f in fields:
                expected = np.stack([kept[i][f.name] for i in local.tolist()])
                assert out[f.name].dtype == np.dtype(f.dtype)
                assert np.array_equal(out[f.name], expected), (f.name, local)
    finally:
        reader.close()


@pytest.mark.parametrize("name", formats.FORMATS)
def test_file_infos_match_the_files(tmp_path, name):
    fields = FIELDS["seg-u8"]
    shard, _ = write_shard(tmp_path, name, fields, dict(formats.get(name).OPTIONS))
    listed = set()
    for info in shard["files"]:
        path = tmp_path / info["path"]
        data = path.read_bytes()
        assert info["bytes"] == len(data), info["path"]
        assert info["sha256"] == hashlib.sha256(data).hexdigest(), info["path"]
        listed.add(path)
    assert set((tmp_path / "train").iterdir()) == listed  # no temporary or stray files


@pytest.mark.parametrize("name", formats.FORMATS)
def test_option_defaults_round_trip(name):
    fmt = formats.get(name)
    declared_defaults = formats.defaults(fmt.FORMAT_OPTIONS)
    assert dataclasses.asdict(fmt.FORMAT_OPTIONS()) == declared_defaults
    # every declared option is recorded by default, except the image encoding's, which npy and
    # tfrecord record only when given (their packs without it keep their manifests)
    assert set(declared_defaults) - set(fmt.OPTIONS) <= set(formats.encoding.NAMES)
    assert {k: v for k, v in declared_defaults.items() if k in fmt.OPTIONS} == fmt.OPTIONS
    recorded = json.loads(json.dumps(fmt.OPTIONS))  # as the manifest stores them
    assert recorded == fmt.OPTIONS
    fmt.check_options(recorded)
    if name in RECORDED_DEFAULTS:
        assert recorded == RECORDED_DEFAULTS[name]


def bad_value(spec: Option):
    """A value the option must refuse."""
    if spec.kind == "flag":
        return "yes"
    if spec.kind == "choice":
        return "no-such-" + spec.choices[0]
    return spec.range[1] + 1


@pytest.mark.parametrize(
    "name, spec",
    [(n, s) for n in formats.FORMATS for s in declared(formats.get(n).FORMAT_OPTIONS)],
    ids=lambda v: v if isinstance(v, str) else v.name,
)
def test_check_options_refuses_a_bad_value(name, spec):
    fmt = formats.get(name)
    with pytest.raises(ValueError, match=spec.name):
        fmt.check_options({**fmt.OPTIONS, spec.name: bad_value(spec)})


def test_option_declarations_are_checked():
    Option("level", 3, "a level", kind="int", range=(1, 9))
    for bad in (
        dict(default="yes", kind="flag"),
        dict(default="c", kind="choice", choices=("a", "b")),
        dict(default="a", kind="choice"),
        dict(default=0, kind="int", range=(1, 9)),
        dict(default=1.5, kind="int", range=(1, 9)),
    ):
        with pytest.raises(TypeError):
            Option("x", help="?", **bad)


def _options(name: str, low: int, help: str) -> type:
    """A format's options dataclass with one int option `level`."""
    level = option(5, help, kind="int", range=(low, 9))
    return dataclasses.make_dataclass(name, [("level", int, level)], bases=(Options,), frozen=True)


def test_formats_sharing_an_option_name_share_one_option(monkeypatch):
    modules = {
        "a": SimpleNamespace(FORMAT_OPTIONS=_options("A", 1, "a level")),
        "b": SimpleNamespace(FORMAT_OPTIONS=_options("B", 1, "b's")),
        "c": SimpleNamespace(FORMAT_OPTIONS=_options("C", 0, "c's")),
    }
    monkeypatch.setattr(formats, "get", modules.__getitem__)
    monkeypatch.setattr(formats, "FORMATS", ("a", "b"))
    assert formats.all_options() == [(declared(modules["a"].FORMAT_OPTIONS)[0], ("a", "b"))]
    monkeypatch.setattr(formats, "FORMATS", ("a", "c"))
    with pytest.raises(TypeError, match="level"):
        formats.all_options()


def test_the_command_line_offers_every_format_option(seg_src, tmp_path):
    from click.testing import CliRunner

    from packer.cli import pack_command

    runner = CliRunner()
    help_text = "".join(runner.invoke(pack_command, ["--help"]).output.split())  # unwrapped
    for spec, names in formats.all_options():
        assert f"--{spec.name}" in help_text
        assert "".join(f"{', '.join(names)}: {spec.help}".split()) in help_text
    base = [str(seg_src), "--out", str(tmp_path / "out"), "--dry-run", "--no-progress"]
    given = runner.invoke(pack_command, [*base, "--format", "tfrecord", "--compression", "gzip"])
    assert given.exit_code == 0, given.output  # an option of the chosen format
    both = runner.invoke(
        pack_command, [*base, "--format", "tfrecord", "--compression", "gzip", "--index"]
    )
    assert both.exit_code != 0 and "--index with --compression gzip" in both.output
    foreign = runner.invoke(pack_command, [*base, "--format", "npy", "--compression", "gzip"])
    assert foreign.exit_code != 0 and "do not apply to --format npy" in foreign.output
    alone = runner.invoke(pack_command, [*base, "--format", "npy", "--quality", "80"])
    assert alone.exit_code != 0 and "applies only with --encoding jpeg" in alone.output
    out_of_range = runner.invoke(pack_command, [*base, "--format", "recordio", "--quality", "0"])
    assert out_of_range.exit_code == 2  # refused by click, before any planning
    assert not (tmp_path / "out").exists()


def test_no_format_module_imports_tensorflow():
    modules = sorted(m.name for m in pkgutil.iter_modules(formats.__path__))
    assert set(formats.FORMATS) <= set(modules)
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module('packer.formats.' + m)\n"
        "print('tensorflow' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("task", FIELDS)
def test_tfrecord_example_decoder_parses_the_shard(tmp_path, task):
    tf = pytest.importorskip("tensorflow")
    if "tfrecord" not in formats.FORMATS:
        pytest.skip("no tfrecord format")
    fmt = formats.get("tfrecord")
    fields = FIELDS[task]
    _, kept = write_shard(tmp_path, "tfrecord", fields, dict(fmt.OPTIONS))
    path = tmp_path / "train" / fmt.file_name(SHARD, fmt.OPTIONS)
    batches = (
        tf.data.TFRecordDataset(str(path)).batch(4).map(tfrecord_parse.example_decoder(fields))
    )
    got = {f.name: [] for f in fields}
    for batch in batches:
        for f in fields:
            got[f.name].append(batch[f.name].numpy())
    for f in fields:
        arrays = np.concatenate(got[f.name])
        assert arrays.dtype == np.dtype(f.dtype).newbyteorder("=")
        assert np.array_equal(arrays, np.stack([r[f.name] for r in kept])), f.name
