"""Command line: `pack SRC ...` (also `packer pack`), `packer info`, `verify`, `bench`, `preview`.

Every command is a `Command`: a user's mistake (any PackError) ends as one `Error:` line and
exit 1, with messages worded for the command line (`--shard-size`, not `shard_size=`).
"""

from __future__ import annotations

import json
import shlex
import signal
import sys
from pathlib import Path

import click

from . import engines, packing, report, storage
from .cli_params import (
    FORMAT_OPTION_NAMES,
    bytes_option,
    existing,
    format_options,
    location,
    size_option,
    split_option,
)
from .engines import cpu_count
from .errors import PackError
from .flags import command_line_wording
from .formats import FORMATS
from .imaging import INTERPOLATIONS, RESIZE_MODES
from .packing import preflight
from .packing.update import unfinished
from .reading.dataset import open_dataset
from .sources import LAYOUTS
from .sources.model import CROWDS, OVERLAPS
from .verify import verify

SHOW_DEFAULTS = {"show_default": True}


class Command(click.Command):
    """A click command whose user errors (any PackError) end as one `Error:` line and exit 1;
    anything else is a bug and keeps its traceback. It keeps the arguments it was given, so
    a pack can record the command that started it."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["packer.args"] = list(args)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context):
        try:
            with command_line_wording():
                return super().invoke(ctx)
        except PackError as exc:
            raise click.ClickException(str(exc)) from None


class Group(click.Group):
    """The `packer` group: its commands are `Command`s."""

    command_class = Command


def command_line(ctx: click.Context) -> str:
    """The command as typed: program, subcommand and arguments."""
    return shlex.join([*ctx.command_path.split(), *ctx.meta.get("packer.args", [])])


PACK_HELP = """Pack SRC (a folder or a .lst/.csv list) into already-decoded shards.

