"""Training throughput of Graphormer-slim with RPE vs URPE, size-bucketed vs random batches.

Measures, on the embedded ZINC-like training split (10,000 molecules, shortest paths precomputed
once by :class:`~graph_urpe.transforms.AddShortestPathDistance`), for ``attention = rpe`` (the
spatial bias ``B``, Graphormer) and ``urpe`` (``B`` and the multiplier ``C``) crossed with two
batchings of the same number of graphs per batch (``--batch-size``, default 128, as the ZINC
configs):

* ``bucket``: :class:`~graph_urpe.data.sampler.SizeBucketBatchSampler` (graphs sorted by size, cut
  into batches, batches shuffled);
* ``random``: plain random batches (``DataLoader(shuffle=True)``),

the training steps per second, graphs per second and peak memory of a full training step
(collate, forward, L1 loss, backward, AdamW step; Graphormer-slim: 12 layers, width 80, 8 heads,
multi-hop edge encoding, dropout as in the paper's ZINC model), and the padding fraction of each
batching: padded ``N^2`` cells / all ``N^2`` cells of an epoch's batches,
``1 - sum_g n_g^2 / sum_batches size * n_max^2`` (nodes only, the graph token not counted).

Method. Timing: one fresh subprocess per batching holds both models (same initial weights up to
the ``C`` table) and feeds every batch to both, alternating which goes first, so machine load
hits both alike; ``--epochs`` timed epochs (over ``--steps`` batches each, default all) follow one
warm-up pass over ``--warmup`` batches. Per epoch, throughput = batches (graphs) / (sum of step
times + sum of collate times); the median over epochs is reported. The step time is CPU time of
the process on CPU (1 intra-op thread by default: robust to other processes' load), wall time
on accelerators. Peak memory: a separate fresh subprocess per (attention, batching) runs the warm-up
steps (so AdamW's state exists), then reports the peak over one epoch's steps above the memory in
use before it (CPU: resident-set high-water mark, with glibc returning freed blocks to the kernel;
CUDA: ``max_memory_allocated``; see ``benchmarks/_common.py``).

Output: one JSON line per configuration, then a markdown table with the ratios URPE/RPE and
bucket/random, and the issue-6 targets: URPE/RPE step time <= 1.05; padding fraction with
bucketing <= 0.10.

Usage::

    python benchmarks/throughput.py                 # full: 3 timed epochs of 79 batches
    python benchmarks/throughput.py --quick         # 20 batches, 1 timed epoch
    python benchmarks/throughput.py --device cuda --batch-size 256
    python benchmarks/throughput.py --quick --batchings bucket --compile --no-memory
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from _common import PeakMemory, emit, machine_info, markdown_table, median, ratio, run_worker
from torch_geometric.data import Batch

from graph_urpe.data.sampler import SizeBucketBatchSampler, graph_sizes
from graph_urpe.data.zinc import ZincLikeDataset
from graph_urpe.nn import Graphormer
from graph_urpe.transforms import AddShortestPathDistance

ATTENTIONS = ("rpe", "urpe")
BATCHINGS = ("bucket", "random")


def _dataset(root: str):
    return ZincLikeDataset(
        root, split="train", pre_transform=AddShortestPathDistance(max_distance=None, paths=True),
        log=False,
    )


def _batches(dataset, batching: str, batch_size: int, seed: int, epoch: int) -> list[list[int]]:
    """One epoch's batches (lists of dataset indices) for the given batching."""
    sampler = SizeBucketBatchSampler(
        graph_sizes(dataset), max_batch_size=batch_size, shuffle=True, seed=seed,
        bucketing=batching == "bucket",
    )
    sampler.set_epoch(epoch)
    return list(sampler)


def padding_fraction(sizes: np.ndarray, batches: list[list[int]]) -> float:
    """``1 - sum n^2 / sum len(batch) * max(n)^2`` over the given batches (nodes only)."""
    real = sum(int((sizes[b] ** 2).sum()) for b in batches)
    padded = sum(len(b) * int(sizes[b].max()) ** 2 for b in batches)
    return 1.0 - real / padded


