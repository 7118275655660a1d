"""Where the configurations of published training runs rank in ``commcost search``'s list.

For every dense row of tests/data/published_runs.csv: the search over every valid layout of that
model, GPU count, sequence, global batch, precision and system (flash attention and TP communication
overlap as the row's run had them, as benchmarks/plan_accuracy.py plans them); the published layout
priced by ``plan`` (benchmarks/plan_accuracy.py ``inputs``); its rank among the configurations that fit
(1 + how many have a strictly shorter predicted step), and how far its predicted step is from the best
found (``published / best - 1``). Prints the fraction within 5%, and for the rows where commcost claims
a configuration more than 5% faster the term that makes the difference (``why_best``) and the layouts.

Rows with ``split`` = ``new`` (sources not yet used for any default) are left out unless ``--new``.

Usage: python benchmarks/search_vs_published.py [--rows] [--new]
"""

from __future__ import annotations

import csv
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from plan_accuracy import DATA, inputs  # noqa: E402

from commcost.analyses.plan.plan import plan  # noqa: E402
from commcost.report.search import layout_words, why_best  # noqa: E402
from commcost.analyses.plan.search import SearchInputs, SearchSpace, search  # noqa: E402

WITHIN = 0.05


def main(argv: list[str]) -> int:
    rows = [r for r in csv.DictReader(DATA.open()) if r["split"] != "new" or "--new" in argv]
    out = []
    for row in rows:
        pinp, model = inputs(row)
        if pinp.spec.is_moe:
            continue
        published = plan(pinp, model)
        space = SearchSpace(spec=pinp.spec, seq=pinp.seq, global_batch=pinp.layout.global_batch,
                            gpus=(pinp.layout.world,), gpus_per_node=pinp.gpus_per_node)
        sinp = SearchInputs(space=space, gpu=pinp.gpu, precision=pinp.precision, flash_attention=pinp.flash_attention,
                            tp_comm_overlap=pinp.tp_comm_overlap, top=3, keep_points=True)
        r = search(sinp, model)
        steps = r.points["step_s"]
        best = r.plans[0]
        rank = 1 + int((steps < published.step_s * (1 - 1e-12)).sum())
        gap = published.step_s / best.step_s - 1
        out.append(dict(id=row["id"], split=row["split"], rank=rank, feasible=r.feasible, gap=gap,
                        fits=published.memory.fits, best=best, published=published, evaluated=r.evaluated,
                        elapsed=r.elapsed_s))
    print(f"{'id':<30}{'configs':>10}{'fit':>9}{'rank':>8}{'published':>11}{'best':>9}{'gap':>8}  fits?")
    for o in out:
        print(f"{o['id']:<30}{o['evaluated']:>10,}{o['feasible']:>9,}{o['rank']:>8,}{o['published'].step_s:>10.3f}s"
              f"{o['best'].step_s:>8.3f}s{o['gap']:>+8.1%}  {'yes' if o['fits'] else 'NO (commcost: over memory)'}")
    n = len(out)
    within = [o for o in out if o["gap"] <= WITHIN]
    print()
    print(f"{n} dense published runs: {len(within)} ({len(within) / n:.0%}) have a predicted step within 5% of the "
          f"best commcost finds; median gap {statistics.median(o['gap'] for o in out):+.1%}, median rank "
          f"{statistics.median(o['rank'] for o in out):g}; published layout over commcost's memory model in "
          f"{sum(not o['fits'] for o in out)}")
    print()
    print("where commcost claims more than 5% better, what differs:")
    for o in out:
        if o["gap"] > WITHIN:
            print(f"- {o['id']} ({o['gap']:+.1%}): best {layout_words(o['best'])}")
            print(f"    published {layout_words(o['published'])}")
            print(f"    {why_best(o['best'], o['published'])}")
            mb, mp = o["best"].memory, o["published"].memory
            print(f"    memory best {mb.total_bytes / 1e9:.1f} GB (activations {mb.activations_bytes / 1e9:.1f}) vs "
                  f"published {mp.total_bytes / 1e9:.1f} GB (activations {mp.activations_bytes / 1e9:.1f}) of "
                  f"{mb.capacity_bytes / 1e9:.0f} GB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
