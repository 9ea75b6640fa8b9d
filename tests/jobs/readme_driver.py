"""Run Markdown pages' python and sh blocks in order, in one interpreter and one scratch
folder, as a reader who copies them would, and write what became of each to a JSON report.

    python -m tests.jobs.readme_driver REPO SCRATCH REPORT README.md docs/layouts.md ...

The pages run in the order given. A page's Python blocks share one namespace (a later block
uses what an earlier one made); each page starts a namespace of its own, as a reader who opens
that page after the README would, with the README's files there. A block holding
`if __name__ == "__main__":` is a script and runs as its own file. sh blocks run in
bash with this interpreter's scripts (`pack`, `packer`, `python`) first on the PATH. `make
sample` stands for the set-up made before the first block, and `make test` for the suite
this runs in. A failure does not stop the run, so the report names every block that fails.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

from tests.fixtures import readme_scratch
from tests.fixtures.readme_blocks import Block, blocks, needs

SETUP = {"make sample": "the set-up before the first block", "make test": "this very suite"}
SCRIPT_TIMEOUT = 240


class BlockFailed(Exception):
    """A script or shell block exited with an error; the message is the end of its output."""


def available() -> set[str]:
    """The `# needs:` words this machine has."""
    have = set()
    if os.environ.get("RAY_ADDRESS"):
        have.add("cluster")
    try:
        import torch

        if torch.cuda.is_available():
            have.add("cuda")
    except ImportError:
        pass
    return have


def _comment_above(lines: list[str], lineno: int) -> str:
    """The comment-only lines right above line `lineno` (1-based) of `lines`."""
    above, k = [], lineno - 2
    while k >= 0 and lines[k].strip().startswith("#"):
        above.append(lines[k])
        k -= 1
    return "\n".join(above)


def python_block(block: Block, path: Path, namespace: dict, have: set[str]) -> list[str]:
    """Run `block` in `namespace` (or as a script); returns the statements it left out."""
    if 'if __name__ == "__main__":' in block.code:
        script = Path(f"readme_block_{block.line}.py")
        script.write_text(block.code)
        done = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, timeout=SCRIPT_TIMEOUT
        )
        if done.returncode:
            raise BlockFailed(
                f"exit {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-3000:]}"
            )
        return []
    lines = block.code.splitlines()
    tree = ast.parse(block.code)
    kept, skipped = [], []
    for statement in tree.body:
        text = "\n".join(lines[statement.lineno - 1 : statement.end_lineno])
        missing = needs(text + "\n" + _comment_above(lines, statement.lineno)) - have
        if missing:
            skipped.append(f"line {block.line + statement.lineno - 1} (needs {', '.join(missing)})")
        else:
            kept.append(statement)
    module = ast.Module(body=kept, type_ignores=[])
    ast.increment_lineno(module, block.line - 1)
    exec(compile(module, str(path), "exec"), namespace)
    return skipped


def sh_block(block: Block, have: set[str]) -> list[str]:
    """Run `block` in bash, stopping at the first failing command (its README line named)."""
    script, skipped = ["\n" * (block.line - 2)], []
    group: list[str] = []
    for text in block.code.splitlines():
        group.append(text)
        if text.rstrip().endswith("\\"):
            continue
        command = " ".join(group).split("#")[0].split()
        missing = needs("\n".join(group)) - have
        setup = " ".join(command[:2]) if command[:1] == ["make"] else None
        if setup in SETUP:
            skipped.append(f"`{setup}` ({SETUP[setup]})")
            script.extend(":" for _ in group)
        elif missing:
            skipped.append(f"`{' '.join(command)}` (needs {', '.join(missing)})")
            script.extend(":" for _ in group)
        else:
            script.extend(group)
        group = []
    body = "\n".join(script) + "\n"
    trap = "trap 'echo \"README line $LINENO failed: $BASH_COMMAND\" >&2' ERR; "
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", trap + body],
        capture_output=True,
        text=True,
        timeout=SCRIPT_TIMEOUT,
    )
    sys.stdout.write(done.stdout + done.stderr)
    if done.returncode:
        raise BlockFailed((done.stdout + done.stderr)[-3000:])
    return skipped


def _described(error: Exception, doc: Path) -> str:
    """What went wrong: a failed command's output, or the README line that raised and the
    exception."""
    if isinstance(error, BlockFailed):
        return str(error)
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == str(doc)]
    where = f"line {frames[-1].lineno}: {frames[-1].line}\n" if frames else ""
    return where + "".join(traceback.format_exception_only(error)).strip()


def main(argv: list[str]) -> int:
    repo, scratch, report = (Path(a).resolve() for a in argv[:3])
    docs = [repo / name for name in argv[3:]]
    bin_dir = Path(sys.executable).parent
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(repo),
        "PACKER_CACHE_DIR": str(scratch / ".cache"),
    }
    os.environ.update(env)
    scratch.mkdir(parents=True, exist_ok=True)
    os.chdir(scratch)
    readme_scratch.sample(scratch, bin_dir, repo / "Makefile")
    everything = [b for doc in docs for b in blocks(doc, repo)]
    stop_s3 = None
    if any("s3://bucket" in b.code for b in everything):
        stop_s3 = readme_scratch.start_s3(scratch, {})
    for block in everything:
        if block.file:
            Path(block.file).write_text(block.code)
    have, built, results = available(), set(), []
    for doc in docs:
        namespace: dict = {"__name__": "__readme__"}
        for block in blocks(doc, repo):
            if block.lang not in ("python", "sh"):
                continue
            readme_scratch.build_named(scratch, block.code, built)
            began = time.perf_counter()
            result = {"name": block.name, "ok": True, "skipped": [], "error": ""}
            try:
                if block.lang == "python":
                    result["skipped"] = python_block(block, doc, namespace, have)
                else:
                    result["skipped"] = sh_block(block, have)
            except Exception as error:
                result["ok"] = False
                result["error"] = _described(error, doc)
            result["seconds"] = round(time.perf_counter() - began, 1)
            results.append(result)
            report.write_text(json.dumps(results, indent=1))
    if stop_s3:
        stop_s3()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
