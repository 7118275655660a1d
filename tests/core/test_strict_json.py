"""``core/strict_json.py``: ``--json`` is strict JSON or nothing; a non-finite number is refused before a byte
is written, with its path in the object named (issue 10, items 1 and 7)."""

from __future__ import annotations

import io
import json

import pytest

from commcost.core.errors import InputError
from commcost.core.strict_json import dump_json, find_non_finite
from conftest import run_tool, strict_json

DRILL = ("--gpus", "32", "--bw", "25", "--latency", "20")


def test_dump_json_refuses_before_writing_and_names_the_path():
    out = io.StringIO()
    with pytest.raises(InputError) as exc:
        dump_json({"inputs": {"gpus": 32}, "allreduce": {"terms": [1.0, float("inf")]}}, out)
    assert out.getvalue() == ""  # nothing half-written
    assert "allreduce.terms[1]" in str(exc.value) and "(inf)" in str(exc.value)
    assert find_non_finite({"a": [1, 2.5, {"b": None}]}) is None
    assert find_non_finite([[[[float("nan")]]]]) == ("[0][0][0][0]", pytest.approx(float("nan"), nan_ok=True))


def test_dump_json_matches_the_old_writer_byte_for_byte():
    obj = {"a": 1, "b": [0.1, 2e-7, None, "x"], "c": {"d": True}}
    out = io.StringIO()
    dump_json(obj, out)
    assert out.getvalue() == json.dumps(obj, indent=2, allow_nan=False) + "\n"


def test_drill_json_is_strict():
    r = run_tool(*DRILL, "--params", "1.3", "--step-ms", "400", "--json")
    assert r.returncode == 0, r.stderr
    strict_json(r.stdout)
