"""Train a small MLP with DDP over gloo on CPU under torch.profiler; one Kineto trace per rank.

Run as ``python ddp_gloo_worker.py OUT_DIR RANK WORLD PORT`` (the test starts one process per
rank). The model and the bucket cap are fixed here and read by the test
(:data:`LAYERS`, :data:`BUCKET_CAP_MB`) so it can predict the DDP buckets with
:mod:`commcost.step.ddp_buckets`.
"""

from __future__ import annotations

import os
import sys

LAYERS = ((64, 256), (256, 256), (256, 128), (128, 10))
"""(in, out) features of each nn.Linear, in forward order (weights and biases, fp32)."""
BUCKET_CAP_MB = 0.25
"""DDP's bucket_cap_mb (MiB): 262144 bytes."""
STEPS = 6
"""Training iterations; the profiler records steps 2-5 (wait 1, warmup 1, active 4)."""


def main(out_dir: str, rank: int, world: int, port: int) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.manual_seed(0)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    layers = []
    for i, (n_in, n_out) in enumerate(LAYERS):
        layers.append(torch.nn.Linear(n_in, n_out))
        if i < len(LAYERS) - 1:
            layers.append(torch.nn.ReLU())
    model = DDP(torch.nn.Sequential(*layers), bucket_cap_mb=BUCKET_CAP_MB)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(32, LAYERS[0][0])
    y = torch.randn(32, LAYERS[-1][1])
    sched = torch.profiler.schedule(wait=1, warmup=1, active=STEPS - 2)
    path = os.path.join(out_dir, f"rank{rank}.json")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=sched, record_shapes=True,
                                on_trace_ready=lambda p: p.export_chrome_trace(path)) as prof:
        for _ in range(STEPS):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            prof.step()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