Without --out the pack goes to SRC-FORMAT/ beside SRC. Re-running an interrupted pack
finishes it; re-running a finished one does nothing, or, when sources were added, removed or
changed since, packs again only the shards they touch (--no-update leaves it as it is).
"""


class Terminated(KeyboardInterrupt):
    """SIGTERM stops a pack as Ctrl-C does (same clean-up), exiting 143 as a shell expects."""


def _terminated(signum, frame) -> None:
    raise Terminated


@click.command(
    "pack",
    cls=Command,
    help=PACK_HELP,
    short_help="Pack SRC into already-decoded shards.",
    context_settings=SHOW_DEFAULTS,
)
@click.argument("src", callback=existing)
@click.option(
    "--out",
    callback=location,
    help="Output folder (inside SRC it is left out of the scan).",
    show_default="SRC-FORMAT beside SRC",
)
@click.option(
    "--format", "fmt", type=click.Choice(FORMATS), default="npy", help="Shard file format."
)
@click.option(
    "--size",
    callback=size_option,
    help="Output WIDTHxHEIGHT (e.g. 480x352; one number = square).",
    show_default="the images' size when they share one, else the median width and height "
    f"rounded to multiples of {preflight.SIZE_STEP}",
)
@click.option(
    "--resize",
    type=click.Choice(RESIZE_MODES),
    default="fill",
    help="fill: cover then centre-crop; fit: inside then pad; stretch; none: crop/pad.",
)
@click.option(
    "--interpolation",
    type=click.Choice(INTERPOLATIONS),
    default="auto",
    help="Image resampling (auto: area to shrink, cubic to enlarge). "
    "Masks always use nearest neighbour.",
)
@click.option(
    "--pad-value",
    type=click.IntRange(0, 255),
    default=0,
    help="Image padding value for fit and none (masks pad with the ignore index).",
)
@click.option(
    "--workers",
    type=click.IntRange(1),
    default=None,
    help="Worker processes.",
    show_default=f"the cores, here {cpu_count()}",
)
@click.option(
    "--shard-size",
    default="256MB",
    callback=bytes_option,
    help="Bytes per shard (e.g. 256MB, 1GiB, 1000000).",
)
@click.option("--seed", type=int, default=0, help="Seed of the sample order.")
@click.option(
    "--split",
    "split",
    callback=split_option,
    help="Without split folders: e.g. train=0.9,val=0.1 (stable hash of each path).",
    show_default="split folders, else all in train",
)
@click.option(
    "--layout",
    type=click.Choice(LAYOUTS),
    default="auto",
    help="Source layout; auto detects it.",
)
@click.option(
    "--masks",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Folder of masks matching the images by file stem.",
    show_default="detected mask folders",
)
@click.option(
    "--mask-suffix",
    help="Suffix after the image stem in mask names (e.g. _L).",
    show_default="detected",
)
@click.option(
    "--classes",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="class_dict.csv (name,r,g,b) or a names file (line N = class N).",
    show_default="a class_dict.csv or names file in SRC, else folder names or mask values",
)
@click.option(
    "--coco",
    multiple=True,
    help="COCO instances JSON for the images in SRC; SPLIT=FILE for several "
    "(--coco train=a.json --coco val=b.json).",
    show_default="annotations/instances_<split>.json in SRC",
)
@click.option(
    "--overlap",
    type=click.Choice(OVERLAPS),
    default="ignore",
    help="COCO: pixels of two or more instances become --ignore-index, or the later one's class.",
)
@click.option(
    "--crowd",
    type=click.Choice(CROWDS),
    default="ignore",
    help="COCO: crowd regions become --ignore-index, or their category's class.",
)
@click.option(
    "--ignore-class",
    multiple=True,
    help="A class whose pixels become --ignore-index; the rest keep their order (repeatable).",
    show_default="none",
)
@click.option(
    "--class-map",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="CSV of source,target rows: a class name, mask value or 'r g b' colour -> a class "
    "name (renames, merges) or 'ignore'.",
    show_default="none",
)
@click.option(
    "--root",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Folder the relative paths in a .lst/.csv list start from.",
    show_default="the list's folder",
)
@click.option(
    "--ignore-index",
    type=click.IntRange(0, 65535),
    default=None,
    help="Class id for mask pixels outside the class table.",
    show_default="255; 65535 above 255 classes",
)
@click.option(
    "--unknown-colors",
    type=click.Choice(["ignore", "error"]),
    default="ignore",
    help="Unknown mask colours: map to --ignore-index, or stop.",
)
@format_options
@click.option(
    "--strict",
    is_flag=True,
    show_default="off",
    help="Stop at the first input that cannot be packed.",
)
@click.option(
    "--max-rejects",
    type=click.IntRange(0),
    help="Stop once more than this many inputs could not be packed.",
    show_default="no limit",
)
@click.option(
    "--engine",
    type=click.Choice(tuple(engines.ENGINES)),
    default="local",
    help="Where the shard tasks run (local: a process pool on this machine).",
)
@click.option(
    "--address",
    help="ray: the cluster to join (auto, ray://HOST:PORT).",
    show_default="start a local Ray",
)
@click.option(
    "--ray-cpus",
    type=click.IntRange(1),
    help="ray: CPUs of the local Ray.",
    show_default="--workers, else the cores",
)
@click.option(
    "--retries",
    type=click.IntRange(0),
    default=3,
    help="ray: tries again a shard task that failed (a lost worker, an I/O error).",
)
@click.option(
    "--overwrite",
    is_flag=True,
    show_default="off",
    help="Replace a different pack already in --out.",
)
@click.option(
    "--update/--no-update",
    default=True,
    help="Re-pack the shards whose sources were added, removed or changed since a finished "
    "pack (--no-update: leave it as it is and say what changed).",
)
@click.option(
    "--force",
    is_flag=True,
    show_default="off",
    help="Go ahead despite a safety check: an output that needs far more than the free "
    "space, or the stale lock of a remote --out (its holder stopped renewing it).",
)
@click.option(
    "--dry-run",
    is_flag=True,
    show_default="off",
    help="Show what would be packed and what would be rejected; write nothing.",
)
@click.option("--progress/--no-progress", default=True, help="Show a progress bar on a terminal.")
@click.pass_context
def pack_command(
    ctx,
    src,
    out,
    fmt,
    workers,
    engine,
    overwrite,
    update,
    force,
    dry_run,
    progress,
    strict,
    max_rejects,
    **options,
) -> None:
    engine_options = packing.engine_options_for(
        engine, options.pop("address"), options.pop("ray_cpus"), options.pop("retries")
    )
    options["coco"] = options["coco"] or None
    given = {k: options.pop(k) for k in FORMAT_OPTION_NAMES}
    options.update({k: v for k, v in given.items() if v is not None})
    signal.signal(signal.SIGTERM, _terminated)
    command = command_line(ctx)
    try:
        plan = packing.make_plan(src, out, fmt, options.pop("size"), **options)
        if dry_run:
            predicted = preflight.predict_rejections(
                plan.scan.root, plan.scan.samples, plan.config.max_pixels
            )
            click.echo(report.dry_run(plan, predicted))
            return
        if plan.notes:
            click.echo("\n".join(f"note: {n}" for n in plan.notes), err=True)
        data = packing.execute(
            plan,
            workers,
            overwrite,
            progress and sys.stderr.isatty(),  # no bar of `\r` updates in a file or a pipe
            strict,
            max_rejects,
            engine,
            engine_options=engine_options,
            update=update,
            force=force,
            command=command,
            warn=lambda text: click.echo(f"warning: {text}", err=True),
        )
    except KeyboardInterrupt as stop:
        click.echo(
            f"\ninterrupted: finished shards are kept; run the same command again to resume:\n"
            f"  {command}",
            err=True,
        )
        sys.exit(128 + (signal.SIGTERM if isinstance(stop, Terminated) else signal.SIGINT))
    click.echo(report.pack_summary(data, plan))


@click.group(cls=Group, help="Pack image datasets once; read them at memory speed.")
@click.version_option(package_name="packer")
def main() -> None:
    pass


main.add_command(pack_command)


@main.command("info", context_settings=SHOW_DEFAULTS)
@click.argument("path", callback=existing)
@click.option(
    "--json", "as_json", is_flag=True, show_default="off", help="Print a machine-readable summary."
)
def info_command(path: str, as_json: bool) -> None:
    """Describe a packed dataset (or how far an unfinished pack got)."""
    state = unfinished(storage.as_path(path))
    if state is not None:
        click.echo(json.dumps(state, indent=1) if as_json else report.unfinished(path, state))
        return
    dataset = open_dataset(path)
    if as_json:
        click.echo(json.dumps(report.summary(dataset.manifest), indent=1, ensure_ascii=False))
    else:
        click.echo(report.info(dataset))


@main.command(
    "verify", short_help="Re-hash every file against the manifest.", context_settings=SHOW_DEFAULTS
)
@click.argument("path", callback=existing)
@click.option(
    "--sources",
    is_flag=True,
    show_default="off",
    help="Also re-hash the source files against the states recorded when they were packed.",
)
def verify_command(path: str, sources: bool) -> None:
    """Re-hash every shard file against the manifest; exit 1 on any mismatch."""
    problems = verify(path, progress=sys.stderr.isatty(), sources=sources)
    if problems:
        for p in problems:
            click.echo(f"FAIL {p}", err=True)
        sys.exit(1)
    also = " and every source is as packed" if sources else ""
    click.echo(f"{path}: every file matches the manifest{also}")


@main.command(
    "bench",
    short_help="Reader img/s and GB/s, warm and cold, beside limits.",
    context_settings=SHOW_DEFAULTS,
)
@click.argument("path", callback=existing)
@click.option("--split", default="train", help="Split to read.")
@click.option("--batch-size", type=click.IntRange(1), default=32, help="Samples per batch.")
@click.option(
    "--seconds",
    type=click.FloatRange(0.1),
    default=3.0,
    help="How long each warm measurement runs.",
)
@click.option(
    "--step-ms",
    type=click.FloatRange(0.01),
    help="Your model's step time: say whether the reader keeps the GPU fed.",
    show_default="no verdict",
)
@click.option(
    "--json", "as_json", is_flag=True, show_default="off", help="Print the results as JSON."
)
def bench_command(path: str, split: str, batch_size: int, seconds: float, step_ms, as_json):
    """Reader throughput (warm and cold cache) beside memcpy and a naive decode baseline."""
    from . import bench  # the reading side loads only for the commands that read

    result = bench.run(path, split, batch_size, seconds, step_ms)
    click.echo(json.dumps(result.to_json(), indent=1) if as_json else bench.render(result))


@main.command(
    "preview",
    short_help="A PNG grid of samples, masks in class colours.",
    context_settings=SHOW_DEFAULTS,
)
@click.argument("path", callback=existing)
@click.option(
    "--out",
    required=True,
    help="Image file to write (.png, .jpg, ...); its folder must exist.",
)
@click.option("--split", default="train", help="Split to draw from (the first if no train).")
@click.option("-n", "--count", type=click.IntRange(1, 400), default=16, help="Samples to draw.")
@click.option("--seed", type=int, default=0, help="Seed of the samples drawn.")
def preview_command(path: str, out: str, split: str, count: int, seed: int) -> None:
    """A grid of samples, masks overlaid in their class colours, for a check by eye."""
    from . import preview

    written = preview.save(path, out, split=split, count=count, seed=seed)
    click.echo(f"wrote {written.path}: {written.text}")
