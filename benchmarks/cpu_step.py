"""Where a CPU training step of the default job goes, and what each CPU measure of issue 13 saves.

Measurements in one run, on the default job's model (URPE-Graphormer-slim: 12 layers, width
80, 8 heads of dim 10, FFN 80, multi-hop edge encoding over 20 hops, no dropout, OGB features) and
its data (the embedded ZINC-like training split, size-bucketed batches of at most 128 molecules):

1. **Head-dim GEMM sweep**: CPU time of the per-head product ``W V`` (``[B*H, N, N] x [B*H, N,
   d]``, ``B*H = 1024``, ``N = 27``) for head dims ``d`` from 4 to 64: the reason the fused block
   pads head dims below :data:`graph_urpe.nn._fused.CPU_MIN_HEAD_DIM` (MKL's batched GEMM with an
   output width below 16 runs at a fraction of its speed at 16).
2. **Interleaved A/B of whole training steps** (forward, L1 loss, backward, AdamW), CPU time of the
   process, one model per variant with the same initial weights, every batch fed to every variant
   in rotating order, so machine load hits all alike: ``default`` (as the default job: head dims
   padded, fused AdamW), ``no-pad`` (``CPU_MIN_HEAD_DIM = 0``, the block on the unpadded views),
   ``foreach-adamw`` (AdamW's default multi-tensor implementation).
3. **Fixed cost per step**: the same rotation over 1-layer models with and without the multi-hop
   edge encoding next to the 12-layer model, giving the cost per layer (``(T12 - T1) / 11``), the
   per-step cost outside the layers (``T1 - per layer``) and the edge encoding's share of it
   (path walk, gathers and their backward).
4. **The path walk** (:func:`graph_urpe.dense.to_dense_path_edges`, max_hops 20) on the timed
   batches: CPU ms per batch, the batch's largest SPD (where the walk stops early), and one
   73k-entry gather of the walk by advanced indexing vs ``index_select``.
5. **Two-thread scaling of this machine**: float32 ``2048 x 2048`` ``torch.matmul`` GFLOP/s on one
   and two threads (best of 5, wall clock): the most two threads can give a step.
6. **Share of the matmul ceiling** (issue 32's definition, that of section 10 of
   ``benchmarks/README.md``): the step's FLOPs (forward + backward, counted by
   :class:`torch.utils.flop_counter.FlopCounterMode` on the timed batches) per CPU second of the
   ``default`` step, over the one-thread GFLOP/s of a float32 ``2048 x 2048`` matmul timed in CPU
   time between the rounds of the rotation (best of all rounds), so that load on the shared
   machine (the other vCPU of a core) slows both alike.

7. **The matmul floor**: every ``mm`` / ``bmm`` / ``addmm`` of the default step (forward and
   backward, recorded with their shapes and strides by a ``TorchDispatchMode`` on the timed
   batches) replayed alone on fresh tensors of the same layouts, in CPU time: what the step would
   cost if everything but its matrix products were free, and so the highest share of the ceiling
   any fusion of the element-wise work could reach with these products.

Prints one JSON line per measurement and markdown tables. With ``--threads 1`` (the default) the
CPU times are robust to other processes' load; ``--threads 2`` shows the 2-core case (then wall
time is the relevant clock and is reported too).

Usage::

    python benchmarks/cpu_step.py                # 20 timed batches after 3 warm-up ones
    python benchmarks/cpu_step.py --steps 40 --threads 2
    python benchmarks/cpu_step.py --skip-parts            # GEMM sweep, steps, ceiling, floor
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F
from _common import emit, machine_info, markdown_table, ratio
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

import graph_urpe.nn._fused as fused_block
from graph_urpe.data.featurize import feature_dims
from graph_urpe.data.modules.molecule import ZincLikeDataModule
from graph_urpe.dense import to_dense_path_edges
from graph_urpe.nn import Graphormer

HEAD_DIMS = (4, 6, 8, 10, 12, 14, 16, 20, 24, 32, 48, 64)
DEFAULT_PAD = getattr(fused_block, "CPU_MIN_HEAD_DIM", 0)  # 0: a version without padding


def gemm_sweep(repeats: int) -> list[dict]:
    """CPU ms and GFLOP/s of ``bmm([1024, 27, 27], [1024, 27, d])`` for each head dim ``d``."""
    g = torch.Generator().manual_seed(0)
    rows = []
    for d in HEAD_DIMS:
        w = torch.randn(1024, 27, 27, generator=g)
        v = torch.randn(1024, 27, d, generator=g)
        for _ in range(3):
            torch.bmm(w, v)
        start = time.process_time()
        for _ in range(repeats):
            torch.bmm(w, v)
        ms = (time.process_time() - start) / repeats * 1e3
        rows.append({"bench": "gemm", "head_dim": d, "cpu_ms": ms,
                     "gflops": 2 * 1024 * 27 * 27 * d / ms / 1e6})
    return rows


def gather_compare(repeats: int = 200) -> dict:
    """CPU ms of one 73,729-entry int64 gather: advanced indexing vs ``index_select``."""
    g = torch.Generator().manual_seed(0)
    table = torch.randint(0, 73_000, (73_729,), generator=g)
    state = torch.randint(0, 73_729, (73_728,), generator=g)
    out = {"bench": "gather"}
    for name, fn in (("advanced_indexing_ms", lambda: table[state]),
                     ("index_select_ms", lambda: table.index_select(0, state))):
        for _ in range(5):
            fn()
        start = time.process_time()
        for _ in range(repeats):
            fn()
        out[name] = (time.process_time() - start) / repeats * 1e3
    return out


def walk_cost(batches: list) -> dict:
    """CPU ms per batch of the path walk, and the batches' largest SPDs."""
    for batch in batches[:2]:
        to_dense_path_edges(batch.spd_pred_index, batch.pair_index, batch.edge_index, batch.batch,
                            batch.ptr, max_hops=20)
    start = time.process_time()
    for batch in batches:
        to_dense_path_edges(batch.spd_pred_index, batch.pair_index, batch.edge_index, batch.batch,
                            batch.ptr, max_hops=20)
    return {"bench": "walk", "cpu_ms_per_batch": (time.process_time() - start) / len(batches) * 1e3,
            "max_spd": [int(b.spd.max()) for b in batches]}


