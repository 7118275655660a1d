"""How fast ``commcost search`` prices configurations (targets: >= 1e6 configurations per second on one
core; the full space of a 175B dense model on 1,024 GPUs in under 2 s including start-up).

Measured in this one run, each case once (no warm-up):

* in-process, :func:`commcost.analyses.plan.search.search` on each case: configurations evaluated per second of its
  wall time (enumeration, the memory of every one, the CommModel pricing each distinct collective once,
  the step of each that fits, the top ones re-priced by ``plan``), and the distinct collectives; numpy is
  imported before the first clock starts (its import is start-up, timed in the command-line case);
* the same per CPU-second of the process (``cpu``): on a machine shared with other work the wall time
  includes waiting for a core, the CPU time does not;
* the command line, a fresh ``python -m commcost search ... --json`` process timed from outside
  (interpreter and imports included), on the 175B case.

numpy's element-wise kernels run on one thread; OMP/BLAS threads are pinned to 1 anyway.
Usage: python benchmarks/search_speed.py
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from commcost.comm.model import FabricModel  # noqa: E402
from commcost.hardware.registry import system_group, systems  # noqa: E402
from commcost.analyses.plan.search import SearchInputs, SearchSpace, search  # noqa: E402
from commcost.workload.transformer import model_spec  # noqa: E402

RATE_TARGET = 1e6
WALL_TARGET_S = 2.0
ROOT = Path(__file__).resolve().parents[1]

CASES = [
    # (label, model, system, GPUs, seq, global batch)
    ("gpt3-175b, 1,024 A100, seq 2048, batch 1536", "gpt3-175b", "dgx-a100", 1024, 2048, 1536),
    ("gpt3-175b, 1,024 H100, seq 2048, batch 1536", "gpt3-175b", "dgx-h100", 1024, 2048, 1536),
    ("llama3-70b, 512 H100, seq 8192, batch 1024", "llama3-70b", "dgx-h100", 512, 8192, 1024),
    ("llama3.1-405b, 2,048 H100, seq 8192, batch 2048", "llama3.1-405b", "dgx-h100", 2048, 8192, 2048),
    # MoE (in the target too): the expert groups multiply the distinct collectives
    ("mixtral-8x7b (MoE), 64 H100, seq 4096, batch 256", "mixtral-8x7b", "dgx-h100", 64, 4096, 256),
]


def main() -> int:
    import numpy  # noqa: F401  (start-up, not pricing: see the module docstring)

    rates = []
    print(f"{'case':<48}{'configs':>11}{'fit':>10}{'distinct':>9}{'wall':>8}{'configs/s':>12}  vs 1e6/s")
    for label, name, system, W, seq, B in CASES:
        sysp = systems()[system]
        G = int(sysp["gpus_per_node"])
        topo, _ = system_group(system, nodes=-(-W // G))
        inp = SearchInputs(space=SearchSpace(spec=model_spec(name), seq=seq, global_batch=B, gpus=(W,),
                                             gpus_per_node=G), gpu=sysp["gpu"])
        t0, c0 = time.perf_counter(), time.process_time()
        r = search(inp, FabricModel(topology=topo))
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        rate = r.evaluated / wall
        rates.append(rate)
        print(f"{label:<48}{r.evaluated:>11,}{r.feasible:>10,}{r.distinct_collectives:>9,}{wall:>7.2f}s"
              f"{rate:>12,.0f}  {rate / RATE_TARGET:5.2f}x   cpu {cpu:.2f}s: {r.evaluated / cpu / RATE_TARGET:.2f}x")
    print(f"every case at >= {RATE_TARGET:.0e} configurations/s: {'met' if min(rates) >= RATE_TARGET else 'MISSED'} "
          f"(slowest {min(rates) / RATE_TARGET:.2f}x)")
    cmd = [sys.executable, "-m", "commcost", "search", "--model", "gpt3-175b", "--system", "dgx-h100", "--gpus", "1024",
           "--seq", "2048", "--global-batch", "1536", "--json"]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    wall = time.perf_counter() - t0
    import json

    d = json.loads(out.stdout)
    print()
    print(f"command line, gpt3-175b on 1,024 H100 (fresh process, start-up included): {wall:.2f} s for "
          f"{d['evaluated']:,} configurations (search itself {d['elapsed_s']:.2f} s); target {WALL_TARGET_S:g} s: "
          f"{'met' if wall < WALL_TARGET_S else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
