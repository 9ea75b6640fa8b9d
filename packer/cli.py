"""Command line: `pack SRC ...` (also `packer pack`), `packer info`, `packer verify`."""

from __future__ import annotations

import json
import re
import signal
import sys
from pathlib import Path

import click

from . import bench, engines, packing, preview, report, storage
from .engines import cpu_count
from .errors import PackError
from .formats import FORMATS, FormatOption, all_options
from .imaging import INTERPOLATIONS, RESIZE_MODES
from .packing import DEFAULT_SHARD_BYTES
from .reading.dataset import open_dataset
from .sources import LAYOUTS, parse_split_spec
from .verify import verify

_UNITS = {
    "": 1,
    "b": 1,
    "k": 10**3,
    "kb": 10**3,
    "m": 10**6,
    "mb": 10**6,
    "g": 10**9,
    "gb": 10**9,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
}
FORMAT_OPTIONS = all_options()  # every format's own options, each with the formats taking it
FORMAT_OPTION_NAMES = tuple(spec.name for spec, _ in FORMAT_OPTIONS)


def parse_size(text: str) -> tuple[int, int]:
    """`480x352` -> (480, 352) as WIDTHxHEIGHT; `224` -> (224, 224)."""
    match = re.fullmatch(r"\s*(\d+)\s*(?:[xX×]\s*(\d+))?\s*", text)
    if not match or int(match[1]) == 0 or (match[2] and int(match[2]) == 0):
        raise click.BadParameter(f"{text!r} is not WIDTHxHEIGHT (e.g. 480x352) or one number")
    width = int(match[1])
    return width, int(match[2] or width)


def parse_bytes(text: str) -> int:
    """`256MB`, `1GiB`, `1000000` -> bytes."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    if not match or match[2].lower() not in _UNITS:
        raise click.BadParameter(f"{text!r} is not a size in bytes (e.g. 256MB, 1GiB, 1000000)")
    return int(float(match[1]) * _UNITS[match[2].lower()])


def _size_option(ctx, param, value):
    return None if value is None else parse_size(value)


def _bytes_option(ctx, param, value):
    return parse_bytes(value)


def _split_option(ctx, param, value):
    if value is None:
        return None
    try:
        return parse_split_spec(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _format_option(spec: FormatOption, names: tuple[str, ...]):
    """The click option of one format option; unset (None) unless given, so a format's
    default applies and an option given for another format is refused by the plan."""
    flag = "--" + spec.name.replace("_", "-")
    text = f"{', '.join(names)}: {spec.help}"
    if spec.flag:
        return click.option(flag, spec.name, is_flag=True, default=None, help=f"{text}.")
    kind = click.Choice(spec.choices) if spec.choices else click.IntRange(*spec.range)
    return click.option(flag, spec.name, type=kind, help=f"{text} [default: {spec.default}].")


def _format_options(command):
    """Add every registered format's options to `command`, in registry order."""
    for spec, names in reversed(FORMAT_OPTIONS):
        command = _format_option(spec, names)(command)
    return command


