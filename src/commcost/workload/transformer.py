"""Transformer shapes for parallel plans: dense or mixture-of-experts, parameters and FLOPs.

:class:`TransformerSpec` is the one shape class of every command: a parallel plan needs attention
heads of their own width, grouped-query and multi-latent attention, mixture-of-experts layers, and
FLOPs split by what each parallel dimension divides; the DDP timeline lays a dense spec out tensor by
tensor (:func:`commcost.workload.shape.transformer_gradient_layers`, with the sequence length carried
beside the spec, and :func:`commcost.workload.shape.fits_timeline` saying which specs it takes).
The registry is ``hardware/models.json`` (one registry of models, STYLE.md item 11), read by
:func:`commcost.hardware.registry.models` alone; :func:`model_spec` builds a spec from its row.

Symbols: ``L`` layers (``L_d`` dense, ``L_m`` MoE), ``h`` hidden, ``n_q``/``n_kv`` query and
key-value heads of width ``d`` (``d_qk`` for the score product), ``f`` dense MLP width,
``f_e`` expert width, ``E`` routed experts, ``k`` experts per token, ``E_s`` shared experts,
``V`` vocabulary, ``s`` sequence length.

* attention matrices per layer ``A = h n_q d_qk + 2 h n_kv d + n_q d h`` (Q, K, V, O; an
  explicit ``attention_params`` replaces it). Multi-latent attention (DeepSeek-AI 2024, DeepSeek-V2
  section 2.1; Hugging Face ``modeling_deepseek_v3.py`` ``DeepseekV3Attention``) with query rank ``r_q``
  (0: no query compression), key-value rank ``r_kv`` and decoupled rotary width ``d_r``:
  ``A = [h r_q + r_q n_q d_qk] + h (r_kv + d_r) + r_kv n_q (d_qk - d_r + d) + n_q d h`` (the query
  down and up projections, or ``h n_q d_qk``; the joint KV down projection with the shared rotary key; the
  KV up projection to per-head keys without rotary part and values; the output), and the latent norms
  ``r_q + r_kv`` beside the layer's norms
* sliding-window attention (Mistral, Gemma 2/3, GPT-OSS: Beltagy et al. 2020) on ``L_w`` of the layers
  with window ``w``: a query attends to ``min(i + 1, w)`` keys, on average over ``s`` positions
  ``k - k^2/(2 s)`` with ``k = min(s, w)`` (the causal ``s/2`` at ``w >= s``); model FLOPs count twice
  that, ``s_w = 2k - k^2/s`` (the full square ``s`` at ``w >= s``)
* MLP matrices ``M(f) = m h f`` with ``m = 3`` gated (SwiGLU), else 2
* MoE layer ``E M(f_e) + M(f_s) + h E`` (routed experts, shared experts of total width
  ``f_s = E_s f_e`` unless given, as Qwen2-MoE's ``shared_expert_intermediate_size``, and router)
* forward FLOPs per token: 2 per multiply-accumulate of every matrix a token passes through,
  ``F_mm = 2 (L A + L_d M(f) + L_m (k M(f_e) + M(f_s) + h E) + V h)`` (logits included, the
  embedding look-up ~0), plus attention's score and value products
  ``F_att = 2 s n_q (d_qk + d) ((L - L_w) + L_w s_w / s)`` counted over the full ``s x s`` square (the Megatron-LM /
  PaLM convention: Narayanan et al. 2021 eq. 3; Chowdhery et al. 2022 appendix B). Causal
  masking halves what a flash-attention kernel executes (:data:`CAUSAL_EXECUTED_FRACTION`).
"""

from __future__ import annotations

from dataclasses import dataclass

from commcost.core.errors import InputError
from commcost.hardware.registry import model_key, model_row, models

__all__ = ["TransformerSpec", "model_spec", "model_spec_names", "spec_from_row", "CAUSAL_EXECUTED_FRACTION"]

