"""Output for an 80-column terminal: at most 5% of the lines wider than the terminal (``COLUMNS``)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import ROOT

from commcost.report._width import wrap, wrap_command


def _lines(*args: str, columns: str = "80") -> list[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), COLUMNS=columns)
    r = subprocess.run([sys.executable, "-m", "commcost", *args], capture_output=True, text=True, env=env,
                       cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def _wide_share(lines: list[str], width: int = 80) -> float:
    return sum(len(line) > width for line in lines) / len(lines)


@pytest.mark.parametrize("args", [
    ("collective", "--op", "all_reduce", "--sizes", "1MiB:1GiB", "--system", "dgx-h100", "--nodes", "2"),
    ("collective", "--op", "all_reduce", "--sizes", "1MiB:1GiB", "--bw", "25", "--latency", "20", "--gpus", "32"),
    ("collective", "--op", "all_reduce", "--size", "64MiB", "--system", "dgx-h100", "--nodes", "2"),
    ("timeline", "--system", "dgx-h100", "--nodes", "4", "--model", "llama2-7b", "--step-ms", "1200", "--bucket", "auto"),
    ("timeline", "--gpus", "32", "--bw", "25", "--latency", "20", "--params", "1.3", "--step-ms", "400"),
], ids=["collective-table", "collective-flat", "collective-one", "timeline-auto", "timeline"])
def test_fits_80_columns(args):
    lines = _lines(*args)
    assert len(lines) > 10 and _wide_share(lines) <= 0.05, [ln for ln in lines if len(ln) > 80]


SYSTEM_BUDGET = ("budget", "--system", "dgx-h100", "--nodes", "4", "--model", "llama2-7b", "--step-ms", "1200")
DRILL_BUDGET = ("budget", "--gpus", "32", "--bw", "25", "--latency", "20", "--params", "1.3", "--step-ms", "400",
                "--buckets", "1,8,16,25,100")


@pytest.mark.parametrize("args", [SYSTEM_BUDGET, (*SYSTEM_BUDGET, "--layer-ratio", "--hidden", "4096", "--seq", "4096"),
                                  ("budget", "--system", "dgx-a100", "--nodes", "4", "--model", "llama2-13b",
                                   "--step-ms", "2000")], ids=["h100", "layer-ratio", "a100"])
def test_budget_on_a_system_fits_80_columns(args):
    lines = _lines(*args)
    assert len(lines) > 50 and max(len(ln) for ln in lines) <= 80, [ln for ln in lines if len(ln) > 80]
    # (f) and (g) keep a table row per bucket cap and per P, narrower ("lat %", "batch")
    heads = [ln.split() for ln in lines if ln.split()[:2] in (["cap", "count"], ["P", "latency"])]
    assert heads == [["cap", "count", "latency", "bandwidth", "lat", "%", "total", "T/step", "exposed"],
                     ["P", "latency", "bandwidth", "total", "T", "T/step", "S*", "batch"]]
    if "--layer-ratio" in args:
        assert any(ln.startswith("layer ratio:") for ln in lines)
    wide = _lines(*args, columns="300")  # a wide terminal keeps the full tables
    assert any("latency total" in ln for ln in wide)


def test_the_drill_fits_80_columns_with_the_same_numbers_at_any_width():
    import re

    narrow, wide = _lines(*DRILL_BUDGET), _lines(*DRILL_BUDGET, columns="300")
    assert max(map(len, narrow)) <= 80 < max(map(len, wide))
    numbers = re.compile(r"-?\d[\d,]*(?:\.\d+)?")      # only the layout of the lines changes
    assert set(numbers.findall("\n".join(narrow))) == set(numbers.findall("\n".join(wide)))


def test_a_wide_terminal_keeps_the_collective_table_on_one_line_per_size():
    lines = _lines("collective", "--op", "all_reduce", "--sizes", "1MiB:4MiB", "--system", "dgx-h100", "--nodes", "2",
                   columns="200")
    assert not any(line.strip().startswith("runner-up") for line in lines)  # one line per size
    assert sum("in_network" in line for line in lines) == 3  # each row names its algorithm or its runner-up


def test_wrap_keeps_a_number_with_its_unit_and_the_indent():
    line = "  " + "word " * 12 + "the last bucket's all-reduce (4.52 ms) is exposed, 25 MiB buckets"
    out = wrap(line, 40)
    assert all(len(x) <= 40 for x in out) and all(x.startswith("  ") for x in out)
    assert "4.52 ms" in " ".join(out).replace("\n", " ") and not any(x.endswith("4.52") for x in out)
    assert wrap("short", 40) == ["short"]


def test_wrap_command_pastes_as_one_command():
    cmd = "commcost plan --model llama3-70b --seq 8192 --global-batch 1024 --system dgx-h100 --gpus 512 --tp 8 --pp 4"
    out = wrap_command("best:", cmd, 40)
    assert all(len(x) <= 40 for x in out[1:]) and all(x.endswith(" \\") for x in out[:-1])
    joined = " ".join(x.rstrip("\\").strip() for x in out)
    assert joined == "best: " + cmd


def test_wrap_prints_a_no_break_space_as_a_space_on_short_and_long_lines():
    assert wrap("a\xa0\xa0b", 40) == ["a  b"]
    out = wrap("  name\xa0\xa0\xa0" + "word " * 10, 20, hang="       ")
    # 'name' padded to col 9 stays glued to the first word; continuations at 2 + 7 = 9
    assert out[0].startswith("  name   word") and all("\xa0" not in x for x in out)
    assert all(x.startswith(" " * 9 + "word") for x in out[1:]) and all(len(x) <= 20 for x in out)


def test_presets_fit_80_columns_and_keep_each_name_beside_its_numbers():
    lines = _lines("presets")
    assert len(lines) > 200 and max(len(ln) for ln in lines) <= 80, [ln for ln in lines if len(ln) > 80]
    assert "  a100-sxm4-80gb   312 TFLOP/s dense bf16, 85 GB, 2.039 TB/s HBM" in lines  # name column: 16 + 1
    wide = _lines("presets", columns="400")  # the same entries, fewer lines
    assert len(wide) < len(lines) and sum(ln.lstrip().startswith("source:") for ln in wide) == sum(
        ln.lstrip().startswith("source:") for ln in lines)


def test_wrap_keeps_the_spacing_between_words_on_a_line():
    line = "    overlap verdict  HIDES  (simulated: the recommended 25 MiB buckets hide it all)"
    out = wrap(line, 40)
    # 4 + len("overlap verdict  HIDES  (simulated:") = 4 + 35 = 39 <= 40: the two double spaces stay
    assert out[0] == "    overlap verdict  HIDES  (simulated:"
    assert all(len(x) <= 40 for x in out) and all(x.startswith("      ") for x in out[1:])
    assert " ".join(x.strip() for x in out) == line.strip()  # a break drops the spacing, nothing else
    assert wrap("a  b" + " c" * 30, 20)[0].startswith("a  b c")
