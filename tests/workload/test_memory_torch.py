"""Memory of plan against a real torch transformer on CPU: model states exactly, activations against
what autograd saves (``torch.autograd.graph.saved_tensors_hooks``)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from commcost.workload.memory import layer_activation_bytes, model_state_bytes
from commcost.workload.transformer import TransformerSpec

pytestmark = pytest.mark.torch

SPEC = TransformerSpec(layers=2, hidden=64, heads=4, ffn_hidden=256, vocab=128, max_positions=32,
                       tied_embeddings=True, biases=True, dropout=True)
S, B = 32, 2


def _gpt():
    import torch
    from torch import nn

    h, a = SPEC.hidden, SPEC.heads

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(h), nn.LayerNorm(h)
            self.qkv, self.proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
            self.fc1, self.fc2 = nn.Linear(h, SPEC.ffn), nn.Linear(SPEC.ffn, h)

        def forward(self, x):
            b, s, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(h, dim=-1)
            q, k, v = (t.view(b, s, a, h // a).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-2, -1)) / math.sqrt(h // a)
            att = torch.nn.functional.dropout(torch.softmax(att, dim=-1), 0.1, training=True)
            y = (att @ v).transpose(1, 2).reshape(b, s, h)
            x = x + torch.nn.functional.dropout(self.proj(y), 0.1, training=True)
            m = self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))
            return x + torch.nn.functional.dropout(m, 0.1, training=True)

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(SPEC.vocab, h), nn.Embedding(SPEC.max_positions, h)
            self.blocks = nn.ModuleList(Block() for _ in range(SPEC.layers))
            self.ln_f = nn.LayerNorm(h)

        def forward(self, idx):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
            for blk in self.blocks:
                x = blk(x)
            return self.ln_f(x) @ self.wte.weight.T

    return GPT, Block


def test_model_states_exact_per_zero_shard():
    torch = pytest.importorskip("torch")

    GPT, _ = _gpt()
    model = GPT().to(torch.bfloat16)
    n = sum(p.numel() for p in model.parameters())
    assert n == SPEC.params                      # the shape formula counts every tensor once
    model(torch.randint(0, SPEC.vocab, (B, S))).float().sum().backward()
    master = [p.detach().float().clone().requires_grad_() for p in model.parameters()]
    for m, p in zip(master, model.parameters()):
        m.grad = p.grad.float()
    opt = torch.optim.Adam(master)
    opt.step()
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    grads = sum(p.grad.numel() * p.grad.element_size() for p in model.parameters())
    states = sum(t.numel() * t.element_size() for st in opt.state.values() for t in st.values() if t.dim() > 0)
    optimizer = states + sum(m.numel() * m.element_size() for m in master)
    assert (weights, grads, optimizer) == model_state_bytes(n, 0, 1)
    # ZeRO: a flat fp32 buffer of master weights split into dp shards, Adam run on one shard
    flat_master = torch.cat([p.detach().float().flatten() for p in model.parameters()])
    flat_grad = torch.cat([p.grad.float().flatten() for p in model.parameters()])
    for dp in (2, 4):
        assert n % dp == 0
        shard = flat_master.chunk(dp)[0].clone().requires_grad_()
        shard.grad = flat_grad.chunk(dp)[0].clone()
        opt = torch.optim.Adam([shard])
        opt.step()
        opt_shard = shard.numel() * shard.element_size() + sum(
            t.numel() * t.element_size() for st in opt.state.values() for t in st.values() if t.dim() > 0)
        w_shard, g_shard = shard.numel() * 2, shard.numel() * 2        # bf16 slices of the same shard
        assert model_state_bytes(n, 1, dp) == (weights, grads, opt_shard)
        assert model_state_bytes(n, 2, dp) == (weights, g_shard, opt_shard)
        assert model_state_bytes(n, 3, dp) == (w_shard, g_shard, opt_shard)


def _saved_bytes(fn):
    import torch

    params = set()
    seen: dict[int, int] = {}

    def pack(t):
        if t.data_ptr() not in params and t.numel() > 1:
            st = t.untyped_storage()
            seen[st.data_ptr()] = st.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn(params)
    return sum(seen.values()), out


@pytest.mark.parametrize("recompute", ["none", "full"])
def test_activations_within_10_percent_of_torch(recompute):
    torch = pytest.importorskip("torch")
    from torch.utils.checkpoint import checkpoint

    _, Block = _gpt()
    torch.manual_seed(0)
    blocks = [Block().to(torch.bfloat16) for _ in range(SPEC.layers)]
    x = torch.randn(B, S, SPEC.hidden, dtype=torch.bfloat16, requires_grad=True)

    def run(params):
        for blk in blocks:
            params.update(p.data_ptr() for p in blk.parameters())
        y = x
        for blk in blocks:
            y = checkpoint(blk, y, use_reentrant=True) if recompute == "full" else blk(y)
        return y

    saved, out = _saved_bytes(run)
    out.float().sum().backward()
    per_layer = layer_activation_bytes(seq_local=S, micro_batch=B, hidden=SPEC.hidden, heads=SPEC.heads,
                                       kv_heads=SPEC.heads, qk_head_dim=SPEC.d, head_dim=SPEC.d, mlp_width=SPEC.ffn,
                                       gated=False, tp=1, sequence_parallel=False, dropout=True, flash=False,
                                       recompute=recompute)
    predicted = SPEC.layers * per_layer
    print(f"recompute {recompute}: torch saved {saved} B, plan predicts {predicted:.0f} B ({saved / predicted - 1:+.1%})")
    assert abs(saved - predicted) <= 0.10 * predicted, (saved, predicted)


CHILD_TIMEOUT_S = 120
"""The FSDP2 run takes about a second; it initialises torch.distributed, so it has its own interpreter (no
process group of an earlier test in the way, none left behind) and subprocess.run kills it at the timeout."""


def _fsdp2_child() -> dict:
    """Two Linear layers under FSDP2 (bf16 parameters, fp32 reduce_dtype) on a single-rank gloo group, gradient
    sync off and parameters kept gathered, two backwards: each unsharded accumulated gradient's dtype and bytes."""
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.distributed import fsdp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp._fully_shard._fsdp_state import _get_module_fsdp_state

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        mesh = init_device_mesh("cpu", (1,))
        policy = fsdp.MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        model = nn.Sequential(nn.Linear(64, 256, bias=False), nn.Linear(256, 64, bias=False))
        for layer in model:
            fsdp.fully_shard(layer, mesh=mesh, mp_policy=policy, reshard_after_forward=False)
        fsdp.fully_shard(model, mesh=mesh, mp_policy=policy, reshard_after_forward=False)
        model.set_requires_gradient_sync(False)
        model.set_reshard_after_backward(False)
        x = torch.randn(4, 64)
        for _ in range(2):
            model(x).float().sum().backward()
        grads = [p.unsharded_accumulated_grad for layer in model
                 for p in _get_module_fsdp_state(layer)._fsdp_param_group.fsdp_params]
        return {"dtypes": [None if g is None else str(g.dtype) for g in grads],
                "bytes": sum(g.numel() * g.element_size() for g in grads if g is not None)}
    finally:
        dist.destroy_process_group()


def test_fsdp2_accumulates_unsharded_gradients_in_the_reduce_dtype():
    # torchtitan under a pipeline: FSDP2 with bf16 parameters and reduce_dtype fp32, gradient sync off for every
    # backward but the last (torch.distributed.pipelining), parameters kept gathered. Two Linear layers of
    # 64 x 256 and 256 x 64 = 32,768 parameters: after two backwards the unsharded gradients are accumulated in
    # fp32, 4 x 32,768 = 131,072 bytes (bf16 would be 65,536): the memory model's q_red = grad_bytes = 4
    pytest.importorskip("torch")
    pytest.importorskip("torch.distributed.fsdp")
    from commcost.workload.stacks import stack

    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root / "src"), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, __file__, "fsdp2"], capture_output=True, text=True,
                       timeout=CHILD_TIMEOUT_S, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert all(d == "torch.float32" for d in out["dtypes"])
    assert out["bytes"] == 131_072
    assert stack("torchtitan").grad_bytes * 32_768 == 131_072


if __name__ == "__main__":  # the child of test_fsdp2_accumulates_unsharded_gradients_in_the_reduce_dtype
    if sys.argv[1:] == ["fsdp2"]:
        print(json.dumps(_fsdp2_child()))
