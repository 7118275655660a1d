"""A Hugging Face ``config.json`` -> :class:`~commcost.workload.transformer.TransformerSpec`.

Each family's fields are read as its ``transformers`` modeling code builds the model (``modeling_<family>.py``
of transformers 4.57), so that :attr:`TransformerSpec.params` equals what ``transformers`` counts when it
builds the model from the same file (``tests/formats/test_hf_config.py`` builds every shipped config on the
meta device and compares). Per family:

* **llama, mistral, phi3, olmo2, qwen2, qwen3, gemma2, gemma3 (text)**: Q, K, V, O of ``num_attention_heads``
  and ``num_key_value_heads`` heads of ``head_dim`` (default ``hidden_size / num_attention_heads``), a
  gated MLP of ``intermediate_size``; Qwen2 puts biases on Q, K and V (``Qwen2Attention``), Llama on all four
  with ``attention_bias`` and on the MLP with ``mlp_bias``; Qwen3 and Gemma 3 norm Q and K per head, Olmo2
  over the whole width (``Olmo2Attention``: ``q_norm`` of ``n_q d``, ``k_norm`` of ``n_kv d``); Gemma 2/3 have
  four norms a layer (``pre_feedforward_layernorm``, ``post_feedforward_layernorm`` beside the two).
* **mixtral, qwen2_moe, qwen3_moe**: ``num_local_experts``/``num_experts`` routed experts of
  ``intermediate_size`` (Mixtral) or ``moe_intermediate_size``, ``num_experts_per_tok`` per token; a layer is
  sparse when it is not in ``mlp_only_layers`` and ``(i + 1) % decoder_sparse_step == 0``
  (``Qwen2MoeDecoderLayer``); Qwen2-MoE adds a shared expert of ``shared_expert_intermediate_size`` and its
  gate (``h`` parameters).
* **deepseek_v2, deepseek_v3**: multi-latent attention (``q_lora_rank``, ``kv_lora_rank``, ``qk_nope_head_dim``,
  ``qk_rope_head_dim``, ``v_head_dim``), ``n_routed_experts`` of ``moe_intermediate_size`` and
  ``n_shared_experts`` of the same width on layers ``i >= first_k_dense_replace`` with
  ``i % moe_layer_freq == 0``; the multi-token-prediction module (``num_nextn_predict_layers``) is not built
  by ``transformers`` and not counted.
* **gpt_oss**: biases on Q, K, V, O, one attention sink per head (``GptOssAttention.sinks``), a router with a
  bias and gated experts with biases (``GptOssExperts``: ``gate_up_proj_bias`` ``E 2f``, ``down_proj_bias``
  ``E h``) on every layer.

Sliding windows: ``layer_types`` where the file has it (``sliding_attention`` layers), else the family's rule
(Gemma 2: even layers; Gemma 3: all but every ``sliding_window_pattern``-th; Qwen2/3 with
``use_sliding_window``: layers from ``max_window_layers``; Mistral and Phi-3: every layer with a
``sliding_window``). Other ``model_type`` values are refused, by name.
"""

from __future__ import annotations

import json
from pathlib import Path

from commcost.core.errors import InputError
from commcost.workload.transformer import TransformerSpec

__all__ = ["FAMILIES", "read_hf_config", "spec_from_hf_config", "spec_from_hf_dict"]

FAMILIES = ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "deepseek_v2",
            "deepseek_v3", "gpt_oss", "gemma2", "gemma3", "gemma3_text", "phi3", "olmo2")
"""The ``model_type`` values read."""


