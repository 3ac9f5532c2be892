"""The measuring side of a peer-benchmark worker, shared by both implementations.

A worker process holds one implementation (an *adapter*: graph-urpe's in ``_ours_worker.py``,
``transformers``' in ``_hf_worker.py``), its preprocessed molecules and its models, and answers
the driver's commands (:func:`_protocol.serve`). Every time reported is CPU time of the worker
process (``time.process_time``) with one torch thread; the driver runs one command at a time, so
the two workers never compete with each other.

An adapter has:

* ``prepare(item) -> input``: a :func:`_protocol.to_hf_item` dict turned into what the
  implementation's preprocessing consumes (not timed);
* ``preprocess(input) -> graph``: the per-molecule preprocessing that is timed;
* ``spd(graph) -> [n, n]`` int array: the shortest-path distances it computed (cross-check);
* ``collate(graphs) -> batch``; ``build(cfg, seed) -> {name: model}``;
* ``loss(model, batch) -> scalar tensor`` (training loss) and ``predict(model, batch)``.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
import torch
from _protocol import unpack
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import PeakMemory

LR, WEIGHT_DECAY = 2e-4, 0.01
#: The matrix-product kernels (their self time is the time spent in BLAS).
MATMUL_OPS = ("aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm", "aten::addbmm")


def _nbytes(obj) -> int:
    """Bytes of the arrays / tensors held by a preprocessed graph (each storage counted once)."""
    seen, total = set(), 0
    values = (obj if isinstance(obj, dict) else obj.to_dict()).values()
    for v in values:
        if isinstance(v, np.ndarray | torch.Tensor) and id(v) not in seen:
            seen.add(id(v))
            total += v.nbytes
    return total


class Worker:
    """Commands of one worker; see the module docstring."""

    def __init__(self, adapter) -> None:
        self.adapter = adapter
        self.models: dict = {}

    def handlers(self) -> dict:
        return {name: getattr(self, name) for name in (
            "load", "preprocess", "check", "build", "train", "eval", "memory_preprocess",
            "memory_train", "flops", "profile", "matmul")}

    def load(self, path: str, threads: int = 1, seed: int = 0) -> dict:
        torch.set_num_threads(threads)
        torch.manual_seed(seed)
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        self.inputs = [self.adapter.prepare(it) for it in unpack(arrays)]
        self.batches = {k.removeprefix("batches_"): v for k, v in arrays.items()
                        if k.startswith("batches_")}
        self.check_spd = [arrays[f"spd_{g}"] for g in range(int(arrays["num_checked"]))]
        self.graphs: list = [None] * len(self.inputs)
        return {"graphs": len(self.inputs), "torch": torch.__version__,
                "threads": torch.get_num_threads()}

    def preprocess(self, start: int, stop: int) -> dict:
        t0 = time.process_time()
        out = [self.adapter.preprocess(x) for x in self.inputs[start:stop]]
        cpu_s = time.process_time() - t0
        self.graphs[start:stop] = out
        return {"cpu_s": cpu_s, "graphs": stop - start}

    def check(self) -> dict:
        bad = [g for g, ref in enumerate(self.check_spd)
               if not np.array_equal(self.adapter.spd(self.graphs[g]), ref)]
        return {"checked": len(self.check_spd), "mismatches": bad}

    def build(self, cfg: dict, seed: int = 0) -> dict:
        self.models = {}
        for name, model in self.adapter.build(cfg, seed).items():
            opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
            self.models[name] = (model.train(), opt)
        return {"params": {n: sum(p.numel() for p in m.parameters())
                           for n, (m, _) in self.models.items()}}

    def _batch(self, batching: str, i: int):
        return self.adapter.collate([self.graphs[j] for j in self.batches[batching][i]])

    def _step(self, name: str, batch) -> float:
        model, opt = self.models[name]
        opt.zero_grad(set_to_none=True)
        loss = self.adapter.loss(model, batch)
        loss.backward()
        opt.step()
        return float(loss.detach())

    def train(self, batching: str, i: int, order: list[str] | None = None) -> dict:
        t0 = time.process_time()
        batch = self._batch(batching, i)
        collate_s, step_s = time.process_time() - t0, {}
        for name in order or list(self.models):
            t0 = time.process_time()
            self._step(name, batch)
            step_s[name] = time.process_time() - t0
        return {"collate_s": collate_s, "step_s": step_s,
                "graphs": len(self.batches[batching][i])}

    def eval(self, batching: str, i: int, order: list[str] | None = None) -> dict:
        t0 = time.process_time()
        batch = self._batch(batching, i)
        collate_s, step_s = time.process_time() - t0, {}
        for name in order or list(self.models):
            model = self.models[name][0].eval()
            t0 = time.process_time()
            with torch.no_grad():
                self.adapter.predict(model, batch)
            step_s[name] = time.process_time() - t0
            model.train()
        return {"collate_s": collate_s, "step_s": step_s,
                "graphs": len(self.batches[batching][i])}

    def memory_preprocess(self) -> dict:
        """Peak above entry while preprocessing every molecule (results kept, as a dataset
        does), and the bytes the preprocessed molecules hold."""
        with PeakMemory(torch.device("cpu")) as pm:
            out = [self.adapter.preprocess(x) for x in self.inputs]
        return {"peak_mib": pm.peak_bytes / 2**20, "method": pm.method,
                "bytes_per_graph": float(np.mean([_nbytes(g) for g in out]))}

    def memory_train(self, batching: str, warm: list[int], steps: list[int]) -> dict:
        """Per model: ``warm`` untimed steps (AdamW's state exists), then the peak above entry
        over ``steps`` (collate included)."""
        out = {}
        for name in self.models:
            for i in warm:
                self._step(name, self._batch(batching, i))
            with PeakMemory(torch.device("cpu")) as pm:
                for i in steps:
                    self._step(name, self._batch(batching, i))
            out[name] = pm.peak_bytes / 2**20
        return {"peak_mib": out, "method": pm.method}

    def flops(self, batching: str, indices: list[int]) -> dict:
        """FLOPs of forward + backward (``FlopCounterMode``: matmuls, bmm, convolutions,
        attention kernels) per model over the given batches, and their graphs."""
        out, graphs = {}, sum(len(self.batches[batching][i]) for i in indices)
        for name, (model, opt) in self.models.items():
            out[name] = 0
            for i in indices:
                batch = self._batch(batching, i)
                opt.zero_grad(set_to_none=True)
                counter = FlopCounterMode(display=False)  # entering it resets its counts
                with counter:
                    self.adapter.loss(model, batch).backward()
                out[name] += counter.get_total_flops()
            opt.zero_grad(set_to_none=True)
        return {"flops": out, "graphs": graphs}

    def profile(self, name: str, batching: str, i: int, top: int = 12) -> dict:
        """``torch.profiler`` of one training step (after one unprofiled step on the same batch):
        the ``top`` ops by self CPU time, and the time and FLOPs (the profiler's count) of the
        matrix products (:data:`MATMUL_OPS`)."""
        batch = self._batch(batching, i)
        self._step(name, batch)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                    with_flops=True) as prof:
            self._step(name, batch)
        events = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
        total = sum(e.self_cpu_time_total for e in events)
        mm = [e for e in events if e.key in MATMUL_OPS]
        return {"total_ms": total / 1e3, "matmul_ms": sum(e.self_cpu_time_total for e in mm) / 1e3,
                "matmul_flops": sum(e.flops for e in mm), "ops": [
                    {"op": e.key, "self_ms": e.self_cpu_time_total / 1e3,
                     "share": e.self_cpu_time_total / total, "calls": e.count}
                    for e in events[:top]]}

    def matmul(self, n: int = 2048, repeats: int = 10) -> dict:
        """Single-thread float32 ``torch.matmul`` of two ``[n, n]`` matrices: the best GFLOP/s
        (``2 n^3`` FLOPs per product) over ``repeats`` CPU-timed products after one warm-up."""
        a, b = torch.randn(n, n), torch.randn(n, n)
        torch.matmul(a, b)
        best = min(self._timed(lambda: torch.matmul(a, b)) for _ in range(repeats))
        return {"n": n, "gflops": 2 * n**3 / best / 1e9, "threads": torch.get_num_threads()}

    @staticmethod
    def _timed(fn) -> float:
        t0 = time.process_time()
        fn()
        return time.process_time() - t0