def _models(cfg: dict, device: torch.device) -> dict:
    """Graphormer-slim per attention kind, same initial weights where the parameters coincide."""
    models = {}
    for attention in cfg["attentions"]:
        torch.manual_seed(cfg["seed"])
        model = Graphormer.slim(attention=attention).to(device).train()
        opt = torch.optim.AdamW(model.parameters(), lr=2e-4, weight_decay=0.01)
        models[attention] = (model, opt)
        if cfg.get("compile"):
            torch.manual_seed(cfg["seed"])
            twin = Graphormer.slim(attention=attention).to(device).train()
            opt = torch.optim.AdamW(twin.parameters(), lr=2e-4, weight_decay=0.01)
            models[f"{attention}+compile"] = (torch.compile(twin), opt)
    return models


def _step(model, opt, batch) -> float:
    opt.zero_grad(set_to_none=True)
    loss = F.l1_loss(model(batch), batch.y)
    loss.backward()
    opt.step()
    return float(loss.detach())


class _Clock:
    """Wall or process CPU time, synchronising the device around each reading."""

    def __init__(self, kind: str, device: torch.device) -> None:
        self.read = time.process_time if kind == "cpu" else time.perf_counter
        self.device = device

    def __call__(self) -> float:
        if self.device.type != "cpu":
            getattr(torch, self.device.type).synchronize(self.device)
        return self.read()


def _collate(dataset, idx: list[int], device: torch.device) -> Batch:
    """What a PyG ``DataLoader`` with this batch does: fetch each graph, collate, move."""
    return Batch.from_data_list([dataset[i] for i in idx]).to(device)


def time_worker(cfg: dict) -> dict:
    """Both models on one batching, interleaved; see the module docstring."""
    if cfg.get("threads"):
        torch.set_num_threads(cfg["threads"])
    device = torch.device(cfg["device"])
    dataset = _dataset(cfg["root"])
    sizes = graph_sizes(dataset)
    models = _models(cfg, device)
    clock = _Clock(cfg["clock"], device)
    names = list(models)

    def run_epoch(batches):
        collate_s, steps = 0.0, {a: 0.0 for a in names}
        for i, idx in enumerate(batches):
            t0 = clock()
            batch = _collate(dataset, idx, device)
            collate_s += clock() - t0
            order = names if i % 2 == 0 else names[::-1]
            for a in order:
                t0 = clock()
                _step(*models[a], batch)
                steps[a] += clock() - t0
        return collate_s, steps

    warm = _batches(dataset, cfg["batching"], cfg["batch_size"], cfg["seed"], 0)[: cfg["warmup"]]
    first_step_s = {}
    for a in names:  # the first step alone: for compiled models it includes the compilation
        t0 = clock()
        _step(*models[a], _collate(dataset, warm[0], device))
        first_step_s[a] = clock() - t0
    run_epoch(warm[1:])
    epochs = []
    for e in range(cfg["epochs"]):
        batches = _batches(dataset, cfg["batching"], cfg["batch_size"], cfg["seed"], e + 1)
        batches = batches[: cfg["steps"]] if cfg["steps"] else batches
        collate_s, steps = run_epoch(batches)
        epochs.append({
            "batches": len(batches), "graphs": sum(len(b) for b in batches),
            "collate_s": collate_s, "step_s": steps,
            "padding_fraction": padding_fraction(sizes, batches),
            "mean_n_max": float(np.mean([sizes[b].max() for b in batches])),
        })
    out = {"batching": cfg["batching"], "epochs": epochs, "records": []}
    for a in names:
        per = [(ep["batches"] / (ep["step_s"][a] + ep["collate_s"]),
                ep["graphs"] / (ep["step_s"][a] + ep["collate_s"]),
                1000 * ep["step_s"][a] / ep["batches"]) for ep in epochs]
        out["records"].append({
            "attention": a, "batching": cfg["batching"],
            "steps_per_s": median([p[0] for p in per]),
            "graphs_per_s": median([p[1] for p in per]),
            "step_ms": median([p[2] for p in per]),
            "collate_ms": median([1000 * ep["collate_s"] / ep["batches"] for ep in epochs]),
            "step_ms_epochs": [round(p[2], 2) for p in per],
            "padding_fraction": median([ep["padding_fraction"] for ep in epochs]),
            "mean_n_max": median([ep["mean_n_max"] for ep in epochs]),
            "batches_per_epoch": epochs[0]["batches"],
            "first_step_s": first_step_s[a],
            "params": sum(p.numel() for p in models[a][0].parameters()),
        })
    return out