class Command(click.Command):
    """A click command whose user errors (any PackError) end as one `Error:` line and exit 1;
    anything else is a bug and keeps its traceback."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except PackError as exc:
            raise click.ClickException(str(exc)) from None


class Group(click.Group):
    """The `packer` group: its commands are `Command`s."""

    command_class = Command


class PathOrURL(click.Path):
    """A local path, checked as click.Path checks it, or a URL (s3://, gs://, ...), left to
    the storage backend to check when it is used."""

    def convert(self, value, param, ctx):
        if storage.is_url(value):
            return storage.as_path(value)
        return super().convert(value, param, ctx)


PACK_HELP = """Pack SRC (a folder or a .lst/.csv list) into already-decoded shards.

Without --out the pack goes to SRC-FORMAT/ beside SRC. Re-running an interrupted pack
finishes it; a finished identical pack is left as it is.
"""


@click.command(
    "pack", cls=Command, help=PACK_HELP, short_help="Pack SRC into already-decoded shards."
)
@click.argument("src", type=PathOrURL(exists=True, path_type=Path))
@click.option(
    "--out", type=PathOrURL(path_type=Path), help="Output folder or URL [default: SRC-FORMAT]."
)
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="npy", show_default=True)
@click.option(
    "--size",
    callback=_size_option,
    help="Output WIDTHxHEIGHT (e.g. 480x352; one number = square). "
    "Default: the first image's size.",
)
@click.option(
    "--resize",
    type=click.Choice(RESIZE_MODES),
    default="fill",
    show_default=True,
    help="fill: cover then centre-crop; fit: inside then pad; stretch; none: crop/pad.",
)
@click.option(
    "--interpolation",
    type=click.Choice(INTERPOLATIONS),
    default="auto",
    show_default=True,
    help="Image resampling (auto: area to shrink, cubic to enlarge). "
    "Masks always use nearest neighbour.",
)
@click.option("--pad-value", type=click.IntRange(0, 255), default=0, show_default=True)
@click.option(
    "--workers",
    type=click.IntRange(1),
    default=None,
    help=f"Worker processes [default: cores, here {cpu_count()}].",
)
@click.option(
    "--shard-size",
    default=str(DEFAULT_SHARD_BYTES),
    callback=_bytes_option,
    show_default=True,
    help="Bytes per shard (256MB, 1GiB, ...).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the sample order.")
@click.option(
    "--split",
    "split",
    callback=_split_option,
    help="Without split folders: e.g. train=0.9,val=0.1 (stable hash of each path).",
)
@click.option("--layout", type=click.Choice(LAYOUTS), default="auto", show_default=True)
@click.option(
    "--masks",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Folder of masks matching the images by file stem.",
)
@click.option("--mask-suffix", help="Suffix after the image stem in mask names (e.g. _L).")
@click.option(
    "--classes",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="class_dict.csv (name,r,g,b) or a names file (line N = class N).",
)
@click.option(
    "--ignore-index",
    type=click.IntRange(0, 65535),
    default=None,
    help="Class id for mask pixels outside the class table [default: 255; 65535 above 255 "
    "classes].",
)
@click.option(
    "--unknown-colors",
    type=click.Choice(["ignore", "error"]),
    default="ignore",
    show_default=True,
    help="Unknown mask colours: map to --ignore-index, or stop.",
)
@_format_options
@click.option("--strict", is_flag=True, help="Stop at the first input that cannot be packed.")
@click.option(
    "--max-rejects",
    type=click.IntRange(0),
    help="Stop once more than this many inputs could not be packed.",
)
@click.option(
    "--engine",
    type=click.Choice(tuple(engines.ENGINES)),
    default="local",
    show_default=True,
    help="Where the shard tasks run (local: a process pool on this machine).",
)
@click.option(
    "--address",
    help="ray: the cluster to join (auto, ray://HOST:PORT) [default: start a local Ray].",
)
@click.option(
    "--ray-cpus", type=click.IntRange(1), help="ray: CPUs of the local Ray [default: cores]."
)
@click.option(
    "--retries",
    type=click.IntRange(0),
    default=3,
    show_default=True,
    help="ray: tries again a shard task that failed (a lost worker, an I/O error).",
)
@click.option(
    "--force",
    is_flag=True,
    help="Break the lock of a remote --out whose holder stopped renewing it (stale).",
)
@click.option("--overwrite", is_flag=True, help="Replace a different pack already in --out.")
@click.option("--dry-run", is_flag=True, help="Show what would be packed, write nothing.")
@click.option("--progress/--no-progress", default=True, show_default=True)
def pack_command(
    src, out, fmt, workers, engine, overwrite, dry_run, progress, strict, max_rejects, **options
) -> None:
    engine_options = packing.engine_options_for(
        engine, options.pop("address"), options.pop("ray_cpus"), options.pop("retries")
    )
    force = options.pop("force")
    format_options = {k: options.pop(k) for k in FORMAT_OPTION_NAMES}
    options.update({k: v for k, v in format_options.items() if v is not None})
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        plan = packing.make_plan(src, out, fmt, options.pop("size"), **options)
        if dry_run:
            click.echo(report.dry_run(plan))
            return
        if plan.notes:
            click.echo("\n".join(f"note: {n}" for n in plan.notes), err=True)
        data = packing.execute(
            plan, workers, overwrite, progress, strict, max_rejects, engine, engine_options, force
        )
    except KeyboardInterrupt:
        click.echo(
            "\ninterrupted: finished shards are kept; run the same command again to resume",
            err=True,
        )
        sys.exit(130)
    click.echo(report.pack_summary(data, plan.out))


@click.group(cls=Group, help="Pack image datasets once; read them at memory speed.")
@click.version_option(package_name="packer")
def main() -> None:
    pass


main.add_command(pack_command)


@main.command("info")
@click.argument("path", type=PathOrURL(exists=True, file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print a machine-readable summary.")
def info_command(path: Path, as_json: bool) -> None:
    """Describe a packed dataset."""
    dataset = open_dataset(path)
    if as_json:
        click.echo(json.dumps(report.summary(dataset.manifest), indent=1, ensure_ascii=False))
    else:
        click.echo(report.info(dataset))


@main.command("verify", short_help="Re-hash every file against the manifest.")
@click.argument("path", type=PathOrURL(exists=True, file_okay=False, path_type=Path))
def verify_command(path: Path) -> None:
    """Re-hash every shard file against the manifest; exit 1 on any mismatch."""
    problems = verify(path, progress=sys.stderr.isatty())
    if problems:
        for p in problems:
            click.echo(f"FAIL {p}", err=True)
        sys.exit(1)
    click.echo(f"{path}: every file matches the manifest")


@main.command("bench", short_help="Reader img/s and GB/s, warm and cold, beside limits.")
@click.argument("path", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--split", default="train", show_default=True)
@click.option("--batch-size", type=click.IntRange(1), default=32, show_default=True)
@click.option(
    "--seconds",
    type=click.FloatRange(0.1),
    default=3.0,
    show_default=True,
    help="How long each warm measurement runs.",
)
@click.option(
    "--step-ms",
    type=click.FloatRange(0.01),
    help="Your model's step time: say whether the reader keeps the GPU fed.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
def bench_command(path: Path, split: str, batch_size: int, seconds: float, step_ms, as_json):
    """Reader throughput (warm and cold cache) beside memcpy and a naive decode baseline."""
    result = bench.run(path, split, batch_size, seconds, step_ms)
    click.echo(json.dumps(result.to_json(), indent=1) if as_json else bench.render(result))


@main.command("preview", short_help="A PNG grid of samples, masks in class colours.")
@click.argument("path", type=PathOrURL(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="PNG file to write.",
)
@click.option("--split", help="Split to show [default: the first].")
@click.option("-n", "--count", type=click.IntRange(1, 400), default=16, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
def preview_command(path: Path, out: Path, split: str | None, count: int, seed: int) -> None:
    """A grid of samples, masks overlaid in their class colours, for a check by eye."""
    written = preview.save(path, out, split=split, count=count, seed=seed)
    click.echo(f"wrote {written}")