def read_hf_config(path: str | Path) -> dict:
    """The JSON object of ``path`` (a ``config.json``, or a directory holding one)."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"--hf-config {path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"--hf-config {path}: not a JSON config ({e})") from None
    if not isinstance(doc, dict):
        raise InputError(f"--hf-config {path}: expected a JSON object")
    return doc


def _get(c: dict, key: str, default=None, *, required: bool = False):
    v = c.get(key)
    if v is None:
        if required:
            raise InputError(f"config.json ({c.get('model_type')}) lacks {key!r}")
        return default
    return v


def _window_layers(mt: str, c: dict, layers: int) -> tuple[int, int]:
    """``(w, L_w)``: the sliding window and how many layers use it (module docstring)."""
    w = _get(c, "sliding_window", 0) or 0
    types = c.get("layer_types")
    if isinstance(types, list) and types:
        n = sum(1 for t in types[:layers] if t == "sliding_attention")
        return (w, n) if w and n else (0, 0)
    if not w:
        return 0, 0
    if mt == "gemma2":
        return w, (layers + 1) // 2
    if mt in ("gemma3", "gemma3_text"):
        pattern = _get(c, "sliding_window_pattern", 6)
        return w, layers - layers // pattern
    if mt in ("qwen2", "qwen3", "qwen2_moe", "qwen3_moe"):
        if not c.get("use_sliding_window"):
            return 0, 0
        return w, max(0, layers - _get(c, "max_window_layers", layers))
    if mt in ("mistral", "mixtral", "phi3"):
        return w, layers
    return 0, 0


def _sparse_layers(c: dict, layers: int) -> int:
    """Qwen-MoE's sparse layers: not in ``mlp_only_layers`` and ``(i + 1) % decoder_sparse_step == 0``."""
    only = set(_get(c, "mlp_only_layers", []) or [])
    step = _get(c, "decoder_sparse_step", 1) or 1
    return sum(1 for i in range(layers) if i not in only and (i + 1) % step == 0)


def _experts_and_mla(mt: str, c: dict, kw: dict, *, L: int, h: int, n_q: int, n_kv: int, d: int,
                     f: int) -> tuple[int, int]:
    """The experts (Mixtral, Qwen-MoE, DeepSeek, gpt-oss) and DeepSeek's multi-head latent attention of ``c`` into
    ``kw``; returns the parameters they add to every layer and to every MoE layer beyond the standard ones."""
    extra = extra_moe = 0
    if mt == "mixtral":
        kw.update(experts=_get(c, "num_local_experts", required=True), top_k=_get(c, "num_experts_per_tok", 2),
                  expert_ffn_hidden=f)
    if mt in ("qwen2_moe", "qwen3_moe"):
        E = _get(c, "num_experts", 0)
        if E:
            kw.update(experts=E, top_k=_get(c, "num_experts_per_tok", required=True),
                      expert_ffn_hidden=_get(c, "moe_intermediate_size", required=True),
                      moe_layers=_sparse_layers(c, L))
            if mt == "qwen2_moe" and _get(c, "shared_expert_intermediate_size", 0):
                kw.update(shared_experts=1, shared_expert_ffn_hidden=c["shared_expert_intermediate_size"])
                extra_moe += h                 # shared_expert_gate: Linear(h, 1)
    if mt in ("deepseek_v2", "deepseek_v3"):
        d_nope, d_r = _get(c, "qk_nope_head_dim", required=True), _get(c, "qk_rope_head_dim", required=True)
        kw.update(kv_heads=n_q, head_dim=_get(c, "v_head_dim", required=True), qk_head_dim=d_nope + d_r,
                  q_lora_rank=_get(c, "q_lora_rank", 0) or 0, kv_lora_rank=_get(c, "kv_lora_rank", required=True),
                  qk_rope_head_dim=d_r)
        if c.get("attention_bias"):        # q (or q_a) and kv_a projections, o
            extra += (kw["q_lora_rank"] or n_q * (d_nope + d_r)) + kw["kv_lora_rank"] + d_r + h
        E = _get(c, "n_routed_experts", 0)
        if E:
            first, freq = _get(c, "first_k_dense_replace", 0), _get(c, "moe_layer_freq", 1) or 1
            kw.update(experts=E, top_k=_get(c, "num_experts_per_tok", required=True),
                      expert_ffn_hidden=_get(c, "moe_intermediate_size", required=True),
                      shared_experts=_get(c, "n_shared_experts", 0) or 0,
                      moe_layers=sum(1 for i in range(L) if i >= first and i % freq == 0))
    if mt == "gpt_oss":
        E = _get(c, "num_local_experts", required=True)
        kw.update(experts=E, top_k=_get(c, "num_experts_per_tok", None) or _get(c, "experts_per_token", required=True),
                  expert_ffn_hidden=f)
        extra += n_q * d + 2 * n_kv * d + h + n_q      # Q K V O biases, one sink per head
        extra_moe += E + E * (2 * f + h)               # router bias, expert biases
    return extra, extra_moe


