"""Search's best against the layouts published runs used (tests/data/published_runs.csv and
published_moe_runs.csv), with search's default ranking.

For every row: the search over every valid layout of that model, GPU count, sequence, global batch,
precision and system (flash attention, TP communication overlap and MoE settings as the row's run had
them, as benchmarks/plan_accuracy.py plans them), ranked as ``commcost search`` ranks by default
(layouts short of the memory headroom last, then the step at the measured band's upper edge); the
published layout priced by ``plan`` under the same inputs, and its band's upper edge. Printed per row:
the published layout's predicted step, search's best step, ``gap = published / best - 1`` (nominal) and
the same at the band's upper edge, and whether the published layout is fragile (short of the headroom).
Then the share within 10%, the median gap, and for the rows past 10% what differs and why
(:func:`commcost.report.search.why_best`).

Last, the published layouts that share one setup (model, system, GPUs, sequence, batch, precision and
the stack's options: :func:`setup_key`): each one's MEASURED step over the fastest measured one of its
setup, beside the same ratio PREDICTED by ``plan``. The measured ratio is a floor on the gap a perfect
model would report for that row (search's best is at least as fast as the setup's fastest published
layout), and the predicted ratio against it checks the model's relative cost of layouts on real pairs.

``--write-layouts`` rewrites src/commcost/hardware/published_layouts.json from the two CSV files
(the table ``commcost search`` compares its best with; tests check the two agree).

Usage: python benchmarks/search_vs_published.py [--rows ID,ID] [--split new|tune|holdout] [--dense]
       [--headroom 0.05] [--write-layouts]
"""

from __future__ import annotations

import csv
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from plan_accuracy import DATA, MOE_DATA, RECIPE_MOE, inputs, published_step_s  # noqa: E402

from commcost.analyses.plan.plan import plan  # noqa: E402
from commcost.analyses.plan.search import (SearchInputs, SearchSpace, rank_robust, robust_candidates,  # noqa: E402
                                           search)
from commcost.analyses.plan.search_inputs import MEMORY_HEADROOM, memory_fragile  # noqa: E402
from commcost.analyses.uncertainty import plan_band  # noqa: E402
from commcost.comm.systems import system_group  # noqa: E402
from commcost.report.search import layout_words, why_best  # noqa: E402
from commcost.workload.transformer import model_spec  # noqa: E402

WITHIN = 0.10
LAYOUTS = Path(__file__).resolve().parents[1] / "src" / "commcost" / "hardware" / "published_layouts.json"


def _etp(r: dict) -> int:
    """Expert TP as stated, else the recipes' 1 for MoE models (plan_accuracy.RECIPE_MOE), 0 for dense."""
    if r.get("etp"):
        return int(r["etp"])
    return RECIPE_MOE["etp"] if model_spec(r["model"]).is_moe else 0


def layout_rows() -> list[dict]:
    """published_layouts.json's ``runs``: each CSV row's layout and source."""
    out = []
    for path in (DATA, MOE_DATA):
        for r in csv.DictReader(path.open()):
            out.append({"id": r["id"], "stack": r["stack"], "model": r["model"], "system": r["system"],
                        "gpus": int(r["gpus"]), "seq": int(r["seq"]), "global_batch": int(r["global_batch"]),
                        "precision": r["precision"], "tp": int(r["tp"]), "pp": int(r["pp"]), "vp": int(r["vp"]),
                        "cp": int(r["cp"]), "ep": int(r["ep"]), "etp": _etp(r),
                        "zero": int(r["zero"]), "sequence_parallel": r["sequence_parallel"] == "1",
                        "recompute": r["recompute"], "micro_batch": int(r["micro_batch"]),
                        "measured_step_s": published_step_s(r), "source": r["source"]})
    return out


def write_layouts() -> None:
    doc = {"_about": ("The layouts of published training runs (generated from tests/data/published_runs.csv and "
                      "published_moe_runs.csv by benchmarks/search_vs_published.py --write-layouts; each row's "
                      "source is the run's, see tests/data/SOURCES.md). commcost search compares its best with "
                      "the published layout of the same model, GPU count, sequence and global batch."),
           "runs": layout_rows()}
    runs = ",\n".join("  " + json.dumps(r, ensure_ascii=False) for r in doc["runs"])   # one run a line
    LAYOUTS.write_text('{\n "_about": ' + json.dumps(doc["_about"], ensure_ascii=False) + ',\n "runs": [\n' + runs
                       + "\n ]\n}\n", encoding="utf-8")


def setup_key(row: dict) -> tuple:
    """What search holds fixed for a row: everything but the layout (the stack and its options too)."""
    return tuple(row.get(k) for k in ("model", "system", "gpus", "seq", "global_batch", "precision", "stack", "compile",
                                      "flash_attention", "a2a", "moe_overlap", "etp", "expert_load")) \
        + ("asynctp" in row["id"],)


def same_setup(out: list[dict], rows: dict) -> None:
    """Measured against predicted gap to the fastest measured published layout of the same setup."""
    groups: dict = {}
    for o in out:
        groups.setdefault(setup_key(rows[o["id"]]), []).append(o)
    pairs = []
    for group in groups.values():
        if len(group) < 2:
            continue
        fastest = min(group, key=lambda o: published_step_s(rows[o["id"]]))
        base_measured, base_predicted = published_step_s(rows[fastest["id"]]), fastest["published"].step_s
        for o in group:
            if o is not fastest:
                pairs.append((o, published_step_s(rows[o["id"]]) / base_measured - 1,
                              o["published"].step_s / base_predicted - 1, fastest["id"]))
    if not pairs:
        return
    print()
    print("published layouts of one setup, against its fastest measured one (measured = a floor on the gap):")
    for o, measured, predicted, fastest in pairs:
        print(f"  {o['id']:<34}{o['split']:>8}  measured {measured:+7.1%}  predicted {predicted:+7.1%}  vs {fastest}")
    print(f"  {len(pairs)} rows: {sum(m > WITHIN for _, m, _, _ in pairs)} measured past 10%; median |predicted - "
          f"measured| {statistics.median(abs(p - m) for _, m, p, _ in pairs):.1%}, same order in "
          f"{sum((p > 0) == (m > 0) for _, m, p, _ in pairs)} of {len(pairs)}")


