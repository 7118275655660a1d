"""Shared test helpers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "collective_cost.py"
DATA = Path(__file__).resolve().parent / "data"


def run_tool(*args: str, script: Path = TOOL) -> subprocess.CompletedProcess:
    """Run ``tools/collective_cost.py`` as a user would: a subprocess, no install, no PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=60)


def run_commcost(*args: str) -> subprocess.CompletedProcess:
    """Run ``python -m commcost`` with ``src/`` on the path."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run([sys.executable, "-m", "commcost", *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120)


@pytest.fixture
def tool():
    return run_tool
