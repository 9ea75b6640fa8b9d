"""The README and the docs/ pages run as written: every fenced python and sh block, README.md
first, then each docs/*.md page in name order, each page's blocks in order, in a scratch folder
prepared as `make sample` prepares one (smaller), one interpreter for all of them
(`tests/jobs/readme_driver.py`); the benchmark commands of benchmarks/README.md name scripts
and options that exist; and every relative link of the pages points at a file that exists.
A block that needs what this machine lacks marks the line with `# needs: cuda` /
`# needs: cluster` and shows the form that runs here beside it."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.packs import REPO
from tests.fixtures.readme_blocks import Block, blocks, needs, pages, runnable
from tests.jobs import readme_driver

ROOT = REPO
README = ROOT / "README.md"
BENCHMARKS = ROOT / "benchmarks" / "README.md"
PAGES = pages(ROOT)


def test_every_readme_and_docs_block_runs_as_written(tmp_path):
    report = tmp_path / "report.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2"}
    env.pop("RAY_ADDRESS", None)
    names = [page.relative_to(ROOT).as_posix() for page in PAGES]
    assert names[0] == "README.md" and len(names) > 1
    done = subprocess.run(
        [sys.executable, "-m", "tests.jobs.readme_driver", ROOT, tmp_path / "scratch", report,
         *names],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads(report.read_text())
    assert [r["name"] for r in results] == [b.name for p in PAGES for b in runnable(p, ROOT)]
    failed = [f"{r['name']}\n{r['error']}" for r in results if not r["ok"]]
    assert not failed, "README blocks that do not run as written:\n\n" + "\n\n".join(failed)


def test_blocks_are_found_in_order_and_named_by_heading_and_first_line(tmp_path):
    page = tmp_path / "README.md"
    page.write_text(
        "# Tool\n\n## Use\n\n```sh\npack a/ --out b/\n```\n\ntext\n\n```python\n\nimport x\n```\n"
        "### Files\n```csv map.csv\nsource,target\n```\n```\nnot run\n```\n"
    )
    found = blocks(page)
    assert [(b.lang, b.file, b.line) for b in found] == [
        ("sh", "", 6), ("python", "", 12), ("csv", "map.csv", 17), ("", "", 20)
    ]  # fmt: skip
    assert [b.name for b in runnable(page)] == [
        "README.md:6 [Use] pack a/ --out b/",
        "README.md:12 [Use] import x",
    ]
    assert needs("run(x)  # needs: cuda for the GPU") == {"cuda"}
    assert needs("# needs: cuda, cluster") == {"cuda", "cluster"} and needs("x = 1") == set()


def test_lines_that_need_what_is_missing_are_left_out_and_the_rest_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = "a = 1\n# needs: cuda\nb = 1 / 0\nc = (2 /\n     0)  # needs: cluster\nd = a + 1\n"
    block = Block("README.md", 10, "GPU", "python", "", code)
    namespace: dict = {}
    skipped = readme_driver.python_block(block, tmp_path / "README.md", namespace, set())
    assert skipped == ["line 12 (needs cuda)", "line 13 (needs cluster)"]
    assert namespace["d"] == 2 and "b" not in namespace and "c" not in namespace
    shell = Block("README.md", 4, "Use", "sh", "", "echo ok > a.txt\nfalse  # needs: cluster\n")
    assert readme_driver.sh_block(shell, set()) == ["`false` (needs cluster)"]
    assert (tmp_path / "a.txt").read_text() == "ok\n"
    failing = Block("README.md", 30, "Use", "sh", "", "true\nfalse\necho never > b.txt\n")
    with pytest.raises(readme_driver.BlockFailed, match="README line 31 failed: false"):
        readme_driver.sh_block(failing, set())
    assert not (tmp_path / "b.txt").exists()


def _benchmark_commands() -> list[list[str]]:
    commands = []
    for block in blocks(BENCHMARKS):
        if block.lang != "sh":
            continue
        for line in block.code.splitlines():
            for part in line.split("#")[0].split("&&"):
                if part.strip():
                    commands.append(shlex.split(part))
    return commands


def test_the_benchmark_commands_name_scripts_and_options_that_exist():
    """The benchmarks take minutes each, so they are not run here: each command names a
    make target, script or option that exists."""
    commands = _benchmark_commands()
    assert len(commands) >= 10
    makefile = (ROOT / "Makefile").read_text()
    for command in commands:
        if command[0] == "make":
            assert re.search(rf"^{command[1]}:", makefile, re.M), command
            continue
        script = next(a for a in command if a.endswith((".py", ".sh")))
        assert (ROOT / script).is_file(), command
        source = (ROOT / script).read_text()
        for option in (a for a in command if a.startswith("--")):
            assert f'"{option}"' in source, (command, option)


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def broken_links(page: Path) -> list[str]:
    """The relative links of `page` (outside code) whose file or folder does not exist."""
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL, or an anchor in the page itself
        path = target.split("#")[0]
        if not (page.parent / path).exists():
            broken.append(target)
    return broken


def test_every_relative_link_of_the_pages_points_at_a_file_that_exists():
    checked = [*PAGES, BENCHMARKS, *sorted((ROOT / "benchmarks" / "results").glob("*.md"))]
    broken = {p.relative_to(ROOT).as_posix(): broken_links(p) for p in checked}
    assert not {page: links for page, links in broken.items() if links}
    readme = README.read_text()
    unlinked = [p.name for p in PAGES[1:] if f"](docs/{p.name})" not in readme]
    assert not unlinked, f"docs pages the README does not link: {unlinked}"


def test_a_broken_link_is_found_and_code_and_urls_are_left_alone(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "there.md").write_text("x\n")
    page = tmp_path / "docs" / "page.md"
    page.write_text(
        "[ok](../there.md#part) [up](../docs/) ![img](gone.png) [web](https://x.org/a.md)\n"
        "[self](#top) `[code](nowhere.md)` [gone](../missing.md)\n```\n[x](fenced.md)\n```\n"
    )
    assert broken_links(page) == ["gone.png", "../missing.md"]