def thread_scaling(threads: int) -> dict:
    """GFLOP/s of a float32 2048 x 2048 matmul on 1 and 2 threads (best of 5, wall clock)."""
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    out = {"bench": "matmul_threads"}
    for t in (1, 2):
        torch.set_num_threads(t)
        for _ in range(2):
            a @ b
        best = float("inf")
        for _ in range(5):
            start = time.perf_counter()
            a @ b
            best = min(best, time.perf_counter() - start)
        out[f"gflops_{t}_threads"] = 2 * 2048**3 / best / 1e9
    torch.set_num_threads(threads)
    return out


def matmul_cpu_gflops(size: int = 2048) -> float:
    """GFLOP/s of one float32 ``size x size`` matmul in this process's CPU time (one call)."""
    a, b = torch.ones(size, size), torch.ones(size, size)
    start = time.process_time()
    a @ b
    return 2 * size**3 / max(time.process_time() - start, 1e-9) / 1e9


def step_flops(model, batches: list) -> float:
    """FLOPs of forward + backward (L1 loss) over ``batches``, counted by ``FlopCounterMode``."""
    total = 0
    for batch in batches:
        with FlopCounterMode(display=False) as counter:
            out = model(batch)
            F.l1_loss(out.squeeze(-1), batch.y.view(-1).float()).backward()
        total += counter.get_total_flops()
    model.zero_grad(set_to_none=True)
    return float(total)


class _RecordMatmuls(TorchDispatchMode):
    """Records ``(op, [(shape, stride) or scalar per argument])`` of every matrix product."""

    OPS = {torch.ops.aten.mm.default, torch.ops.aten.bmm.default, torch.ops.aten.addmm.default}

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in self.OPS:
            self.calls.append((func, [(tuple(a.shape), a.stride()) if torch.is_tensor(a) else a
                                      for a in args], dict(kwargs or {})))
        return func(*args, **(kwargs or {}))


def matmul_floor(model, batches: list) -> dict:
    """CPU seconds per step of the default step's matrix products replayed alone (section 7)."""
    recorder = _RecordMatmuls()
    for batch in batches:
        with recorder:
            out = model(batch)
            F.l1_loss(out.squeeze(-1), batch.y.view(-1).float()).backward()
    model.zero_grad(set_to_none=True)
    g = torch.Generator().manual_seed(0)
    calls = [(func, [torch.empty_strided(*a).normal_(generator=g) if isinstance(a, tuple) else a
                     for a in args], kwargs) for func, args, kwargs in recorder.calls]
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        for func, args, kwargs in calls:
            func(*args, **kwargs)
        best = min(best, time.process_time() - start)
    return {"bench": "matmul_floor", "calls_per_step": len(calls) / len(batches),
            "cpu_ms_per_step": best / len(batches) * 1e3}


