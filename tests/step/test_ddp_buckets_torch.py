"""commcost's DDP bucket emulation against torch itself (torch 2.13, CPU).

Two kinds of check: the C++ packing routine ``dist._compute_bucket_assignment_by_size``
on real nn.Modules (a small GPT-like stack and an MLP, one with mixed dtypes),
and a real single-process gloo ``DistributedDataParallel`` whose logging data
shows the iteration-0 bucket and the buckets it rebuilds from the gradient-ready
order.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from commcost.step.ddp_buckets import assign_buckets_by_size, ddp_bucket_caps, initial_buckets, rebuilt_buckets

pytestmark = pytest.mark.torch


def _torch():
    return pytest.importorskip("torch")


def _gpt_like(torch, layers=3, h=64, vocab=500, seq=32):
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(h)
            self.attn_qkv = nn.Linear(h, 3 * h)
            self.attn_proj = nn.Linear(h, h)
            self.ln_2 = nn.LayerNorm(h)
            self.fc = nn.Linear(h, 4 * h)
            self.proj = nn.Linear(4 * h, h)

        def forward(self, x):
            q, k, v = self.attn_qkv(self.ln_1(x)).chunk(3, dim=-1)
            att = torch.softmax(q @ k.transpose(-1, -2) / h ** 0.5, dim=-1) @ v
            x = x + self.attn_proj(att)
            return x + self.proj(torch.relu(self.fc(self.ln_2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab, h)
            self.wpe = nn.Embedding(seq, h)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln_f = nn.LayerNorm(h)
            self.head = nn.Linear(h, vocab, bias=False)

        def forward(self, idx):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
            for b in self.blocks:
                x = b(x)
            return self.head(self.ln_f(x))

    return GPT(), lambda: torch.randint(0, vocab, (2, seq))


def _mlp(torch):
    nn = torch.nn
    m = nn.Sequential(nn.Linear(100, 300), nn.ReLU(), nn.Linear(300, 300), nn.ReLU(),
                      nn.Linear(300, 50), nn.ReLU(), nn.Linear(50, 10))
    return m, lambda: torch.randn(8, 100)


def _nbytes(p):
    return p.numel() * p.element_size()


def _ours(params, limits, order=None):
    keys = [(p.dtype, p.device) for p in params]
    buckets, lims = assign_buckets_by_size([_nbytes(p) for p in params], limits, keys=keys, order=order)
    return [list(b) for b in buckets], list(lims)


@pytest.mark.parametrize("model", ["gpt", "mlp", "mlp_mixed_dtype"])
@pytest.mark.parametrize("limits", [[sys.maxsize], [2**16, 2**18], [2**14], [1, 2**20], [50_000, 70_000, 200_000]])
def test_module_order_assignment_matches_torch(model, limits):
    torch = _torch()
    import torch.distributed as dist
    m, _ = _gpt_like(torch) if model == "gpt" else _mlp(torch)
    if model == "mlp_mixed_dtype":
        m[2].half()
    params = list(m.parameters())
    theirs, their_limits = dist._compute_bucket_assignment_by_size(params, limits, [False] * len(params))
    assert _ours(params, limits) == ([list(b) for b in theirs], list(their_limits))


@pytest.mark.parametrize("model", ["gpt", "mlp"])
@pytest.mark.parametrize("limits", [[2**16, 2**18], [2**20, 25 * 2**20], [4096, 4096]])
def test_ready_order_assignment_matches_torch(model, limits):
    # the rebuild: tensors passed in gradient-ready order, with their indices; no sort
    torch = _torch()
    import torch.distributed as dist
    m, _ = _gpt_like(torch) if model == "gpt" else _mlp(torch)
    params = list(m.parameters())
    order = list(range(len(params)))[::-1]
    ready = [params[i] for i in order]
    theirs, their_limits = dist._compute_bucket_assignment_by_size(ready, limits, [False] * len(params), order)
    assert _ours(params, limits, order=order) == ([list(b) for b in theirs], list(their_limits))


def _parse_indices(text):
    return [[int(i) for i in part.split()] for part in text.split(",")]


CHILD_TIMEOUT_S = 120
"""A real DDP run here takes about a second; gloo's single-process group once hung in a full suite run
(a thread waiting forever in the same process as the tests before it), so each run has its own
interpreter, a timeout and one retry."""


def _ddp_in_child(case: str, bucket_cap_mb) -> dict:
    """What :func:`_child` prints for ``case``, run in a fresh interpreter (subprocess.run kills it at the
    timeout: no child is left behind)."""
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root / "src"), os.environ.get("PYTHONPATH", "")]))
    for _ in range(2):
        try:
            r = subprocess.run([sys.executable, __file__, case, json.dumps(bucket_cap_mb)], capture_output=True,
                               text=True, timeout=CHILD_TIMEOUT_S, env=env)
        except subprocess.TimeoutExpired:
            continue
        assert r.returncode == 0, r.stderr[-2000:]
        return json.loads(r.stdout)
    pytest.fail(f"the gloo DDP run of {case!r} hung twice ({CHILD_TIMEOUT_S} s each)")


def _child(case: str, bucket_cap_mb) -> dict:
    """One real single-process gloo DDP run: the gradient-ready order of the first backward, DDP's logging
    data after the first and after the third iteration, and every parameter's bytes."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    if case == "rebuild":
        m, batch = _gpt_like(torch, layers=4, h=128, vocab=3000)
        kwargs = {}
    else:  # "unused": find_unused_parameters=True on four Linear(600, 600)
        m = torch.nn.Sequential(*[torch.nn.Linear(600, 600) for _ in range(4)])
        batch = lambda: torch.randn(4, 600)  # noqa: E731
        kwargs = {"find_unused_parameters": True}
    params = list(m.parameters())
    index = {id(p): i for i, p in enumerate(params)}
    ready = []
    for p in params:
        p.register_post_accumulate_grad_hook(lambda p: ready.append(index[id(p)]))
    keys = ("bucket_sizes", "rebuilt_bucket_sizes", "rebuilt_per_bucket_param_indices")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        ddp = DDP(m, bucket_cap_mb=bucket_cap_mb, **kwargs)
        ddp(batch()).sum().backward()
        first_order = list(ready)
        first = {k: str(v) for k, v in ddp._get_ddp_logging_data().items() if k in keys}
        for _ in range(2):
            ddp(batch()).sum().backward()
        last = {k: str(v) for k, v in ddp._get_ddp_logging_data().items() if k in keys}
    finally:
        dist.destroy_process_group()
    return {"first_order": first_order, "first": first, "last": last, "nbytes": [_nbytes(p) for p in params]}