def spec_from_hf_dict(c: dict, *, name: str = "hf", source: str = "") -> TransformerSpec:
    """The :class:`TransformerSpec` of a parsed ``config.json`` (module docstring)."""
    mt = c.get("model_type")
    if mt == "gemma3" and isinstance(c.get("text_config"), dict):   # the multimodal wrapper: its language model
        c = {"model_type": "gemma3_text", **c["text_config"]}
        mt = "gemma3_text"
    if mt not in FAMILIES:
        raise InputError(f"config.json model_type {mt!r} is not read (read: {', '.join(FAMILIES)})")
    L = _get(c, "num_hidden_layers", required=True)
    h = _get(c, "hidden_size", required=True)
    n_q = _get(c, "num_attention_heads", required=True)
    n_kv = _get(c, "num_key_value_heads", n_q)
    d = _get(c, "head_dim", None) or h // n_q
    f = _get(c, "intermediate_size", 0)
    V = _get(c, "vocab_size", required=True)
    tied = bool(c.get("tie_word_embeddings", mt.startswith("gemma")))
    w, L_w = _window_layers(mt, c, L)
    kw: dict = dict(name=name, layers=L, hidden=h, heads=n_q, kv_heads=n_kv, head_dim=d, ffn_hidden=f,
                    gated_mlp=True, vocab=V, tied_embeddings=tied, sliding_window=w if L_w else 0, window_layers=L_w,
                    source=source or f"Hugging Face config.json, model_type {mt}")
    extra = extra_moe = 0
    if mt in ("llama", "mistral", "mixtral", "qwen3", "qwen3_moe", "olmo2", "phi3", "gemma2", "gemma3_text"):
        if c.get("attention_bias"):        # Q K V O biases
            extra += n_q * d + 2 * n_kv * d + h
    if mt == "llama" and c.get("mlp_bias"):
        extra += 2 * f + h
    if mt in ("qwen2", "qwen2_moe"):       # Qwen2Attention: bias on Q, K, V
        extra += n_q * d + 2 * n_kv * d
    if mt in ("qwen3", "qwen3_moe", "gemma3_text"):
        kw["qk_norm"] = True
    if mt == "olmo2":
        extra += n_q * d + n_kv * d
    if mt in ("gemma2", "gemma3_text"):
        extra += 2 * h
    more, more_moe = _experts_and_mla(mt, c, kw, L=L, h=h, n_q=n_q, n_kv=n_kv, d=d, f=f)
    extra, extra_moe = extra + more, extra_moe + more_moe
    kw.update(extra_layer_params=extra, extra_moe_layer_params=extra_moe)
    if "moe_layers" in kw and kw["moe_layers"] == 0:   # every layer dense: no experts run
        for k in ("experts", "top_k", "expert_ffn_hidden", "shared_experts", "shared_expert_ffn_hidden", "moe_layers"):
            kw.pop(k, None)
        kw["extra_moe_layer_params"] = 0
    elif kw.get("moe_layers") == L:                     # 0 means all (TransformerSpec.moe_layers)
        kw["moe_layers"] = 0
    return TransformerSpec(**kw)


def spec_from_hf_config(path: str | Path) -> TransformerSpec:
    """The :class:`TransformerSpec` of the ``config.json`` at ``path`` (a file, or a directory holding one),
    named after the file (its directory for ``config.json``)."""
    p = Path(path)
    stem = p.name if p.is_dir() else (p.parent.name if p.name == "config.json" else p.stem)
    return spec_from_hf_dict(read_hf_config(path), name=stem or "hf", source=f"Hugging Face config {p}")
