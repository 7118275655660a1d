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


def parse_flags(module, *argv: str):
    """The argparse Namespace a subcommand ``module`` (``commcost.cli.<name>``) parses from ``argv``."""
    from commcost.cli import _args

    p = _args.Parser(prog="t")
    module.add_arguments(p)
    return p.parse_args(list(argv))


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


# --- the report contract: strict JSON whose numbers are named with their unit, text that fits -----------

UNIT_WORDS = frozenset({"s", "bytes", "mb", "mib", "flops", "tflops", "params", "usd", "tokens", "days", "hours",
                        "pct"})
"""Words of a key that name a unit: seconds, bytes (MB, MiB), FLOPs, parameters, with ``_per_...`` for rates
(``bandwidth_bytes_per_s``, ``bytes_sent_per_rank``): STYLE.md convention 1."""

DIMENSIONLESS = frozenset({
    # counts
    "gpus", "nodes", "gpus_per_node", "ranks_per_node", "nodes_used", "nodes_spanned", "world", "rank", "count",
    "count_per_step", "buckets", "caps_tried", "grad_accum", "micro_batch", "micro_batches", "global_batch",
    "seq", "tp", "dp", "pp", "vp", "cp", "ep", "expert_tp", "zero", "shard_group", "group_size", "evaluated",
    "feasible", "priced", "distinct_collectives", "points", "in_flight_layers", "reduce_scatters_per_step",
    "tokens_per_rank", "tokens_to_hide", "layers", "hidden", "heads", "vocab", "iters", "steps", "bytes_per_grad",
    # ratios and shares (a fraction, a factor, a quality of fit)
    "efficiency", "efficiency_best_case", "efficiency_exposed", "efficiency_no_overlap", "efficiency_overlapped_ceiling",
    "efficiency_partial", "efficiency_perfect", "backward_fraction", "comm_fraction", "overlap_fraction",
    "comm_to_compute", "baseline_comm_to_compute", "width_free_ratio", "latency_share", "max_latency_share", "mfu",
    "r2", "rel_error", "median_abs_rel_error", "max_abs_rel_error", "speedup", "speedup_no_overlap",
    "speedup_partial", "speedup_partial_bounded", "speedup_perfect", "spread", "threshold", "dominance_factor",
    "oversubscription", "spine_oversubscription", "global_batch_growth", "band_ratios", "one_node", "multi_node",
    "multi_pod", "activations_exceed_memory", "model_states_exceed_memory", "memory_headroom",
    "step_interval_coverage", "step_interval_ratios", "mfu_interval",
    # trace counts and indices
    "world_size", "calls", "calls_dropped", "events", "index", "instances", "ranks", "reference_rank",
    "slowest_rank", "step", "straggler_count", "unmatched_calls",
})
"""Keys whose numbers are counts or ratios, with no unit to name."""


def numbers_without_a_unit(obj, key: str = "") -> list[str]:
    """Keys of ``obj`` (a ``*_to_dict`` result) holding a number whose name gives no unit and that is not a
    count or a ratio of :data:`DIMENSIONLESS`: ``[]`` when every number says what it is."""
    if isinstance(obj, dict):  # a table keyed by names or ranks under a key with a unit inherits that unit
        inherit = bool(UNIT_WORDS & set(key.split("_")))
        return [k for kk, v in obj.items() for k in numbers_without_a_unit(v, key if inherit else str(kk))]
    if isinstance(obj, (list, tuple)):
        return [k for v in obj for k in numbers_without_a_unit(v, key)]
    if isinstance(obj, (int, float)) and not isinstance(obj, bool):
        return [] if key in DIMENSIONLESS or UNIT_WORDS & set(key.split("_")) else [key]
    return []


def strict_round_trip(obj):
    """``obj`` written as strict JSON (no NaN, no Infinity) and read back: what ``--json`` prints."""
    return strict_json(json.dumps(obj, allow_nan=False))


def wide_lines(text: str, width: int = 80) -> list[str]:
    """Lines of ``text`` wider than ``width`` columns."""
    return [line for line in text.splitlines() if len(line) > width]


try:  # a busy machine (other suites, other people's work) must not fail a property test by its clock
    from hypothesis import settings as _hypothesis_settings

    _hypothesis_settings.register_profile("commcost", deadline=None)
    _hypothesis_settings.load_profile("commcost")
except ImportError:  # the test extra installs it; without it the property tests are not collected
    pass
