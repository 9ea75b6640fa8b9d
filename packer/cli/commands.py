"""Command line: `pack SRC ...` (also `packer pack`), `packer info`, `verify`, `bench`, `preview`.

Every command is a `Command`: a user's mistake (any PackError) ends as one `Error:` line and
exit 1, with messages worded for the command line (`--shard-size`, not `shard_size=`).
"""

from __future__ import annotations

import json
import shlex
import signal
import sys

import click

from .. import engines, packing
from ..errors import PackError
from ..flags import command_line_wording
from ..formats import FORMATS
from ..packing import preflight
from ..packing.ledger import Ledger
from ..packing.options import OUT, PLAN_OPTIONS, RUN_OPTIONS, SIZE, by_stage
from ..reading.dataset import open_dataset
from . import report
from .params import declared_options, existing, format_options, location
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


PACK_HELP = """Pack SRC (a folder; a .lst, .csv, .tsv or .jsonl list, with label columns if it
has them; a Parquet file; or a Hugging Face dataset folder: Hub Parquet files or a
save_to_disk folder), here or at a URL (s3://, gs://; hf://datasets/OWNER/NAME with
huggingface_hub installed), into already-decoded shards.

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
@click.option("--out", callback=location, help=OUT.help, show_default=OUT.shown)
@click.option(
    "--format", "fmt", type=click.Choice(FORMATS), default="npy", help="Shard file format."
)
@declared_options([SIZE, *PLAN_OPTIONS])
@format_options
@declared_options([*RUN_OPTIONS, *engines.all_options()])
@click.option(
    "--dry-run",
    is_flag=True,
    show_default="off",
    help="Show what would be packed and what would be rejected; write nothing.",
)
@click.pass_context
def pack_command(ctx, src, out, fmt, size, dry_run, **options) -> None:
    options = {k: v for k, v in options.items() if v is not None}
    options["coco"] = options.get("coco") or None
    options["progress"] = options["progress"] and sys.stderr.isatty()  # no `\r` bar in a file
    signal.signal(signal.SIGTERM, _terminated)
    command = command_line(ctx)
    try:
        stages = by_stage(options)
        plan = packing.make_plan(src, out, fmt, size, **stages.plan)
        if stages.run.overwrite:
            plan = packing.for_overwrite(plan)  # its notes are those of what is packed
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
            stages.run,
            engine_options=stages.engine,
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
    state = Ledger(path).unfinished()
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
