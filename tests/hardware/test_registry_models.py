"""The model registry: one loader of ``models.json`` (``registry.models``), one alias table, and every
shape class built from the row it returns."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from commcost.core.errors import InputError
from commcost.hardware.registry import MODEL_ALIASES, model_key, model_row, models
from commcost.workload.transformer import model_spec, model_spec_names


def test_models_is_the_file_without_its_notes():
    text = resources.files("commcost.hardware").joinpath("models.json").read_text(encoding="utf-8")
    raw = json.loads(text)
    assert models() == {k: v for k, v in raw.items() if not k.startswith("_")}
    assert tuple(models()) == model_spec_names()


@pytest.mark.parametrize("alias, key", [("125m", "gpt2-small"), ("1.3b", "gpt2-xl"), ("7b", "llama2-7b")])
def test_every_alias_names_a_registry_key(alias, key):
    assert MODEL_ALIASES[alias] == key and model_key(alias) == key
    assert model_row(alias) is not None and model_row(alias) == models()[key]
    # the spec of an alias is the spec of its key, named by the key
    assert model_spec(alias) == model_spec(key) and model_spec(alias).name == key


def test_aliases_do_not_shadow_keys():
    assert set(MODEL_ALIASES).isdisjoint(models())
    assert set(MODEL_ALIASES.values()) <= set(models())


def test_exact_keys_pass_through_unchanged():
    assert model_key("llama3-70b") == "llama3-70b"
    assert model_key("LLAMA3-70B") == "LLAMA3-70B"  # no case folding, no substring match


@pytest.mark.parametrize("name", ["gpt-5", "llama", "7B", ""])
def test_unknown_model_lists_the_valid_ones(name):
    with pytest.raises(InputError, match=f"unknown model {name!r} \\(valid: .*llama2-7b"):
        model_row(name)
    with pytest.raises(InputError, match=f"unknown model preset {name!r}"):
        model_row(name, "model preset")


def test_llama2_7b_row_by_hand():
    # Touvron et al. 2023 / config.json: L = 32, h = 4096, 32 heads, f = 11008 (SwiGLU), V = 32000, s = 4096
    row = model_row("7b")
    assert (row["layers"], row["hidden"], row["heads"], row["ffn_hidden"], row["vocab"], row["seq_tokens"]) == (
        32, 4096, 32, 11008, 32000, 4096)
    # N = 2 V h + L (4 h^2 + 3 h f + 2 h) + h = 2*131,072,000 + 32*(67,108,864 + 135,266,304 + 8,192) + 4,096
    #   = 262,144,000 + 32 * 202,383,360 + 4,096 = 262,144,000 + 6,476,267,520 + 4,096 = 6,738,415,616
    assert model_spec("7b").params == 6_738_415_616 == row["params"]