CAUSAL_EXECUTED_FRACTION = 0.5
"""Share of the full ``s x s`` score square a causal flash-attention kernel computes (it skips
the blocks above the diagonal: Dao 2023, FlashAttention-2 section 3.1). Model FLOPs (MFU) count
the whole square; executed FLOPs (time) count this share."""

_INT_FIELDS = ("layers", "hidden", "heads", "vocab")
_NONNEG_FIELDS = ("kv_heads", "head_dim", "qk_head_dim", "ffn_hidden", "max_positions", "experts", "top_k",
                  "expert_ffn_hidden", "shared_experts", "moe_layers", "attention_params", "q_lora_rank",
                  "kv_lora_rank", "qk_rope_head_dim", "shared_expert_ffn_hidden", "sliding_window", "window_layers",
                  "extra_layer_params", "extra_moe_layer_params")


@dataclass(frozen=True, slots=True, kw_only=True)
class TransformerSpec:
    """A decoder-only transformer, dense or mixture-of-experts (symbols in the module docstring)."""

    name: str = "custom"
    """Registry key, or ``custom`` for explicit flags."""
    layers: int
    """Transformer layers L."""
    hidden: int
    """Hidden size h."""
    heads: int
    """Query heads n_q."""
    kv_heads: int = 0
    """Key/value heads n_kv; 0 means n_q (no grouped-query attention)."""
    head_dim: int = 0
    """Width d of one head (V and O); 0 means h / n_q."""
    qk_head_dim: int = 0
    """Width d_qk of one head in Q K^T (multi-latent attention: 192); 0 means d."""
    ffn_hidden: int = 0
    """Dense MLP width f; 0 means 4h."""
    gated_mlp: bool = False
    """Three MLP matrices (SwiGLU) instead of two."""
    vocab: int = 50257
    """Vocabulary V."""
    tied_embeddings: bool = False
    """The output head shares the embedding matrix."""
    max_positions: int = 0
    """Rows of a learned position embedding; 0 for rotary."""
    biases: bool = False
    """Linear layers and norms carry biases (GPT-2/3)."""
    fused_norm: bool = False
    """The model's own code runs each norm as one kernel whatever the stack (llm-foundry's MPT as its
    benchmarks run it: ``norm_type`` ``low_precision_layernorm``, ``F.layer_norm`` in bf16 with autocast off):
    :data:`commcost.workload.operators.FUSED_NORM_ACCESSES` in place of the stack's ``norm_accesses``."""
    qk_norm: bool = False
    """Per-head RMSNorm on Q and K (Qwen3): 2 d parameters per layer."""
    dropout: bool = False
    """The model trains with dropout (GPT-3 in Megatron-LM): its masks are saved for backward."""
    experts: int = 0
    """Routed experts E per MoE layer; 0 for a dense model."""
    top_k: int = 0
    """Routed experts k per token."""
    expert_ffn_hidden: int = 0
    """Expert MLP width f_e; 0 means f."""
    shared_experts: int = 0
    """Always-active shared experts E_s of width f_e (DeepSeek)."""
    moe_layers: int = 0
    """MoE layers L_m (the last L_m layers; DeepSeek-V3's first 3 are dense); 0 with experts means all."""
    attention_params: int = 0
    """Attention matrix parameters per layer, replacing the Q K V O formula (multi-latent attention)."""
    q_lora_rank: int = 0
    """Multi-latent attention: query compression rank r_q (0: the queries are projected directly)."""
    kv_lora_rank: int = 0
    """Multi-latent attention: key-value compression rank r_kv (0: not multi-latent attention)."""
    qk_rope_head_dim: int = 0
    """Multi-latent attention: the decoupled rotary part d_r of d_qk (one key shared by every head)."""
    shared_expert_ffn_hidden: int = 0
    """Total width f_s of the shared experts' MLP; 0 means ``E_s f_e``."""
    sliding_window: int = 0
    """Window w of the sliding-window layers, tokens; 0 for none."""
    window_layers: int = 0
    """L_w: layers that attend within the window (the others attend to the whole sequence)."""
    extra_layer_params: int = 0
    """Vector parameters of every layer the formulas leave out (norms beyond two, biases of models whose
    biases do not follow ``biases``, attention sinks), counted by the config reader."""
    extra_moe_layer_params: int = 0
    """Vector parameters of every MoE layer beyond :attr:`extra_layer_params` (router and expert biases, a
    shared-expert gate)."""
    source: str = ""
    """Where the shape comes from."""

    def __post_init__(self) -> None:
        for name in _INT_FIELDS:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InputError(f"{name} must be an integer >= 1, got {v!r}")
        for name in _NONNEG_FIELDS:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise InputError(f"{name} must be an integer >= 0, got {v!r}")
        if self.kv_heads > self.heads:
            raise InputError(f"kv_heads ({self.kv_heads}) must not exceed heads ({self.heads})")
        if self.kv_heads and self.heads % self.kv_heads:
            raise InputError(f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        if not self.head_dim and self.hidden % self.heads:
            raise InputError(f"hidden ({self.hidden}) is not a multiple of heads ({self.heads}); give head_dim")
        if self.experts:
            if not 1 <= self.top_k <= self.experts:
                raise InputError(f"top_k must be between 1 and experts ({self.experts}), got {self.top_k}")
            if self.moe_layers > self.layers:
                raise InputError(f"moe_layers ({self.moe_layers}) exceeds layers ({self.layers})")
        elif self.top_k or self.moe_layers or self.shared_experts or self.shared_expert_ffn_hidden:
            raise InputError("top_k, moe_layers and shared experts need experts >= 1")
        if self.window_layers > self.layers:
            raise InputError(f"window_layers ({self.window_layers}) exceeds layers ({self.layers})")
        if bool(self.window_layers) != bool(self.sliding_window):
            raise InputError(f"sliding_window ({self.sliding_window}) and window_layers ({self.window_layers}) "
                             "go together")
        if self.kv_lora_rank and self.qk_rope_head_dim >= self.d_qk:
            raise InputError(f"qk_rope_head_dim ({self.qk_rope_head_dim}) must be below the score width "
                             f"({self.d_qk})")
        if (self.q_lora_rank or self.qk_rope_head_dim) and not self.kv_lora_rank:
            raise InputError("q_lora_rank and qk_rope_head_dim need kv_lora_rank (multi-latent attention)")

    # --- shape ---------------------------------------------------------------------
    @property
    def d(self) -> int:
        """Head width d."""
        return self.head_dim or self.hidden // self.heads

    @property
    def d_qk(self) -> int:
        """Score-product head width d_qk."""
        return self.qk_head_dim or self.d

    @property
    def n_kv(self) -> int:
        """Key/value heads."""
        return self.kv_heads or self.heads

    @property
    def q_width(self) -> int:
        """``n_q d``: width of the attention output (input of O)."""
        return self.heads * self.d

    @property
    def kv_width(self) -> int:
        """``n_kv d``: width of K and of V."""
        return self.n_kv * self.d

    @property
    def ffn(self) -> int:
        """Dense MLP width f."""
        return self.ffn_hidden or 4 * self.hidden

    @property
    def expert_ffn(self) -> int:
        """Expert MLP width f_e."""
        return self.expert_ffn_hidden or self.ffn

    @property
    def shared_ffn(self) -> int:
        """Total shared-expert width f_s (0 without shared experts)."""
        return self.shared_expert_ffn_hidden or self.shared_experts * self.expert_ffn

    @property
    def is_mla(self) -> bool:
        """True for multi-latent attention (a key-value rank r_kv)."""
        return self.kv_lora_rank > 0

    @property
    def is_moe(self) -> bool:
        """True with routed experts."""
        return self.experts > 0

    @property
    def moe_layer_count(self) -> int:
        """L_m."""
        return (self.moe_layers or self.layers) if self.experts else 0

    @property
    def dense_layer_count(self) -> int:
        """L_d = L - L_m."""
        return self.layers - self.moe_layer_count

    # --- parameters ----------------------------------------------------------------
    def _mlp(self, width: int) -> int:
        return (3 if self.gated_mlp else 2) * self.hidden * width

    @property
    def attention_matrix_params(self) -> int:
        """A per layer."""
        if self.attention_params:
            return self.attention_params
        h, n_q = self.hidden, self.heads
        if self.is_mla:
            r_q, r_kv, d_r = self.q_lora_rank, self.kv_lora_rank, self.qk_rope_head_dim
            q = h * r_q + r_q * n_q * self.d_qk if r_q else h * n_q * self.d_qk
            return q + h * (r_kv + d_r) + r_kv * n_q * (self.d_qk - d_r + self.d) + self.q_width * h
        return h * n_q * self.d_qk + 2 * h * self.kv_width + self.q_width * h

    @property
    def layer_small_params(self) -> int:
        """Norms (and biases) of one layer: 2 h norm weights (x2 with biases), 2 d with QK-norm,
        biases of Q K V O and the MLP when the model has them."""
        h = self.hidden
        n = (4 * h if self.biases else 2 * h) + (2 * self.d if self.qk_norm else 0) + self.extra_layer_params
        if self.is_mla and not self.attention_params:   # the latent norms (an explicit A counts them)
            n += self.q_lora_rank + self.kv_lora_rank
        if self.biases:
            n += self.heads * self.d_qk + 2 * self.kv_width + h + self.ffn + h
        return n

    @property
    def expert_params(self) -> int:
        """Parameters of one expert, ``M(f_e)``."""
        return self._mlp(self.expert_ffn)

    @property
    def moe_layer_expert_params(self) -> int:
        """Routed-expert parameters of one MoE layer, ``E M(f_e)`` (what expert parallelism splits)."""
        return self.experts * self.expert_params

    @property
    def dense_layer_params(self) -> int:
        """Parameters of one dense layer: ``A + M(f) +`` norms."""
        return self.attention_matrix_params + self._mlp(self.ffn) + self.layer_small_params

    @property
    def moe_layer_nonexpert_params(self) -> int:
        """Parameters of one MoE layer outside the routed experts: attention, shared experts, router, norms."""
        return (self.attention_matrix_params + self._mlp(self.shared_ffn)
                + self.hidden * self.experts + self.layer_small_params + self.extra_moe_layer_params)

    @property
    def embedding_params(self) -> int:
        """``V h`` (+ learned positions)."""
        return self.vocab * self.hidden + self.max_positions * self.hidden

    @property
    def head_params(self) -> int:
        """Output head ``V h`` (0 when tied)."""
        return 0 if self.tied_embeddings else self.vocab * self.hidden

    @property
    def final_norm_params(self) -> int:
        """Final norm (weight, and bias with biases)."""
        return 2 * self.hidden if self.biases else self.hidden

    @property
    def params(self) -> int:
        """Total parameters N (each tensor once)."""
        return (self.dense_layer_count * self.dense_layer_params
                + self.moe_layer_count * (self.moe_layer_nonexpert_params + self.moe_layer_expert_params)
                + self.embedding_params + self.head_params + self.final_norm_params)

    @property
    def expert_params_total(self) -> int:
        """Routed-expert parameters of the whole model, ``L_m E M(f_e)``."""
        return self.moe_layer_count * self.moe_layer_expert_params

    @property
    def active_params(self) -> int:
        """Parameters a token passes through (k routed + shared experts), embedding included."""
        return self.params - self.moe_layer_count * (self.experts - self.top_k) * self.expert_params

    # --- FLOPs per token -------------------------------------------------------------
    @property
    def layer_matmul_flops(self) -> tuple[float, float]:
        """Forward matrix FLOPs per token of one ``(dense, MoE)`` layer: ``2 (A + M(f))`` and
        ``2 (A + k M(f_e) + M(f_s) + h E)``."""
        a = self.attention_matrix_params
        dense = 2.0 * (a + self._mlp(self.ffn))
        moe = 2.0 * (a + self.top_k * self.expert_params + self._mlp(self.shared_ffn) + self.hidden * self.experts)
        return dense, moe

    @property
    def window_share(self) -> float:
        """``L_w / L``: the share of layers attending within the sliding window."""
        return self.window_layers / self.layers

    def _window_keys(self, seq):
        """``k = min(s, w)`` (array-safe: ``(s + w - |s - w|)/2``)."""
        w = self.sliding_window
        return (seq + w - abs(seq - w)) / 2.0

    def model_attention_keys(self, seq):
        """Keys per query over the full-square convention, averaged over layers:
        ``(1 - L_w/L) s + (L_w/L)(2k - k^2/s)`` (module docstring)."""
        if not self.window_layers:
            return seq
        k = self._window_keys(seq)
        return (1.0 - self.window_share) * seq + self.window_share * (2.0 * k - k * k / seq)

    def executed_attention_keys(self, seq, *, flash: bool):
        """Keys per query a kernel computes, averaged over layers: with flash attention the causal
        ``s/2`` (global layers) and ``k - k^2/(2s)`` (windowed: FlashAttention >= 2.3 skips the blocks
        outside the window, its ``window_size`` argument); the math kernel computes the whole ``s``."""
        if not flash:
            return seq
        return CAUSAL_EXECUTED_FRACTION * self.model_attention_keys(seq)

    def attention_score_flops(self, seq: int) -> float:
        """Forward score and value products per token of one layer (the mean over layers) over the full
        square, ``2 s n_q (d_qk + d)`` (``s`` becomes :meth:`model_attention_keys` with windowed layers)."""
        return 2.0 * self.model_attention_keys(seq) * self.heads * (self.d_qk + self.d)

    @property
    def logits_flops(self) -> float:
        """Forward FLOPs per token of the output head, ``2 V h``."""
        return 2.0 * self.vocab * self.hidden

    def model_forward_flops_per_token(self, seq: int) -> float:
        """``F_mm + F_att`` (module docstring): the model-FLOPs forward count per token."""
        dense, moe = self.layer_matmul_flops
        return (self.dense_layer_count * dense + self.moe_layer_count * moe + self.logits_flops
                + self.layers * self.attention_score_flops(seq))


_ROW_FIELDS = {"layers": "layers", "hidden": "hidden", "heads": "heads", "kv_heads": "kv_heads",
               "head_dim": "head_dim", "qk_head_dim": "qk_head_dim", "ffn_hidden": "ffn_hidden",
               "gated_mlp": "gated_mlp", "vocab": "vocab", "tied_embeddings": "tied_embeddings",
               "max_positions": "max_positions", "biases": "biases", "fused_norm": "fused_norm", "qk_norm": "qk_norm",
               "dropout": "dropout", "experts": "experts", "top_k": "top_k",
               "expert_ffn_hidden": "expert_ffn_hidden", "shared_experts": "shared_experts",
               "moe_layers": "moe_layers", "attention_params": "attention_params", "source": "source",
               "q_lora_rank": "q_lora_rank", "kv_lora_rank": "kv_lora_rank", "qk_rope_head_dim": "qk_rope_head_dim",
               "shared_expert_ffn_hidden": "shared_expert_ffn_hidden", "sliding_window": "sliding_window",
               "window_layers": "window_layers"}


def spec_from_row(key: str, row: dict) -> TransformerSpec:
    """The :class:`TransformerSpec` of one ``models.json`` row (as :func:`commcost.hardware.registry.models`
    returns it), named ``key``."""
    return TransformerSpec(name=key, **{attr: row[k] for k, attr in _ROW_FIELDS.items() if k in row})


def model_spec_names() -> tuple[str, ...]:
    """Every model in ``hardware/models.json`` (dense and MoE)."""
    return tuple(models())


def model_spec(name: str) -> TransformerSpec:
    """The :class:`TransformerSpec` of registry entry ``name`` (exact key, or an alias of
    :data:`commcost.hardware.registry.MODEL_ALIASES`, as every command takes them; unknown names list the valid
    ones)."""

    return spec_from_row(model_key(name), model_row(name))
