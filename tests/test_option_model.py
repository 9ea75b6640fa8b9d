"""The option model (`packer.options`): each reader's keywords, written in its own `def`, are
exactly its frozen options dataclass's fields (names, order, defaults, types), its docstring
lists them with their help, and the reader passes one typed value of them on; the pack's flags
and keywords come from the same fields, and a wrong value reads alike from Python and the CLI."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
from click.testing import CliRunner

import packer
import packer.tf
from packer.cli import pack_command
from packer.errors import PackError
from packer.keras import PackedSequence, SequenceOptions
from packer.options import declared
from packer.packing.options import PlanOptions, RunOptions, by_stage
from packer.reading.loader import Loader
from packer.reading.options import BATCH_SIZE, SPLIT, LoaderOptions, ReaderOptions
from packer.tf import TfOptions
from packer.torch import IterableOptions, PackedDataset, PackedIterable, TorchOptions

READERS = {
    Loader: LoaderOptions,
    PackedSequence: SequenceOptions,
    packer.tf.dataset: TfOptions,
    PackedDataset: TorchOptions,
    PackedIterable: IterableOptions,
}


@pytest.mark.parametrize("reader", READERS, ids=lambda r: r.__qualname__)
def test_a_readers_keywords_are_its_options_fields(reader):
    declared = READERS[reader]
    params = list(inspect.signature(reader).parameters.values())
    positional = [(p.name, p.default, p.kind) for p in params[:3]]
    assert positional == [
        ("path", inspect.Parameter.empty, inspect.Parameter.POSITIONAL_OR_KEYWORD),
        ("split", SPLIT, inspect.Parameter.POSITIONAL_OR_KEYWORD),
        ("batch_size", BATCH_SIZE, inspect.Parameter.POSITIONAL_OR_KEYWORD),
    ]
    keywords = [(p.name, p.default, p.annotation) for p in params[3:]]
    fields = [(f.name, f.default, f.type) for f in dataclasses.fields(declared)]
    assert keywords == fields  # same names, order, defaults and written types
    assert {p.kind for p in params[3:]} == {inspect.Parameter.KEYWORD_ONLY}  # no **kwargs


@pytest.mark.parametrize("reader", READERS, ids=lambda r: r.__qualname__)
def test_a_readers_docstring_lists_each_option_with_its_help(reader):
    doc = inspect.getdoc(reader)
    listed = doc.split("\nOptions:\n", 1)[1]
    for o in declared(READERS[reader]):
        entry = listed.split(f"- {o.name}={o.default!r}", 1)[1].split("\n- ", 1)[0]
        assert " ".join(entry.split()).endswith(" ".join(o.help.split()))
    assert listed.startswith("- split='train': ") and "\n- batch_size=32: " in listed


def test_every_reader_shares_the_readers_options_in_order():
    shared = [f.name for f in dataclasses.fields(ReaderOptions)]
    for options in READERS.values():
        assert [f.name for f in dataclasses.fields(options)][: len(shared)] == shared
        assert issubclass(options, ReaderOptions)
    for options in (SequenceOptions, TorchOptions, IterableOptions):
        assert issubclass(options, LoaderOptions)


def test_a_default_declared_again_keeps_the_help_and_says_how_it_differs():
    loader = {o.name: o for o in declared(LoaderOptions)}
    torch_ = {o.name: o for o in declared(TorchOptions)}
    assert torch_["rank"].default is None and "torch.distributed" in torch_["rank"].shown
    assert torch_["rank"].help == loader["rank"].help
    assert "torch.distributed's rank" in inspect.getdoc(PackedDataset)
    assert dataclasses.fields(IterableOptions)[0].default == "windows"


def test_options_are_frozen_and_built_from_a_calls_arguments():
    o = LoaderOptions.of({**{f.name: f.default for f in dataclasses.fields(LoaderOptions)}})
    assert o == LoaderOptions()
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.seed = 3  # type: ignore[misc]


def test_a_reader_passes_one_typed_value_of_its_options_on(seg_src, tmp_path):
    out = tmp_path / "npy"
    packer.pack(seg_src, out=out, size=(32, 24))
    seq = PackedSequence(out, "train", 4, seed=7, workers=1, shuffle=False)
    assert isinstance(seq.loader.options, SequenceOptions)
    assert (seq.loader.options.seed, seq.loader.options.shuffle) == (7, False)
    torch_ds = PackedDataset(out, "train", 4, rank=None)
    assert isinstance(torch_ds.loader.options, TorchOptions)
    assert (torch_ds.loader.options.rank, torch_ds.loader.options.world_size) == (0, 1)


def test_the_packs_flags_and_keywords_come_from_the_same_fields():
    flags = {p.name: p for p in pack_command.params}
    keywords = inspect.signature(packer.pack).parameters
    for options in (PlanOptions, RunOptions):
        for o in declared(options):
            assert o.name in keywords and keywords[o.name].default == o.default
            assert o.name in flags and f"--{o.name.replace('_', '-')}" in flags[o.name].opts
            assert flags[o.name].help == o.help


def test_a_run_and_a_plan_resolve_to_typed_values_with_one_line_errors():
    run = RunOptions.resolve({"workers": 2, "strict": True})
    assert (run.workers, run.strict, run.engine) == (2, True, "local")
    with pytest.raises(PackError, match=r"^workers=0: expected an integer, 1 or more$"):
        RunOptions.resolve({"workers": 0})
    with pytest.raises(PackError, match=r"^resize='cover': choose one of 'fill', "):
        PlanOptions.resolve({"resize": "cover"})


def test_a_wrong_value_reads_the_same_from_python_and_the_command_line(seg_src, tmp_path):
    with pytest.raises(PackError) as raised:
        packer.pack(seg_src, out=tmp_path / "py", shard_size=0)
    result = CliRunner().invoke(
        pack_command, [str(seg_src), "--out", str(tmp_path / "cli"), "--shard-size", "0"]
    )
    assert result.exit_code == 1
    python = str(raised.value).replace("shard_size=0", "--shard-size 0")
    assert result.output.strip() == f"Error: {python}"


@pytest.mark.parametrize("reader", READERS, ids=lambda r: r.__qualname__)
def test_a_misspelt_reader_keyword_names_the_nearest_one(reader, tmp_path):
    with pytest.raises(
        TypeError, match=r"unexpected keyword argument 'shufle'; did you mean shuffle\?$"
    ):
        reader(tmp_path / "no-pack", shufle=False)
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'colour'$"):  # nothing near
        reader(tmp_path / "no-pack", colour=1)


def test_a_misspelt_keyword_names_the_reader_by_its_public_path(tmp_path):
    with pytest.raises(TypeError, match=r"^tf\.dataset\(\) got an unexpected keyword"):
        packer.tf.dataset(tmp_path / "no-pack", shufle=False)


@pytest.mark.parametrize("reader", READERS, ids=lambda r: r.__qualname__)
@pytest.mark.parametrize(
    "given, message",
    [
        ({"shuffle": "sometimes"}, r"^shuffle='sometimes': choose one of True, False, 'global'"),
        ({"uneven": "spread"}, r"^uneven='spread': choose one of 'pad', 'drop', 'allow'$"),
        ({"normalize": "imagenet"}, r"^normalize='imagenet': choose one of 'unit', 'dataset'$"),
        ({"one_hot": "yes"}, r"^one_hot='yes': expected True or False$"),
    ],
    ids=lambda v: next(iter(v)) if isinstance(v, dict) else "",
)
def test_every_reader_checks_its_values_where_they_are_declared(reader, given, message, tmp_path):
    # before the path is opened: the same one-line error, whichever reader is given it
    with pytest.raises(ValueError, match=message) as raised:
        reader(tmp_path / "no-pack", **given)
    assert isinstance(raised.value, PackError)


def test_a_readers_own_choices_narrow_the_shared_ones(tmp_path):
    with pytest.raises(
        ValueError, match=r"^shuffle='windows': choose one of True, False, 'global'$"
    ):
        packer.tf.dataset(tmp_path / "no-pack", shuffle="windows")  # tf.data shuffles uniformly
    with pytest.raises(ValueError, match=r"^layout='nchw': choose one of 'NHWC', 'NCHW'$"):
        PackedDataset(tmp_path / "no-pack", layout="nchw")


def test_a_packs_keywords_are_split_by_stage_once():
    stages = by_stage({"workers": 2, "resize": "fit", "compression": "gzip"})
    assert stages.plan == {"resize": "fit", "compression": "gzip"}
    assert (stages.run.workers, stages.run.engine) == (2, "local")
    assert stages.engine == {}  # the local engine has no options of its own
    with pytest.raises(PackError, match=r"^retries applies to engine='ray' only$"):
        by_stage({"retries": 5})
    with pytest.raises(PackError, match=r"^unknown option wokers; did you mean workers\?$"):
        by_stage({"wokers": 2})
