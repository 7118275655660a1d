"""Every subcommand's ``--help`` ends with two or three examples, and the examples that need no
input file (nor torch) run as printed."""

from __future__ import annotations

import importlib
import os
import shlex
import subprocess
import sys

import pytest

from commcost.cli import SUBCOMMANDS
from conftest import ROOT

NEEDS_FILE = (".json ", ".log", ".csv", "torchrun")


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
def test_help_ends_with_examples(name):
    examples = importlib.import_module(SUBCOMMANDS[name]).EXAMPLES
    assert 2 <= len(examples) <= 3
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    r = subprocess.run([sys.executable, "-m", "commcost", name, "--help"], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 0
    tail = r.stdout.rstrip().splitlines()[-len(examples):]
    assert tail == [f"  commcost {name} {e}".rstrip() for e in examples]


RUNNABLE = [(name, e) for name, module in sorted(SUBCOMMANDS.items()) if name != "measure"
            for e in importlib.import_module(module).EXAMPLES
            if not any(mark in e + " " for mark in NEEDS_FILE)]


@pytest.mark.parametrize("name, example", RUNNABLE, ids=[f"{n}: {e}" for n, e in RUNNABLE])
def test_examples_run(name, example, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), MPLBACKEND="Agg")
    r = subprocess.run([sys.executable, "-m", "commcost", name, *shlex.split(example)], capture_output=True,
                       text=True, env=env, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip()
