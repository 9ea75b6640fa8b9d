"""The benchmarks' harness: contenders interleave round by round, ratios pair round i with
round i, warm/evict walk folders, the table reads as Markdown. No timing is asserted."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parents[1] / "benchmarks" / "harness.py"


@pytest.fixture(scope="module")
def harness():
    spec = importlib.util.spec_from_file_location("bench_harness", HARNESS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_side_by_side_runs_every_contender_once_a_round_in_a_rotating_order(harness):
    order: list[str] = []

    def fake_measure(step, seconds):
        return step()

    def contender(name, rate):
        def step():
            order.append(name)
            return rate

        return step

    rates = harness.side_by_side(
        {"a": contender("a", 1), "b": contender("b", 2), "c": contender("c", 4)},
        seconds=0,
        count=3,
        measure=fake_measure,
    )
    assert order == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    assert rates == {"a": [1, 1, 1], "b": [2, 2, 2], "c": [4, 4, 4]}


def test_ratios_pair_each_round_with_the_same_round_of_the_base(harness):
    rates = {"base": [10.0, 20.0, 40.0], "x": [20.0, 20.0, 20.0]}
    assert harness.ratios(rates, "base") == {"base": [1.0, 1.0, 1.0], "x": [2.0, 1.0, 0.5]}
    assert harness.median_ratios(rates, "base") == {"base": 1.0, "x": 1.0}
    with pytest.raises(ValueError):
        harness.ratios({"base": [1.0], "x": [1.0, 2.0]}, "base")


def test_before_each_runs_before_every_timed_run(harness):
    calls: list[str] = []
    harness.side_by_side(
        {"a": lambda: 1, "b": lambda: 1},
        seconds=0,
        count=2,
        before_each=lambda: calls.append("warm"),
        measure=lambda step, seconds: calls.append("run") or 1.0,
    )
    assert calls == ["warm", "run"] * 4


def test_run_for_does_the_step_at_least_once_and_counts_units(harness):
    done: list[int] = []
    rate = harness.run_for(lambda: done.append(1) or 5, seconds=0)
    assert done == [1] and rate > 0


def test_warm_reads_every_file_under_a_folder_and_evict_accepts_them(harness, tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.bin").write_bytes(b"x" * 10)
    (tmp_path / "sub" / "b.bin").write_bytes(b"y" * 7)
    assert harness.warm(tmp_path) == 17
    assert harness.warm([tmp_path / "a.bin"], tmp_path / "sub") == 17
    harness.evict(tmp_path)


def test_table_is_markdown_with_numbers_right_aligned(harness):
    text = harness.table(["name", "img/s", "ratio"], [["packer", 12345, 1.5], ["naive", 84, 123.4]])
    assert text.splitlines() == [
        "| name | img/s | ratio |",
        "|---|---:|---:|",
        "| packer | 12,345 | 1.50 |",
        "| naive | 84 | 123 |",
    ]
    assert harness.spread([1.0, 3.0, 2.0]) == "2.00 (1.00-3.00)"


def test_columns_of_text_that_starts_with_a_number_are_right_aligned_too(harness):
    text = harness.table(
        ["ratio", "measured", "target"], [["a / b", "1.20 x", ""], ["c", "3 x", "n/a"]]
    )
    assert text.splitlines()[1] == "|---|---:|---|"


def test_endless_counts_images_epoch_after_epoch_and_passes_the_epoch_number(harness):
    seen: list[int] = []

    def epoch(number):
        seen.append(number)
        return [(["a", "b"], None), (["c"], None)]

    sizes = harness.endless(epoch)
    assert [next(sizes) for _ in range(5)] == [2, 1, 2, 1, 2]
    assert seen == [0, 1, 2]


def test_peer_says_hello_then_answers_each_request(harness, tmp_path):
    script = tmp_path / "peer.py"
    script.write_text(
        "import json, sys\n"
        "assert sys.argv[1:] == ['--peer', '--data', 'x']\n"
        "print(json.dumps({'ready': True}), flush=True)\n"
        "for line in sys.stdin:\n"
        "    print(json.dumps({'twice': 2 * json.loads(line)['n']}), flush=True)\n"
    )
    peer = harness.Peer(Path(sys.executable), str(script), ["--data", "x"])
    assert peer.hello == {"ready": True}
    assert [peer.ask({"n": n})["twice"] for n in (1, 5)] == [2, 10]
    peer.close()
    assert peer.process.returncode == 0
