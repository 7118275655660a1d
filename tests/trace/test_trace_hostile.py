"""``commcost trace`` on mutated real traces (issue 24): wrong types, out-of-range numbers, missing
keys, truncation and compression. Whatever the mutation, the command ends in exit 0 (a report) or
exit 2 (one line naming the file), within a time and memory bound; never a traceback, an internal
error or a hang."""

from __future__ import annotations

import copy
import gzip
import json
import os
import resource
import subprocess
import sys

from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import DATA, ROOT

TRACES = ("cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
          "amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz",
          "trace_filter__sampled_rank-0.json.gz")
"""Small real traces from tests/data/traces (tests/data/SOURCES.md): CPU-only gloo, ROCm, CUDA with NCCL."""
TIME_LIMIT_S = 60
MEMORY_LIMIT_BYTES = 2 << 30
"""Address space the command may use (RLIMIT_AS): a gzip bomb or an unbounded buffer runs into it."""

_CACHE: dict[str, tuple[dict, list[int]]] = {}


def _trace(name: str) -> tuple[dict, list[int]]:
    """The trace's object and the indices of the events the analysis reads (kernels, launches,
    steps, collective calls), where a mutation matters."""
    if name not in _CACHE:
        with gzip.open(DATA / "traces" / name, "rt", encoding="utf-8") as fh:
            obj = json.load(fh)
        keep = [i for i, e in enumerate(obj["traceEvents"])
                if e.get("cat") in ("kernel", "cuda_runtime", "hip_runtime", "gpu_memcpy", "user_annotation")
                or e.get("name") in ("record_param_comms",) or str(e.get("name", "")).startswith(("gloo:", "c10d::"))]
        _CACHE[name] = obj, keep or list(range(len(obj["traceEvents"])))
    return _CACHE[name]


_hostile = st.one_of(
    st.none(), st.booleans(), st.integers(-2**80, 2**80), st.sampled_from([10**400, -10**400, 2**63, -1, 0]),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8), st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
_KEYS = ("ts", "dur", "cat", "name", "tid", "pid", "ph", "args", "args.correlation", "args.stream",
         "args.In msg nelems", "args.Out msg nelems", "args.Group size", "args.dtype", "args.Input Dims",
         "args.Input type", "args.Collective name", "args.External id")
_INFO_KEYS = ("rank", "world_size", "backend")


@st.composite
def mutated(draw):
    obj, interesting = _trace(draw(st.sampled_from(TRACES)))
    obj = copy.copy(obj)
    events = obj["traceEvents"] = list(obj["traceEvents"])
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.sampled_from(interesting))
        e = events[i] = copy.deepcopy(events[i])
        key = draw(st.sampled_from(_KEYS))
        where, field = (e.setdefault("args", {}), key[5:]) if key.startswith("args.") else (e, key)
        if not isinstance(where, dict):
            continue
        if draw(st.booleans()):
            where[field] = draw(_hostile)
        else:
            where.pop(field, None)
    if draw(st.booleans()):
        info = obj["distributedInfo"] = dict(obj.get("distributedInfo") or {})
        info[draw(st.sampled_from(_INFO_KEYS))] = draw(_hostile)
    data = json.dumps(obj).encode()  # NaN and Infinity are written bare, as a careless writer would
    cut = draw(st.sampled_from([None, None, 0.0, 0.3, 0.999]))
    gz = draw(st.booleans())
    if gz:
        data = gzip.compress(data, compresslevel=1)
    if cut is not None:
        data = data[:max(1, int(len(data) * cut))]
    return data, gz


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutated())
def test_mutated_real_traces_exit_0_or_2_with_one_line(tmp_path_factory, case):
    data, gz = case
    path = tmp_path_factory.mktemp("m") / ("t.json.gz" if gz else "t.json")
    path.write_bytes(data)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    r = subprocess.run([sys.executable, "-m", "commcost", "trace", str(path)], capture_output=True, text=True,
                       env=env, cwd=ROOT, timeout=TIME_LIMIT_S, preexec_fn=_limit_memory)
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr[-600:]
    assert r.returncode in (0, 2), (r.returncode, r.stderr[-600:])
    if r.returncode == 2:
        assert r.stdout == ""
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("commcost: error: ") and str(path) in lines[0], lines
    else:
        assert r.stdout.startswith("commcost trace:"), r.stdout[:200]
