"""The timeline and scaling request builder (:mod:`commcost.cli.inputs_step`): units converted once."""

from __future__ import annotations

import pytest

from commcost.cli import timeline
from commcost.cli.inputs_step import timeline_request
from conftest import parse_flags as _ns


def test_timeline_request_converts_mib_and_ms_once():
    ns = _ns(timeline, "--gpus", "32", "--bw", "25", "--latency", "20", "--params", "1.3", "--step-ms", "400",
             "--bucket", "50", "--first-bucket", "2", "--optimizer-ms", "5")
    req = timeline_request(ns)
    assert req.bucket_cap_bytes == 50 * 2**20 and req.first_bucket_bytes == 2 * 2**20
    assert req.caps.bucket_cap_bytes == 50 * 2**20 and req.caps.first_bucket_cap_bytes == 2 * 2**20
    assert req.inputs.step_s == pytest.approx(0.4) and req.inputs.optimizer_s == pytest.approx(0.005)
    assert not req.bucket_auto and req.fabric_note is None  # a flat link names no algorithm per size
