"""Shared test helpers."""

from __future__ import annotations

import json
import math
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


def one_error_line(r, code: int = 2) -> str:
    """The run failed with ``code``, printed nothing on stdout and exactly one line on stderr."""
    assert r.returncode == code, (r.returncode, r.stdout[-300:], r.stderr[-800:])
    assert "Traceback" not in r.stderr
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("commcost: error: ")
    return lines[0]


def strict_json(text: str):
    def refuse(name: str):
        raise ValueError(f"non-standard JSON constant {name}")
    return json.loads(text, parse_constant=refuse)


def drill_profile(tmp_path, gpus=32):
    """A profile whose headline link is the drill's: alpha = 20 us per step, B = 25 GB/s, P = 32."""
    from commcost.calibrate.fit import AlphaBetaFit, Regime
    from commcost.calibrate.profile import Profile, save_profile
    from commcost.comm.collectives import Algorithm, Collective

    fit = AlphaBetaFit(op=Collective.ALL_REDUCE, algorithm=Algorithm.RING, gpus=gpus, regimes=(
        Regime(min_size_bytes=0, max_size_bytes=2**20, alpha_s=20e-6, bandwidth_bytes_per_s=5e9),
        Regime(min_size_bytes=2**20, max_size_bytes=math.inf, alpha_s=60e-6, bandwidth_bytes_per_s=25e9)))
    path = tmp_path / "drill.profile.json"
    save_profile(Profile(fit=fit, r2=0.999, median_abs_rel_error=0.01, max_abs_rel_error=0.05, points=20,
                         provenance={"source": "made-up.csv"}), path)
    return path
