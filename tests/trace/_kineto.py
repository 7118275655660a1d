"""Build small Kineto-shaped traces by hand for the tests (times in microseconds, as Kineto writes them)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path


class TraceBuilder:
    """Collects events; ``kernel`` adds a GPU kernel and its runtime launch with a shared correlation."""

    def __init__(self, rank: int = 0, world_size: int = 2, backend: str = "nccl") -> None:
        self.events: list[dict] = []
        self.info = {"backend": backend, "rank": rank, "world_size": world_size}
        self.correlation = 0

    def kernel(self, name: str, ts: float, dur: float, stream: int = 7, launch_ts: float | None = None,
               cat: str = "kernel", cpu_tid: int = 1) -> int:
        self.correlation += 1
        c = self.correlation
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
                            "args": {"stream": stream, "device": 0, "correlation": c}})
        self.events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": cpu_tid,
                            "ts": ts if launch_ts is None else launch_ts, "dur": 1,
                            "args": {"correlation": c}})
        return c

    def compute(self, ts, dur, **kw):
        return self.kernel("void gemm_kernel<float>(float*)", ts, dur, **kw)

    def nccl(self, ts, dur, stream: int = 20, op: str = "AllReduce", **kw):
        return self.kernel(f"ncclDevKernel_{op}_Sum_f32_RING_LL(ncclDevComm*)", ts, dur, stream=stream, **kw)

    def step(self, n: int, ts: float, dur: float) -> None:
        self.events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1, "tid": 1,
                            "ts": ts, "dur": dur, "args": {}})

    def param_comms(self, ts: float, dur: float, *, nelems_in: int, nelems_out: int | None = None,
                    dtype: str = "Float", group: int = 2, name: str = "allreduce", cpu_tid: int = 1) -> None:
        self.events.append({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": cpu_tid,
                            "ts": ts, "dur": dur,
                            "args": {"Collective name": name, "In msg nelems": nelems_in,
                                     "Out msg nelems": nelems_in if nelems_out is None else nelems_out,
                                     "dtype": dtype, "Group size": group}})

    def obj(self) -> dict:
        return {"schemaVersion": 1, "distributedInfo": self.info, "traceEvents": self.events,
                "traceName": "hand-made", "displayTimeUnit": "ms"}

    def write(self, path: Path, *, gz: bool = False, indent: int | None = None) -> Path:
        text = json.dumps(self.obj(), indent=indent)
        if gz:
            with gzip.open(path, "wt", encoding="utf-8") as fh:
                fh.write(text)
        else:
            path.write_text(text, encoding="utf-8")
        return path
