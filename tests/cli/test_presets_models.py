"""``commcost presets`` lists the models (with the aliases ``--model`` takes), as the README says."""

from __future__ import annotations

import json

from conftest import run_commcost

from commcost.hardware import load_preset_file


def _entries(text: str) -> dict[str, str]:
    """``name -> its numbers`` as one line: an entry starts at column 2, its wrapped numbers continue
    under them (column 19) until its ``source:`` line (column 4) and that source's continuation lines."""
    out: dict[str, str] = {}
    name = None
    for line in text.splitlines():
        if line.startswith("  ") and not line.startswith("   "):
            name, _, rest = line.strip().partition(" ")
            out[name] = rest.strip()
        elif line.startswith("    source:"):
            name = None
        elif name is not None and line.startswith(" " * 19):
            out[name] += " " + line.strip()
    return out


def test_presets_lists_every_model_with_its_aliases():
    names = [k for k in load_preset_file("models.json") if not k.startswith("_")]
    text = run_commcost("presets").stdout
    assert "models:" in text
    assert list(_entries(run_commcost("presets", "--kind", "model").stdout)) == names
    entries = _entries(text)
    llama = entries["llama2-7b"]
    # 6,738,415,616 parameters (models.json) -> 6.738B; the seed's alias 7b
    assert "6.738B params" in llama and "32 layers" in llama and "also take 7b" in llama
    moe = entries["mixtral-8x7b"]
    assert "active" in moe and moe.endswith("--model in plan, search")  # not a dense shape the timeline lays out


def test_presets_json_has_the_model_table():
    d = json.loads(run_commcost("presets", "--json").stdout)
    assert set(d) == {"gpu", "fabric", "system", "model"}
    assert d["model"]["gpt2-small"]["aliases"] == ["125m"] and d["model"]["llama3-70b"]["aliases"] == []
    only = json.loads(run_commcost("presets", "--kind", "model", "--json").stdout)
    assert list(only) == ["model"]
