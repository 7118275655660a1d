"""Memory of plan against a real torch transformer on CPU: model states exactly, activations against
what autograd saves (``torch.autograd.graph.saved_tensors_hooks``)."""

from __future__ import annotations

import math

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