def _model(atom, bond, num_layers: int, **kwargs) -> Graphormer:
    torch.manual_seed(0)
    return Graphormer(1, atom_categories=atom, bond_categories=bond, num_layers=num_layers,
                      embed_dim=80, num_heads=8, ffn_dim=80, attention="urpe", max_distance=36,
                      max_degree=63, max_hops=20, dropout=0.0, attention_dropout=0.0, **kwargs)


def rotate(variants: dict, batches: list, warmup: int,
           ceiling: list[float] | None = None) -> dict[str, dict]:
    """Feed every batch to every variant (rotating order); CPU and wall seconds per variant.

    ``variants``: name -> ``(model, optimizer, pad)``, ``pad`` the value of
    ``CPU_MIN_HEAD_DIM`` while that variant runs. Per variant also ``"first_cpu_s"`` (its first
    step) and the per-step CPU seconds ``"steps"``. With a list ``ceiling``, one
    :func:`matmul_cpu_gflops` per round is appended to it.
    """
    names = list(variants)
    totals = {n: {"cpu_s": 0.0, "wall_s": 0.0, "steps": []} for n in names}
    for i, batch in enumerate(batches):
        order = names[i % len(names):] + names[:i % len(names)]
        if ceiling is not None:
            ceiling.append(matmul_cpu_gflops())
        for name in order:
            model, opt, pad = variants[name]
            fused_block.CPU_MIN_HEAD_DIM = pad
            wall, cpu = time.perf_counter(), time.process_time()
            out = model(batch)
            loss = F.l1_loss(out.squeeze(-1), batch.y.view(-1).float())
            opt.zero_grad()
            loss.backward()
            opt.step()
            if i == 0:
                totals[name]["first_cpu_s"] = time.process_time() - cpu
            if i >= warmup:
                totals[name]["steps"].append(time.process_time() - cpu)
                totals[name]["cpu_s"] += time.process_time() - cpu
                totals[name]["wall_s"] += time.perf_counter() - wall
    fused_block.CPU_MIN_HEAD_DIM = DEFAULT_PAD
    return totals


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="data", help="data root of the default job "
                        "(default: data, the ZINC-like data under data/zinc_like)")
    parser.add_argument("--steps", type=int, default=20, help="timed batches (default: 20)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed batches (default: 3)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default: 1)")
    parser.add_argument("--skip-parts", action="store_true",
                        help="only the GEMM sweep, the step rotation and the ceiling share")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    emit({"bench": "machine", **machine_info(torch.device("cpu")),
          "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY")})

    gemm = gemm_sweep(repeats=30)
    for row in gemm:
        emit(row)
    print("\n" + markdown_table(
        ["head dim d", "CPU ms", "GFLOP/s", "time / time at d = 16"],
        [[r["head_dim"], f"{r['cpu_ms']:.2f}", f"{r['gflops']:.1f}",
          ratio(r["cpu_ms"], next(x["cpu_ms"] for x in gemm if x["head_dim"] == 16))]
         for r in gemm]))

    dm = ZincLikeDataModule(root=args.root, batch_size=128)
    dm.prepare_data()
    dm.setup("fit")
    batches = [b for _, b in zip(range(args.warmup + args.steps), dm.train_dataloader())]
    atom, bond = feature_dims("ogb")

    def variant(num_layers=12, pad=DEFAULT_PAD, fused_adamw=True, **kwargs):
        model = _model(atom, bond, num_layers, **kwargs)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01,
                                fused=fused_adamw)
        return model, opt, pad

    named = {"default": variant(), "no-pad": variant(pad=0),
             "foreach-adamw": variant(fused_adamw=False)}
    flops = step_flops(named["default"][0], batches[args.warmup:]) / args.steps
    rates: list[float] = []
    steps = rotate(named, batches, args.warmup, ceiling=rates)
    ceiling = max(rates)
    base = steps["default"]
    rows = []
    for name, t in steps.items():
        per = sorted(t["steps"])
        rec = {"bench": "step", "variant": name, "threads": args.threads,
               "cpu_ms": t["cpu_s"] / args.steps * 1e3, "wall_ms": t["wall_s"] / args.steps * 1e3,
               "cpu_ms_median": per[len(per) // 2] * 1e3, "first_step_cpu_s": t["first_cpu_s"],
               "gflops": flops / (t["cpu_s"] / args.steps) / 1e9}
        rec["ceiling_share"] = rec["gflops"] / ceiling
        emit(rec)
        rows.append([name, f"{rec['cpu_ms']:.0f}", f"{rec['cpu_ms_median']:.0f}",
                     f"{rec['wall_ms']:.0f}", ratio(t["cpu_s"], base["cpu_s"]),
                     f"{rec['first_step_cpu_s']:.2f}", f"{rec['gflops']:.1f}",
                     f"{rec['ceiling_share']:.2f}"])
    emit({"bench": "ceiling", "matmul_cpu_gflops": ceiling, "step_gflop": flops / 1e9,
          "graphs_per_step": sum(b.num_graphs for b in batches[args.warmup:]) / args.steps})
    print("\n" + markdown_table(
        ["variant", "CPU ms / step (mean)", "median", "wall ms / step", "CPU / default",
         "first step CPU s", "GFLOP/s", "share of ceiling"], rows))
    print(f"\nstep: {flops / 1e9:.2f} GFLOP (FlopCounterMode, forward + backward); ceiling "
          f"{ceiling:.1f} GFLOP/s (2048 x 2048 float32 matmul, CPU time, best of the rounds)")
    floor = matmul_floor(named["default"][0], batches[args.warmup:])
    floor["gflops"] = flops / floor["cpu_ms_per_step"] * 1e3 / 1e9
    floor["ceiling_share"] = floor["gflops"] / ceiling
    floor["step_share"] = floor["cpu_ms_per_step"] / (base["cpu_s"] / args.steps * 1e3)
    emit(floor)
    print(f"matmul floor: {floor['calls_per_step']:.0f} products per step take "
          f"{floor['cpu_ms_per_step']:.0f} CPU ms alone ({floor['step_share']:.2f} of the default "
          f"step) at {floor['gflops']:.1f} GFLOP/s = {floor['ceiling_share']:.2f} of the ceiling: "
          "the most any fusion of the rest can reach")
    if args.skip_parts:
        return

    parts = rotate({"12 layers": variant(), "1 layer": variant(1),
                    "1 layer, no edge encoding": variant(1, edge_encoding="none")},
                   batches, args.warmup)
    ms = {k: v["cpu_s"] / args.steps * 1e3 for k, v in parts.items()}
    per_layer = (ms["12 layers"] - ms["1 layer"]) / 11
    fixed = ms["1 layer"] - per_layer
    edge = ms["1 layer"] - ms["1 layer, no edge encoding"]
    emit({"bench": "parts", "threads": args.threads, **{f"{k} cpu_ms": v for k, v in ms.items()},
          "per_layer_ms": per_layer, "fixed_ms": fixed, "edge_encoding_ms": edge})
    print("\n" + markdown_table(
        ["12-layer step", "per layer", "outside the layers", "of which edge encoding",
         "edge encoding / step"],
        [[f"{ms['12 layers']:.0f} ms", f"{per_layer:.1f} ms", f"{fixed:.1f} ms", f"{edge:.1f} ms",
          ratio(edge, ms["12 layers"])]]))

    walk, gather = walk_cost(batches[args.warmup:]), gather_compare()
    emit(walk)
    emit(gather)
    print(f"\npath walk: {walk['cpu_ms_per_batch']:.1f} ms CPU per batch; largest SPD per batch "
          f"{walk['max_spd']} (of max_hops 20); one 73k-entry gather: advanced indexing "
          f"{gather['advanced_indexing_ms']:.2f} ms, index_select {gather['index_select_ms']:.2f} "
          f"ms ({ratio(gather['advanced_indexing_ms'], gather['index_select_ms'])}x)")
    scaling = thread_scaling(args.threads)
    emit(scaling)
    print(f"2048 x 2048 matmul: {scaling['gflops_1_threads']:.1f} GFLOP/s on 1 thread, "
          f"{scaling['gflops_2_threads']:.1f} on 2 "
          f"({ratio(scaling['gflops_2_threads'], scaling['gflops_1_threads'])}x)")


if __name__ == "__main__":
    sys.exit(main())