def compare(row: dict, moe: bool, headroom: float = MEMORY_HEADROOM) -> dict:
    """One row: search (default ranking) against the published layout."""
    pinp, model = inputs(row)
    nodes = -(-pinp.layout.world // pinp.gpus_per_node)
    topo, _ = system_group(row["system"], nodes=nodes)
    space = SearchSpace(spec=pinp.spec, seq=pinp.seq, global_batch=pinp.layout.global_batch,
                        gpus=(pinp.layout.world,), gpus_per_node=pinp.gpus_per_node)
    top = 3
    sinp = SearchInputs(space=space, gpu=pinp.gpu, precision=pinp.precision, flash_attention=pinp.flash_attention,
                        tp_comm_overlap=pinp.tp_comm_overlap, stack=pinp.stack, compiled=pinp.compiled,
                        top=robust_candidates(top), a2a=pinp.a2a, fp8_dispatch=pinp.fp8_dispatch,
                        moe_overlap=pinp.moe_overlap, expert_load=pinp.expert_load, headroom=headroom)
    start = time.perf_counter()
    r = rank_robust(search(sinp, model), model, topo, top)
    published = plan(pinp, model)
    band = plan_band(pinp, published, model, topo)
    pub_upper = published.step_s if band is None else band.step_s[1]
    best = r.plans[0] if r.plans else None
    return dict(id=row["id"], split=row["split"], stack=row["stack"], moe=moe, best=best,
                published=published, pub_upper=pub_upper,
                best_upper=None if best is None else r.robust_step_s[0],
                gap=None if best is None else published.step_s / best.step_s - 1,
                gap_upper=None if best is None else pub_upper / r.robust_step_s[0] - 1,
                fits=published.memory.fits,
                fragile=bool(memory_fragile(published.memory.total_bytes, published.memory.capacity_bytes,
                                            headroom)),
                evaluated=r.evaluated, feasible=r.feasible, elapsed=time.perf_counter() - start)


def main(argv: list[str]) -> int:
    if "--write-layouts" in argv:
        write_layouts()
        print(f"wrote {LAYOUTS}")
        return 0
    only = set(argv[argv.index("--rows") + 1].split(",")) if "--rows" in argv else None
    split = argv[argv.index("--split") + 1] if "--split" in argv else None
    headroom = float(argv[argv.index("--headroom") + 1]) if "--headroom" in argv else MEMORY_HEADROOM
    rows = [(r, False) for r in csv.DictReader(DATA.open())] + [(r, True) for r in csv.DictReader(MOE_DATA.open())]
    out = []
    by_id = {row["id"]: row for row, _ in rows}
    for row, moe in rows:
        if (only and row["id"] not in only) or (split and row["split"] != split) or (moe and "--dense" in argv):
            continue
        o = compare(row, moe, headroom)
        out.append(o)
        b = o["best"]
        print(f"{o['id']:<34}{o['split']:>8}{o['published'].step_s:>10.3f}s"
              + (f"{b.step_s:>9.3f}s{o['gap']:>+8.1%}{o['gap_upper']:>+9.1%}" if b else "   (nothing fits)")
              + f"  {'fits' if o['fits'] else 'OVER'}{' fragile' if o['fragile'] else ''}  {o['elapsed']:.1f}s",
              flush=True)
    done = [o for o in out if o["best"] is not None]
    if not done:
        return 0
    n = len(done)
    within = [o for o in done if o["gap"] <= WITHIN]
    print()
    print(f"{n} published runs: {len(within)} ({len(within) / n:.0%}) have a predicted step within 10% of search's "
          f"best (default ranking); median gap {statistics.median(o['gap'] for o in done):+.1%} nominal, "
          f"{statistics.median(o['gap_upper'] for o in done):+.1%} at the band's upper edge; the published layout "
          f"is over commcost's memory in {sum(not o['fits'] for o in done)} and short of the "
          f"{headroom:.0%} headroom in {sum(o['fragile'] for o in done)}")
    for name in sorted({o["split"] for o in done}):
        part = [o for o in done if o["split"] == name]
        print(f"  split {name}: {sum(o['gap'] <= WITHIN for o in part)}/{len(part)} within 10%, median gap "
              f"{statistics.median(o['gap'] for o in part):+.1%}")
    print()
    print("past 10%, what differs:")
    for o in done:
        if o["gap"] > WITHIN:
            print(f"- {o['id']} ({o['gap']:+.1%}; upper edge {o['gap_upper']:+.1%}): best {layout_words(o['best'])}")
            print(f"    published {layout_words(o['published'])}")
            print(f"    {why_best(o['best'], o['published']).replace('the runner-up', 'the published layout')}")
            mb, mp = o["best"].memory, o["published"].memory
            print(f"    memory best {mb.total_bytes / 1e9:.1f} GB vs published {mp.total_bytes / 1e9:.1f} GB of "
                  f"{mb.capacity_bytes / 1e9:.0f} GB")
    same_setup(done, by_id)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
