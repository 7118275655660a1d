"""The report pieces the CLI's runs hand their results to (moved out of ``cli/``)."""

from __future__ import annotations

from commcost.report.budget import render_ddp_memory
from commcost.report.presets import model_entries, presets_to_dict
from commcost.report.timeline import caps_note, timeline_model_label
from commcost.step.ddp_buckets import ddp_bucket_caps


def test_ddp_memory_line_and_json():
    # 7e9 params x 16 B = 112e9 B = 112.0 GB against 80e9 B = 80.0 GB: does not fit
    text, d = render_ddp_memory(112e9, 80e9, "h100-sxm")
    assert "= 112.0 GB (before activations) against 80.0 GB on h100-sxm: DOES NOT FIT" in text
    assert d == {"gpu": "h100-sxm", "model_states_bytes": 112e9, "capacity_bytes": 80e9, "fits": False}
    assert render_ddp_memory(80e9, 80e9, "x")[1]["fits"] is True  # equal fits


def test_caps_notes():
    assert caps_note(auto=True) == "each cap as an explicit bucket_cap_mb (torch 2.13: first bucket = cap)"
    assert caps_note(auto=True, first_bucket_cap_bytes=3 * 2**20) == "first bucket fixed at 3 MiB"
    assert caps_note(auto=False).startswith("DDP's default: cap 25 MiB, first bucket 1 MiB")
    caps = ddp_bucket_caps(50.0)  # explicit: first bucket = cap = 50 MiB
    note = caps_note(auto=False, caps=caps, bucket_cap_bytes=50 * 2**20)
    assert note.startswith("cap 50 MiB, first bucket 50 MiB (an explicit bucket_cap_mb drops")


def test_timeline_model_label():
    assert timeline_model_label(None, None).startswith("no model shape: gradients arrive at a uniform rate")
    assert timeline_model_label("model x", 1234567).startswith("model x: 1,234,567 params, gradients ready")


def test_presets_models_carry_their_aliases():
    models = presets_to_dict("model")
    assert set(models) == {"model"}
    assert "7b" in models["model"]["llama2-7b"]["aliases"]
    line = next(e for e in model_entries() if e.name == "llama2-7b")
    assert "budget/timeline/scaling also take" in line.summary and "7b" in line.summary