def memory_worker(cfg: dict) -> dict:
    """Peak memory of one epoch of training steps of one (attention, batching)."""
    if cfg.get("threads"):
        torch.set_num_threads(cfg["threads"])
    device = torch.device(cfg["device"])
    dataset = _dataset(cfg["root"])
    cfg = {**cfg, "attentions": [cfg["attention"]]}
    model, opt = _models(cfg, device)[cfg["attention"]]
    warm = _batches(dataset, cfg["batching"], cfg["batch_size"], cfg["seed"], 0)[: cfg["warmup"]]
    for idx in warm:
        _step(model, opt, _collate(dataset, idx, device))
    batches = _batches(dataset, cfg["batching"], cfg["batch_size"], cfg["seed"], 1)
    batches = batches[: cfg["steps"]] if cfg["steps"] else batches
    with PeakMemory(device) as pm:
        for idx in batches:
            _step(model, opt, _collate(dataset, idx, device))
    return {"attention": cfg["attention"], "batching": cfg["batching"],
            "peak_mib": pm.peak_bytes / 2**20, "memory_method": pm.method}


def report(records: list[dict]) -> str:
    by = {(r["attention"], r["batching"]): r for r in records}

    def get(a, b, field):
        r = by.get((a, b))
        return None if r is None else r[field]

    rows = [[r["attention"], r["batching"], f"{r['step_ms']:.1f}", f"{r['collate_ms']:.1f}",
             f"{r['steps_per_s']:.2f}", f"{r['graphs_per_s']:.0f}", f"{r['peak_mib']:.0f}",
             f"{r['padding_fraction']:.3f}", f"{r['mean_n_max']:.1f}"] for r in records]
    out = ["### Absolute (medians over epochs)", "", markdown_table(
        ["attention", "batching", "step ms", "collate ms", "steps/s", "graphs/s", "peak MiB",
         "padding fraction", "mean N_max"], rows), ""]
    rows = []
    for b in BATCHINGS:
        rows.append([b, ratio(get("urpe", b, "step_ms"), get("rpe", b, "step_ms")),
                     ratio(get("rpe", b, "graphs_per_s"), get("urpe", b, "graphs_per_s")),
                     ratio(get("urpe", b, "peak_mib"), get("rpe", b, "peak_mib"))])
    out += ["### URPE / RPE", "", markdown_table(
        ["batching", "step time", "time per graph (incl. collate)", "peak memory"], rows), ""]
    rows = []
    for a in ATTENTIONS:
        rows.append([a, ratio(get(a, "bucket", "step_ms"), get(a, "random", "step_ms")),
                     ratio(get(a, "bucket", "graphs_per_s"), get(a, "random", "graphs_per_s")),
                     ratio(get(a, "bucket", "peak_mib"), get(a, "random", "peak_mib"))])
    out += ["### bucket / random", "", markdown_table(
        ["attention", "step time", "graphs/s", "peak memory"], rows), ""]
    compiled = [r for r in records if r["attention"].endswith("+compile")]
    if compiled:
        rows = []
        for r in compiled:
            a, b = r["attention"].removesuffix("+compile"), r["batching"]
            rows.append([a, b, ratio(r["step_ms"], get(a, b, "step_ms")),
                         ratio(r["step_ms_epochs"][0], get(a, b, "step_ms_epochs")[0]),
                         f"{r['first_step_s']:.1f}"])
        out += ["### torch.compile / eager", "", markdown_table(
            ["attention", "batching", "step time (median epoch)", "step time (first epoch)",
             "first step s"], rows), ""]
    out += ["### Targets (issue 6)", ""]
    for b in BATCHINGS:
        u, r = get("urpe", b, "step_ms"), get("rpe", b, "step_ms")
        if u is not None and r is not None:
            ok = "met" if u / r <= 1.05 else "MISSED"
            out.append(f"- {b}: URPE/RPE step time {u / r:.3f} <= 1.05: {ok}")
    pf = get("urpe", "bucket", "padding_fraction") or get("rpe", "bucket", "padding_fraction")
    if pf is not None:
        out.append(f"- bucket padding fraction {pf:.3f} <= 0.10: {'met' if pf <= 0.10 else 'MISSED'}"
                   f" (random: {get('rpe', 'random', 'padding_fraction') or 0:.3f})")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", default="data/zinc_like",
                   help="processed-dataset folder (default: data/zinc_like, as the ZINC configs)")
    p.add_argument("--batch-size", type=int, default=128, help="graphs per batch (default: 128)")
    p.add_argument("--epochs", type=int, default=3, help="timed epochs (default: 3)")
    p.add_argument("--steps", type=int, default=None,
                   help="batches per timed epoch (default: all, 79 at batch size 128)")
    p.add_argument("--warmup", type=int, default=5, help="untimed warm-up steps (default: 5)")
    p.add_argument("--quick", action="store_true", help="20 batches, 1 timed epoch, 3 warm-up")
    p.add_argument("--batchings", nargs="+", default=list(BATCHINGS), choices=BATCHINGS)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--threads", type=int, default=None,
                   help="torch intra-op threads (default: 1 on CPU, torch's default elsewhere)")
    p.add_argument("--clock", choices=["cpu", "wall"], default=None,
                   help="step time clock (default: cpu on CPU, wall elsewhere)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--compile", action="store_true",
                   help="also time torch.compile'd twins of both models (same batches, "
                   "interleaved; compile time counted in the first step and in every "
                   "recompile for a new padded size)")
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory workers")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        cfg = json.loads(args.worker)
        emit(time_worker(cfg) if cfg["mode"] == "time" else memory_worker(cfg))
        return
    if args.quick:
        args.steps, args.epochs, args.warmup = args.steps or 20, 1, 3
    on_cpu = torch.device(args.device).type == "cpu"
    base = {"root": args.root, "batch_size": args.batch_size, "epochs": args.epochs,
            "steps": args.steps, "warmup": args.warmup, "device": args.device,
            "threads": args.threads if args.threads is not None else (1 if on_cpu else None),
            "clock": args.clock or ("cpu" if on_cpu else "wall"), "seed": args.seed,
            "attentions": list(ATTENTIONS), "compile": args.compile}
    _dataset(args.root)  # process (once) before any worker starts
    emit({"bench": "throughput", "event": "start",
          "machine": machine_info(torch.device(args.device)), **base})
    records = []
    for batching in args.batchings:
        timed = run_worker(__file__, {**base, "mode": "time", "batching": batching},
                           memory_env=False)
        for rec in timed["records"]:
            mem = {"peak_mib": float("nan"), "memory_method": None}
            if not (args.no_memory or rec["attention"].endswith("+compile")):
                mem = run_worker(__file__, {**base, "mode": "memory", "batching": batching,
                                            "attention": rec["attention"], "compile": False},
                                 memory_env=on_cpu)
            rec = {"bench": "throughput", **rec, **mem}
            emit(rec)
            records.append(rec)
    emit({"bench": "throughput", "event": "end",
          "machine": machine_info(torch.device(args.device))})
    print()
    print(report(records))


if __name__ == "__main__":
    main(sys.argv[1:])
