"""commcost plan side by side with llm-analysis 0.2.2 (pip install llm-analysis==0.2.2, the ``bench``
extra) on the same configurations: memory per GPU by kind and the step time at the same compute
efficiency. Prints both and their ratio; the differences are explained in docs/plan.md
("Against llm-analysis"), the main ones:

* parameters: llm-analysis counts a gated MLP with two matrices (``2 h f``), commcost three (SwiGLU:
  gate, up, down), so for Llama it holds ~28% fewer weights;
* gradients: llm-analysis keeps fp32 gradients (4 bytes/param) by default, commcost the 2+2+12
  convention of mixed-precision Adam (bf16 gradients, Rajbhandari et al. 2020);
* activations: llm-analysis stores layernorm activations in fp32 and counts per-layer tensors
  differently from Korthikanti et al.'s decomposition; both model flash attention (no s^2 term);
* time: llm-analysis divides total FLOPs by ``flops_efficiency x peak`` and adds TP communication
  per layer; it has no pipeline bubble model of interleaving, no DP/ZeRO timeline and no fabric.

Usage: python benchmarks/vs_llm_analysis.py
"""

from __future__ import annotations

import logging
import sys

from commcost.comm.model import FabricModel
from commcost.parallel.layout import Layout
from commcost.analyses.plan.plan import PlanInputs, plan
from commcost.comm.systems import system_group
from commcost.workload.transformer import model_spec

CASES = [
    # (model, system, llm-analysis gpu, gpus, tp, pp, zero, sp, recompute, micro-batch, global batch, seq)
    ("llama2-7b", "dgx-h100", "h100-sxm-80gb", 32, 1, 1, 1, False, "none", 1, 256, 4096),
    ("llama3-70b", "dgx-h100", "h100-sxm-80gb", 1024, 8, 4, 1, True, "none", 1, 1024, 8192),
    ("megatron-gpt-18.4b", "dgx-a100", "a100-sxm-80gb", 256, 8, 1, 0, True, "selective", 1, 1024, 2048),
    ("gpt3-175b", "dgx-a100", "a100-sxm-80gb", 64, 8, 8, 0, True, "selective", 1, 64, 2048),
    ("llama3-8b", "dgx-h100", "h100-sxm-80gb", 8, 1, 1, 3, False, "full", 1, 128, 8192),
]


def main() -> int:
    try:
        from llm_analysis.analysis import ActivationRecomputation, DSZeRO, LLMAnalysis
        from llm_analysis.config import ModelConfig, ParallelismConfig, get_dtype_config_by_name, \
            get_gpu_config_by_name
    except ImportError:
        print("llm-analysis is not installed: pip install llm-analysis==0.2.2 (or the test extra)")
        return 1
    logging.disable(logging.INFO)
    rc = {"none": ActivationRecomputation.NONE, "selective": ActivationRecomputation.SELECTIVE,
          "full": ActivationRecomputation.FULL}
    print(f"{'case':<34}{'quantity':<14}{'commcost':>12}{'llm-analysis':>14}{'ratio':>8}")
    for name, system, la_gpu, W, tp, pp, zero, sp, recompute, b, B, s in CASES:
        spec = model_spec(name)
        topo, _ = system_group(system, nodes=max(1, W // 8))
        layout = Layout(dp=W // (tp * pp), tp=tp, pp=pp, zero=zero, sequence_parallel=sp, recompute=recompute,
                        micro_batch=b, global_batch=B)
        gpu = "h100-sxm" if "h100" in la_gpu else "a100-sxm4-80gb"
        inp = PlanInputs(spec=spec, layout=layout, seq=s, gpu=gpu, gpus_per_node=8, efficiency=0.5,
                         flash_attention=True)
        ours = plan(inp, FabricModel(topology=topo))
        ratio = spec.ffn / spec.hidden
        mc = ModelConfig(name=name, num_layers=spec.layers, n_head=spec.heads, hidden_dim=spec.hidden,
                         vocab_size=spec.vocab, max_seq_len=s, num_key_value_heads=spec.n_kv, ffn_embed_dim=spec.ffn,
                         expansion_ratio=ratio, model_type="llama" if spec.gated_mlp else "gpt2")
        la = LLMAnalysis(mc, get_gpu_config_by_name(la_gpu), get_dtype_config_by_name("w16a16e16"),
                         ParallelismConfig(tp_size=tp, pp_size=pp, dp_size=W // (tp * pp), sp_size=tp if sp else 1),
                         flops_efficiency=0.5, hbm_memory_efficiency=0.9)
        r = la.training(batch_size_per_gpu=b, global_batch_size=B, seq_len=s, activation_recomputation=rc[recompute],
                        ds_zero=DSZeRO(zero), flash_attn=True, mlp_gated_linear_units=spec.gated_mlp)
        label = f"{name} {W}g t{tp} p{pp} z{zero}"
        rows = [("params", spec.params, r["num_params_total"]),
                ("weights GB", ours.memory.weights_bytes / 1e9, r["weight_memory_per_gpu"] / 1e9),
                ("grads GB", ours.memory.gradients_bytes / 1e9, r["gradient_memory_per_gpu"] / 1e9),
                ("optimizer GB", ours.memory.optimizer_bytes / 1e9, r["optimizer_state_memory_per_gpu"] / 1e9),
                ("activ. GB", ours.memory.activations_bytes / 1e9, r["activation_memory_per_gpu"] / 1e9),
                ("step s", ours.step_s, r["latency_per_iter"])]
        for q, a, c in rows:
            print(f"{label:<34}{q:<14}{a:>12.4g}{c:>14.4g}{a / c if c else float('nan'):>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
