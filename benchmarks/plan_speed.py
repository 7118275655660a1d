"""How long one ``commcost plan`` takes in-process (target: under 1 ms), on the issue's example
(llama3-70b, 1,024 H100, tp 8 pp 4 vp 5, ZeRO-1, sequence parallel, selective recomputation) and on
the heaviest row of tests/data/published_runs.csv. Prints the median of repeated runs and its ratio
to the target, two ways:

* ``repeat``: the same plan again (what advice, sensitivity and a search's re-pricing do: the
  CommModel's collectives are memoised on its frozen inputs, so a repeated collective costs a lookup);
* ``first``: every memo emptied before each run (:func:`commcost.comm.algorithms.clear_memos`): a plan
  whose collectives the CommModel has never priced, the formulas evaluated in full; ``first cpu`` the
  same in CPU time of the process (on a shared machine the wall time includes waiting for a core).

Usage: python benchmarks/plan_speed.py [repeats]
"""

from __future__ import annotations

import statistics
import sys
import time

from commcost.comm.table_terms import clear_memos
from commcost.comm.model import FabricModel
from commcost.parallel.layout import Layout
from commcost.analyses.plan.plan import PlanInputs, plan
from commcost.comm.systems import system_group
from commcost.workload.transformer import model_spec

TARGET_S = 1e-3


def cases():
    topo, _ = system_group("dgx-h100", nodes=128)
    yield "llama3-70b 1024 H100 tp8 pp4 vp5 zero1", PlanInputs(
        spec=model_spec("llama3-70b"), seq=8192, gpu="h100-sxm", gpus_per_node=8,
        layout=Layout(dp=32, tp=8, pp=4, vp=5, zero=1, sequence_parallel=True, recompute="selective",
                      global_batch=1024)), FabricModel(topology=topo)
    topo, _ = system_group("gb300-nvl72", nodes=4)
    yield "llama3.1-405b 256 GB300 tp2 pp8 cp2 vp4", PlanInputs(
        spec=model_spec("llama3.1-405b"), seq=8192, gpu="gb300", gpus_per_node=72, precision="fp8",
        layout=Layout(dp=8, tp=2, pp=8, vp=4, cp=2, zero=1, sequence_parallel=True, global_batch=1536,
                      uneven_pipeline=True)), \
        FabricModel(topology=topo)
    topo, _ = system_group("dgx-h100", nodes=128)
    yield "deepseek-v3 1024 H100 tp2 pp8 vp4 ep64", PlanInputs(
        spec=model_spec("deepseek-v3"), seq=4096, gpu="h100-sxm", gpus_per_node=8, precision="fp8",
        layout=Layout(dp=64, tp=2, pp=8, vp=4, ep=64, zero=1, sequence_parallel=True, global_batch=8192,
                      uneven_pipeline=True)), FabricModel(topology=topo)


def _median_s(inp, model, repeats: int, first: bool, clock=time.perf_counter) -> float:
    times = []
    for _ in range(repeats):
        if first:
            clear_memos()
        t = clock()
        plan(inp, model)
        times.append(clock() - t)
    return statistics.median(times)


def main(argv: list[str]) -> int:
    repeats = int(argv[0]) if argv else 30
    print(f"{'case':<44}{'repeat':>10}{'first':>10}{'first cpu':>11}   (target {TARGET_S * 1e3:g} ms)")
    for name, inp, model in cases():
        plan(inp, model)                      # imports and the presets' parse
        again = _median_s(inp, model, repeats, first=False)
        first = _median_s(inp, model, repeats, first=True)
        cpu = _median_s(inp, model, repeats, first=True, clock=time.process_time)
        print(f"{name:<44}{again * 1e3:8.2f}ms{first * 1e3:8.2f}ms{cpu * 1e3:9.2f}ms   ({again / TARGET_S:.2f}x, "
              f"{first / TARGET_S:.2f}x, {cpu / TARGET_S:.2f}x of the target)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
