"""Direct tests of ``calibrate/measure_config.py``: a measurement's settings, refused with their values."""

from __future__ import annotations

import pytest

from commcost.calibrate.measure_config import DTYPES, MeasureConfig
from commcost.comm.collectives import Collective
from commcost.core.errors import InputError

OK = dict(backend="gloo", ops=(Collective.ALL_REDUCE,), sizes_bytes=(1024, 2048))


def test_defaults():
    c = MeasureConfig(**OK)
    assert (c.dtype, c.warmup, c.iters, c.statistic, c.timeout_s, c.nproc) == ("float32", 5, 20, "median", 300.0, 2)
    assert DTYPES == {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}


@pytest.mark.parametrize("change, message", [
    (dict(backend="mpi"), "backend must be gloo or nccl, got 'mpi'"),
    (dict(ops=()), "no collectives to measure"),
    (dict(sizes_bytes=(1024, 0)), "sizes must be > 0 bytes, got (1024, 0)"),
    (dict(dtype="int8"), "dtype must be one of float32, float16, bfloat16, float64, got 'int8'"),
    (dict(iters=0), "need warmup >= 0 and iters >= 1, got warmup=5 iters=0"),
    (dict(statistic="max"), "statistic must be median, min or mean, got 'max'"),
    (dict(timeout_s=0.0), "timeout must be > 0 s, got 0.0"),
    (dict(nproc=1), "need at least 2 ranks to measure a collective, got nproc=1"),
])
def test_refusals_show_the_value(change, message):
    with pytest.raises(InputError) as exc:
        MeasureConfig(**{**OK, **change})
    assert str(exc.value) == message
