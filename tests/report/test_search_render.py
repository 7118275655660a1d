"""Direct tests of ``report/search.py``: a tiny search rendered in-process; each result's ``plan_command``
built from its layout, the text within 80 columns, strict JSON whose numbers name their unit."""

from __future__ import annotations

import pytest

from commcost.analyses.plan.search import SearchInputs, SearchSpace, search
from commcost.comm.model import FlatLinkModel
from commcost.comm.topology import Link
from commcost.report.search import (layout_words, plan_command, plan_flags, render_search_json, render_search_text,
                                    search_to_dict, why_best)
from commcost.workload.transformer import TransformerSpec
from conftest import numbers_without_a_unit, strict_json, strict_round_trip, wide_lines

pytest.importorskip("numpy")  # search prices its grid with numpy (the [sweep] extra)

FLAT = FlatLinkModel(link=Link(bandwidth_bytes_per_s=100e9, latency_s=5e-6))
TINY = TransformerSpec(name="tiny", layers=2, hidden=64, heads=2, vocab=128)


@pytest.fixture(scope="module")
def result():
    space = SearchSpace(spec=TINY, seq=64, global_batch=2, gpus=(2,), gpus_per_node=2)
    return search(SearchInputs(space=space, gpu="h100-sxm", top=3, price_per_gpu_hour=2.0), FLAT)


def test_plan_command_is_the_layout_as_flags(result):
    assert result.plans
    for p in result.plans:
        L = p.inputs.layout
        flags = plan_flags(p)
        # every layout field the search varies is a flag with its value
        for flag, value in (("--gpus", L.world), ("--tp", L.tp), ("--pp", L.pp), ("--vp", L.vp), ("--cp", L.cp),
                            ("--zero", L.zero), ("--micro-batch", L.micro_batch), ("--recompute", L.recompute)):
            assert f"{flag} {value}" in flags
        assert plan_command(p, ("--model", "tiny")) == f"commcost plan --model tiny {flags}"
        assert layout_words(p).startswith(f"tp {L.tp} pp {L.pp} vp {L.vp} cp {L.cp} dp {L.dp}, ZeRO-{L.zero}")


def test_dict_is_strict_ranked_and_names_its_units(result):
    d = strict_round_trip(search_to_dict(result, plan_prefix=("--model", "tiny")))
    assert numbers_without_a_unit(d) == []
    steps = [row["step_s"] for row in d["results"]]
    assert steps == sorted(steps) and [row["rank"] for row in d["results"]] == list(range(1, len(steps) + 1))
    assert d["feasible"] + d["infeasible"]["model_states_exceed_memory"] + \
        d["infeasible"]["activations_exceed_memory"] == d["evaluated"]
    # $2 per GPU-hour at r tokens/s/GPU: 2 / (3600 r) * 1e6 dollars per million tokens
    for row in d["results"]:
        assert row["usd_per_million_tokens"] == pytest.approx(2.0 / (3600 * row["tokens_per_s_per_gpu"]) * 1e6)
    assert strict_json(render_search_json(result)) == strict_round_trip(search_to_dict(result))


def test_text_fits_80_columns(result, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    text = render_search_text(result, plan_prefix=("--model", "tiny"))
    assert wide_lines(text) == []
    assert f"{result.evaluated:,} configurations evaluated" in " ".join(text.split())


def test_why_best_names_the_gap_with_units(result):
    best, runner = result.plans[0], result.plans[1]
    text = why_best(best, runner)
    if runner.step_s > best.step_s:
        assert text.startswith("the best is ") and " faster than the runner-up" in text
        assert any(unit in text.split(" faster")[0] for unit in (" s ", " ms ", " us ", " ns "))
    else:
        assert text.startswith("the best and the runner-up tie on the step")


def test_csv_takes_every_rows_keys(tmp_path, monkeypatch):
    # bucket_advice is None where no buckets run and a dict where they do: the header holds both rows'
    # keys (a first row without buckets once made the writer refuse the second)
    import csv

    import commcost.report.search as R
    monkeypatch.setattr(R, "search_to_dict", lambda r, plan_prefix=(): {"results": [
        {"rank": 1, "bucket_advice": None}, {"rank": 2, "bucket_advice": {"recommended_bytes": 5}}]})
    path = tmp_path / "top.csv"
    R.write_search_csv(None, str(path))
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    assert reader.fieldnames == ["rank", "bucket_advice", "bucket_advice.recommended_bytes"]
    assert [r["bucket_advice.recommended_bytes"] for r in rows] == ["", "5"]