@pytest.mark.parametrize("bucket_cap_mb", [None, 0.05, 0.2])
def test_real_ddp_runs_one_bucket_first_then_rebuilds_in_ready_order(bucket_cap_mb):
    _torch()
    run = _ddp_in_child("rebuild", bucket_cap_mb)
    nbytes, first_order, data0, data = run["nbytes"], run["first_order"], run["first"], run["last"]
    # iteration 0: one bucket holding every gradient (limits [sys.maxsize])
    caps = ddp_bucket_caps(bucket_cap_mb)
    ours0 = initial_buckets(nbytes, caps)
    assert [int(s) for s in data0["bucket_sizes"].split(",")] == [sum(nbytes)]
    assert len(ours0) == 1
    theirs = _parse_indices(data["rebuilt_per_bucket_param_indices"])
    ours = rebuilt_buckets(nbytes, first_order, caps)
    assert [list(b) for b in ours] == theirs
    assert len(theirs) > 1
    sizes = [int(s) for s in data["rebuilt_bucket_sizes"].split(",")]
    assert sizes == [sum(nbytes[i] for i in b) for b in ours]
    # the first rebuilt bucket holds the first-ready gradients (the output head)
    assert theirs[0][0] == len(nbytes) - 1


def test_real_ddp_with_find_unused_parameters_keeps_the_small_bucket_last():
    _torch()
    run = _ddp_in_child("unused", None)
    nbytes, data = run["nbytes"], run["last"]
    # module order, limits [1 MiB, 25 MiB]: weight 0 is 600*600*4 = 1,440,000 B >= 1 MiB -> bucket [0];
    # the other 7 tensors (4,327,200 B) stay under 25 MiB -> [1..7]; reversed: [1..7] first, [0] last
    ours = initial_buckets(nbytes, ddp_bucket_caps(None), find_unused_parameters=True)
    assert ours == ((1, 2, 3, 4, 5, 6, 7), (0,))
    assert [int(s) for s in data["bucket_sizes"].split(",")] == [sum(nbytes[i] for i in b) for b in ours]
    assert not data.get("rebuilt_bucket_sizes")


@pytest.mark.parametrize("bucket_cap_mb", [None, 25, 0.5, 100])
def test_caps_match_torchs_bucket_capacity_config(bucket_cap_mb):
    _torch()
    from torch.nn.parallel.distributed import _BucketCapacityConfig
    theirs = _BucketCapacityConfig.create(bucket_cap_mb, None, False)
    ours = ddp_bucket_caps(bucket_cap_mb)
    assert (ours.bucket_cap_bytes, ours.first_bucket_cap_bytes) == \
        (theirs.bucket_bytes_cap, theirs.first_bucket_bytes_cap)


if __name__ == "__main__":  # the child of _ddp_in_child: python this_file CASE BUCKET_CAP_MB_JSON
    print(json.dumps(_child(sys.argv[1], json.loads(sys.argv[2]))))
