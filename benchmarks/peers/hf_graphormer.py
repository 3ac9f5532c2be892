"""graph-urpe's Graphormer against Hugging Face ``transformers``' Graphormer, side by side.

The same molecules (the embedded ZINC-like training split, ZINC featurization: one atom-type
column, one bond-type column), the same model size (Graphormer-slim: 12 layers, width 80, 8 heads,
FFN 80, multi-hop edge encoding over 20 hops, one regression target, dropout 0.1, attention
dropout 0.1, activation dropout 0, pre-LayerNorm, GELU), the same batches (index lists of 128
graphs, given to both), on CPU with one torch thread:

1. **preprocessing** graphs/s: ``transformers``' ``preprocess_item`` (what its
   ``GraphormerDataCollator`` runs per molecule: Cython Floyd-Warshall, path-edge tables) vs
   graph-urpe's :class:`~graph_urpe.transforms.AddShortestPathDistance` ``(max_distance=None,
   paths=True)``, chunk by chunk, the two taking turns; the SPD matrices of both are checked equal
   on the first molecules; peak memory of preprocessing all molecules (results kept) and the bytes
   a preprocessed molecule holds;
2. **training** graphs/s: step = collate + forward + MSE loss (``transformers``' own regression
   loss; graph-urpe: ``F.mse_loss``) + backward + AdamW (lr 2e-4, weight decay 0.01), for
   ``GraphormerForGraphClassification`` and ``Graphormer.slim(attention="rpe")`` /
   ``"urpe"``, on two batchings of the same pool of molecules: ``random`` (plain random batches,
   what the Hugging Face ``Trainer`` does) and ``bucket`` (graph-urpe's
   :class:`~graph_urpe.data.sampler.SizeBucketBatchSampler`); "own batching" compares graph-urpe
   on ``bucket`` with ``transformers`` on ``random``;
3. **inference** graphs/s (``eval()``, ``torch.no_grad()``) on the same batches;
4. **peak memory** of training steps (CPU resident-set high-water mark above the memory in use
   before, in separate processes whose glibc returns freed blocks; ``benchmarks/_common.py``);
5. the **matmul ceiling** (best single-thread GFLOP/s of a float32 ``2048 x 2048`` matmul) and the
   share of it one training step reaches: FLOPs of forward + backward counted by
   :class:`torch.utils.flop_counter.FlopCounterMode` (matmuls and bmm; element-wise work is not
   counted, and URPE only adds element-wise work) per graph, times the step's graphs/s. Plus the
   ``torch.profiler`` top ops of one training step of each implementation (graph-urpe: URPE), with
   the share of the step spent in matrix products and the GFLOP/s those reach.

Method: ``transformers`` is not a dependency of graph-urpe. It lives in its own virtual
environment (``--venv``, created on first use, see :func:`ensure_venv`: the torch of this
environment installed first, then ``transformers==4.57.6``, the last release with Graphormer (in
``models/deprecated``; 5.0 removed it), without dependencies, then the packages it imports, and
``Cython<3``, which compiles its ``algos_graphormer.pyx`` on first import, into
``~/.pyxbld``; Cython 3 rejects that file). The driver
writes the molecules (raw integer features, :func:`_protocol.to_hf_item`) and the batches to a
temporary ``.npz`` and starts two long-lived workers, one per environment; they answer one
command at a time, alternating which goes first, so machine load hits both alike. Every time is
the worker's CPU time (``time.process_time``). Reported: totals over the timed batches
(graphs / seconds) and the median step time.

Usage::

    python benchmarks/peers/hf_graphormer.py --quick       # about 5 minutes on 2 loaded cores
    python benchmarks/peers/hf_graphormer.py               # all 10,000 molecules, 40 timed steps
    python benchmarks/peers/hf_graphormer.py --setup-only  # create the venv, measure nothing
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))  # benchmarks/ (for _common)

from _common import cpu_memory_env, emit, machine_info, markdown_table, median, ratio
from _protocol import pack, to_hf_item
from _worker import MATMUL_OPS

from graph_urpe.data.sampler import SizeBucketBatchSampler, graph_sizes
from graph_urpe.data.zinc import ZincLikeDataset
from graph_urpe.transforms import AddShortestPathDistance

TRANSFORMERS_VERSION = "4.57.6"
#: What ``transformers`` 4.57.6 imports (its ``install_requires``, checked at import), and Cython.
HF_REQUIREMENTS = [
    "filelock", "huggingface-hub>=0.34.0,<1.0", "numpy>=1.17", "packaging>=20.0", "pyyaml>=5.1",
    "regex!=2019.12.17", "requests", "tokenizers>=0.22.0,<=0.23.0", "safetensors>=0.4.3",
    "tqdm>=4.27", "Cython<3",
]
DEFAULT_VENV = os.path.join(REPO, ".venv-peers")  # git-ignored
BATCHINGS = ("random", "bucket")
CHECKED = 64  # molecules whose SPD matrices are compared between the two implementations

# Graphormer-slim as graph-urpe builds it (Graphormer.slim defaults).
SLIM = {"layers": 12, "width": 80, "heads": 8, "ffn": 80, "max_hops": 20, "max_degree": 63,
        "max_distance": 36, "atom_categories": 28, "bond_categories": 4}


def hf_config(slim: dict = SLIM) -> dict:
    """``GraphormerConfig`` keywords of the same size as ``Graphormer.slim`` (plus the collator's
    ``spatial_pos_max``).

    Table sizes follow ``transformers``' index shifts for one feature column: an atom id ``a``
    becomes ``a + 3`` (``convert_to_single_emb``'s ``+1`` and two padding shifts), a bond id on a
    path ``b + 3``, a degree ``d + 1``, a distance ``s + 1``. The spatial table has as many rows as
    graph-urpe's relation table (``max_distance + 4``); ``spatial_pos_max`` is set above every
    distance so that, as in graph-urpe, no pair is masked out of attention.
    """
    return {
        "num_classes": 1, "num_atoms": slim["atom_categories"] + 2,
        "num_edges": slim["bond_categories"] + 2, "num_in_degree": slim["max_degree"] + 1,
        "num_out_degree": slim["max_degree"] + 1, "num_spatial": slim["max_distance"] + 4,
        "num_edge_dis": slim["max_hops"], "multi_hop_max_dist": slim["max_hops"],
        "edge_type": "multi_hop", "num_hidden_layers": slim["layers"],
        "embedding_dim": slim["width"], "ffn_embedding_dim": slim["ffn"],
        "num_attention_heads": slim["heads"], "dropout": 0.1, "attention_dropout": 0.1,
        "activation_dropout": 0.0, "pre_layernorm": True, "activation_fn": "gelu",
        "spatial_pos_max": 1024,
    }


def _venv_python(venv: str) -> str:
    return os.path.join(venv, "bin", "python")


def _venv_versions(python: str) -> dict | None:
    code = ("import json, torch, transformers, Cython; print(json.dumps({'torch': "
            "torch.__version__, 'transformers': transformers.__version__, 'cython': "
            "Cython.__version__}))")
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False)
    return json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else None


def ensure_venv(venv: str) -> str:
    """Create (once) the virtual environment with ``transformers``; return its python.

    Installs, in this order: this environment's torch version (``torch==<torch.__version__>``,
    e.g. ``2.13.0+cpu``, so pip cannot pick another build), ``transformers==4.57.6`` with
    ``--no-deps`` (it does not need torch as a dependency, and must not replace it), then
    :data:`HF_REQUIREMENTS`. An existing environment with the right versions is reused.

    Raises:
        RuntimeError: if a pip step fails or torch's version changed during the install.
    """
    python = _venv_python(venv)
    want = {"torch": torch.__version__, "transformers": TRANSFORMERS_VERSION}
    have = _venv_versions(python) if os.path.exists(python) else None
    if have and all(have[k] == v for k, v in want.items()):
        return python
    steps = [
        [sys.executable, "-m", "venv", venv],
        [python, "-m", "pip", "install", "-q", f"torch=={torch.__version__}"],
        [python, "-m", "pip", "install", "-q", "--no-deps", f"transformers=={TRANSFORMERS_VERSION}"],
        [python, "-m", "pip", "install", "-q", *HF_REQUIREMENTS],
    ]
    for cmd in steps:
        print("+", " ".join(cmd), file=sys.stderr, flush=True)
        if subprocess.run(cmd, check=False).returncode != 0:
            raise RuntimeError(f"setting up {venv} failed at: {' '.join(cmd)}")
    have = _venv_versions(python)
    if not have or any(have[k] != v for k, v in want.items()):
        raise RuntimeError(f"{venv} has {have}, expected {want}; remove it and run again.")
    return python


class WorkerProcess:
    """A long-lived worker (``_ours_worker.py`` / ``_hf_worker.py``) spoken to by JSON lines."""

    def __init__(self, python: str, script: str, *, memory_env: bool = False) -> None:
        env = cpu_memory_env() if memory_env else dict(os.environ)
        env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        self.name = os.path.basename(script)
        self.stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (closed in close())
        self.proc = subprocess.Popen(
            [python, os.path.join(HERE, script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.stderr, text=True, env=env, cwd=HERE,
        )

    def __call__(self, cmd: str, **kwargs) -> dict:
        self.proc.stdin.write(json.dumps({"cmd": cmd, **kwargs}) + "\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            if line.startswith("{"):
                reply = json.loads(line)
                if "error" in reply:
                    raise RuntimeError(f"{self.name}: {reply['error']}")
                return reply
        self.stderr.seek(0)
        raise RuntimeError(f"{self.name} died during {cmd!r}:\n{self.stderr.read()[-3000:]}")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        self.stderr.close()


def _batches(sizes: np.ndarray, batch_size: int, count: int, seed: int) -> dict[str, np.ndarray]:
    """The first ``count`` full batches of each batching, as ``[count, batch_size]`` indices."""
    out = {}
    for batching in BATCHINGS:
        sampler = SizeBucketBatchSampler(sizes, max_batch_size=batch_size, shuffle=True,
                                         seed=seed, bucketing=batching == "bucket")
        full = [b for b in sampler if len(b) == batch_size]
        if len(full) < count:
            raise ValueError(f"{batching}: {len(full)} full batches of {batch_size} in the pool, "
                             f"{count} needed; raise --pool.")
        out[batching] = np.array(full[:count], dtype=np.int64)
    return out


def write_data(path: str, root: str, pool: int, batch_size: int, count: int, seed: int) -> dict:
    """Molecules, batches and reference SPD matrices for the workers; returns a summary."""
    dataset = ZincLikeDataset(
        root, split="train", pre_transform=AddShortestPathDistance(max_distance=None, paths=True),
        log=False,
    )
    pool = min(pool, len(dataset))
    graphs = [dataset[i] for i in range(pool)]
    spd_max = max(int(g.spd.max()) for g in graphs)
    if any(int(g.spd.min()) < 0 for g in graphs):
        raise ValueError("a molecule of the pool has unreachable pairs; transformers' Graphormer "
                         "then needs num_spatial >= 512: not set up here.")
    if spd_max + 1 >= hf_config()["num_spatial"]:
        raise ValueError(f"largest SPD {spd_max} exceeds the spatial table; raise max_distance.")
    arrays = pack([to_hf_item(g.x.numpy(), g.edge_index.numpy(), g.edge_attr.numpy(),
                              g.y.numpy()) for g in graphs])
    batches = _batches(graph_sizes(graphs), batch_size, count, seed)
    arrays.update({f"batches_{k}": v for k, v in batches.items()})
    checked = min(CHECKED, pool)
    arrays.update({f"spd_{i}": graphs[i].spd.view(graphs[i].num_nodes, -1).numpy()
                   for i in range(checked)})
    arrays["num_checked"] = np.array(checked)
    np.savez(path, **arrays)
    sizes = graph_sizes(graphs)
    return {"pool": pool, "max_spd": spd_max, "mean_nodes": float(sizes.mean()),
            "mean_n_max": {k: float(np.mean([sizes[b].max() for b in v]))
                           for k, v in batches.items()}}


def _alternate(i: int, workers: list):
    return workers if i % 2 == 0 else workers[::-1]


def measure(args, python_hf: str, data: str) -> dict:
    """All timings, interleaved; see the module docstring."""
    ours = WorkerProcess(sys.executable, "_ours_worker.py")
    hf = WorkerProcess(python_hf, "_hf_worker.py")
    workers = [ours, hf]
    res: dict = {"args": vars(args)}
    try:
        res["load"] = {w.name: w("load", path=data, threads=args.threads, seed=args.seed)
                       for w in workers}
        pool = res["load"][ours.name]["graphs"]
        pre = {w.name: [] for w in workers}
        for i, start in enumerate(range(0, pool, args.chunk)):
            for w in _alternate(i, workers):
                pre[w.name].append(w("preprocess", start=start, stop=min(pool, start + args.chunk)))
        res["preprocess"] = pre
        res["check"] = {w.name: w("check") for w in workers}
        for name, chk in res["check"].items():
            if chk["mismatches"]:
                raise RuntimeError(f"{name}: SPD differs from graph-urpe's on molecules "
                                   f"{chk['mismatches']}")
        res["params"] = {**ours("build", cfg={"attentions": ["rpe", "urpe"]}, seed=args.seed)["params"],
                         **hf("build", cfg=hf_config(), seed=args.seed)["params"]}
        timed = range(args.warmup, args.warmup + args.steps)
        train = {b: [] for b in args.batchings}
        for i in range(args.warmup + args.steps):
            for batching in args.batchings:
                rows = {}
                for w in _alternate(i, workers):
                    order = ["rpe", "urpe"][:: 1 if i % 2 == 0 else -1] if w is ours else None
                    rows[w.name] = w("train", batching=batching, i=i, order=order)
                if i in timed:
                    train[batching].append(rows)
        res["train"] = train
        evals = {b: [] for b in args.batchings}
        for i in list(timed)[: args.eval_steps]:
            for batching in args.batchings:
                evals[batching].append({w.name: w("eval", batching=batching, i=i)
                                        for w in _alternate(i, workers)})
        res["eval"] = evals
        flop_idx = list(timed)[: args.flop_batches]
        res["flops"] = {b: {w.name: w("flops", batching=b, indices=flop_idx) for w in workers}
                        for b in args.batchings}
        res["matmul"] = ours("matmul")
        res["matmul_hf_venv"] = hf("matmul")
        res["profile"] = {
            "graph-urpe urpe": ours("profile", name="urpe", batching=args.batchings[-1],
                                    i=args.warmup),
            "transformers": hf("profile", name="hf", batching=args.batchings[-1], i=args.warmup),
        }
    finally:
        for w in workers:
            w.close()
    if not args.no_memory:
        res["memory"] = {}
        for python, script in ((sys.executable, "_ours_worker.py"), (python_hf, "_hf_worker.py")):
            w = WorkerProcess(python, script, memory_env=True)
            try:
                w("load", path=data, threads=args.threads, seed=args.seed)
                mem = {"preprocess": w("memory_preprocess")}
                w("preprocess", start=0, stop=pool)
                w("build", cfg=({"attentions": ["rpe", "urpe"]} if w.name == ours.name
                                else hf_config()), seed=args.seed)
                for b in args.batchings:
                    mem[b] = w("memory_train", batching=b, warm=[0],
                               steps=list(range(1, 1 + args.memory_steps)))
                res["memory"][w.name] = mem
            finally:
                w.close()
    return res


def _ceiling(res: dict) -> float:
    """The matmul ceiling: the better of the two workers' measurements (the same torch build)."""
    return max(res["matmul"]["gflops"], res["matmul_hf_venv"]["gflops"])


def summarise(res: dict) -> list[dict]:
    """One record per (model, batching) and per preprocessing side."""
    names = {"_ours_worker.py": "graph-urpe", "_hf_worker.py": "transformers"}
    records = []
    for w, chunks in res["preprocess"].items():
        graphs, cpu = sum(c["graphs"] for c in chunks), sum(c["cpu_s"] for c in chunks)
        mem = res.get("memory", {}).get(w, {}).get("preprocess", {})
        records.append({"kind": "preprocess", "impl": names[w], "graphs": graphs,
                        "graphs_per_s": graphs / cpu,
                        "graphs_per_s_median_chunk": median([c["graphs"] / c["cpu_s"]
                                                             for c in chunks]),
                        "peak_mib": mem.get("peak_mib"), "bytes_per_graph": mem.get("bytes_per_graph")})
    for batching, rounds in res["train"].items():
        for w in rounds[0]:
            for model in rounds[0][w]["step_s"]:
                step = [r[w]["step_s"][model] for r in rounds]
                collate = [r[w]["collate_s"] for r in rounds]
                graphs = sum(r[w]["graphs"] for r in rounds)
                ev = res["eval"][batching]
                ev_s = sum(r[w]["step_s"][model] for r in ev)
                ev_graphs = sum(r[w]["graphs"] for r in ev)
                fl = res["flops"][batching][w]
                flops_per_graph = fl["flops"][model] / fl["graphs"]
                mem = res.get("memory", {}).get(w, {}).get(batching, {}).get("peak_mib", {})
                train_gps = graphs / sum(step)
                records.append({
                    "kind": "model", "impl": names[w], "model": model, "batching": batching,
                    "params": res["params"][model], "steps": len(rounds),
                    "step_ms": 1000 * median(step), "collate_ms": 1000 * median(collate),
                    "train_graphs_per_s": train_gps,
                    "train_graphs_per_s_with_collate": graphs / (sum(step) + sum(collate)),
                    "eval_graphs_per_s": ev_graphs / ev_s if ev_s else None,
                    "eval_graphs_per_s_with_collate":
                        ev_graphs / (ev_s + sum(r[w]["collate_s"] for r in ev)) if ev_s else None,
                    "flops_per_graph": flops_per_graph,
                    "gflops_achieved": flops_per_graph * train_gps / 1e9,
                    "ceiling_share": flops_per_graph * train_gps / 1e9 / _ceiling(res),
                    "peak_mib": mem.get(model),
                })
    return records


def _f(v, fmt=".0f"):
    return "-" if v is None else format(v, fmt)


def report(records: list[dict], res: dict) -> str:
    pre = [r for r in records if r["kind"] == "preprocess"]
    models = sorted((r for r in records if r["kind"] == "model"),
                    key=lambda r: (r["batching"], r["impl"] == "transformers", r["model"]))
    by = {(r["model"], r["batching"]): r for r in models}
    out = ["### Preprocessing (per molecule, CPU, one thread)", "", markdown_table(
        ["implementation", "graphs/s", "ms/graph", "peak MiB (all kept)", "bytes/graph kept"],
        [[r["impl"], _f(r["graphs_per_s"]), f"{1000 / r['graphs_per_s']:.3f}",
          _f(r["peak_mib"], ".1f"), _f(r["bytes_per_graph"])] for r in pre]), ""]
    g = {r["impl"]: r["graphs_per_s"] for r in pre}
    out += [(f"graph-urpe / transformers preprocessing: "
             f"{ratio(g.get('graph-urpe'), g.get('transformers'))}x"), ""]
    size = next(iter(res["train"].values()))[0]["_ours_worker.py"]["graphs"]
    out += [f"### Training and inference (the same batches of {size} graphs for every model)", "",
            markdown_table(
        ["model", "batching", "params", "step ms", "collate ms", "train graphs/s",
         "train graphs/s incl. collate", "eval graphs/s", "eval graphs/s incl. collate",
         "peak MiB (train)", "GFLOP/graph", "GFLOP/s", "share of matmul ceiling"],
        [[f"{r['impl']} {r['model']}", r["batching"], f"{r['params']:,}", f"{r['step_ms']:.0f}",
          f"{r['collate_ms']:.1f}", _f(r["train_graphs_per_s"]),
          _f(r["train_graphs_per_s_with_collate"]), _f(r["eval_graphs_per_s"]),
          _f(r["eval_graphs_per_s_with_collate"]), _f(r["peak_mib"]),
          f"{r['flops_per_graph'] / 1e9:.3f}", f"{r['gflops_achieved']:.1f}",
          f"{r['ceiling_share']:.2f}"] for r in models]), ""]
    rows = []
    for ours in ("rpe", "urpe"):
        for b in res["train"]:
            if (ours, b) in by and ("hf", b) in by:
                o, h = by[(ours, b)], by[("hf", b)]
                rows.append([ours, f"{b} / {b}", ratio(o["train_graphs_per_s"], h["train_graphs_per_s"]),
                             ratio(o["train_graphs_per_s_with_collate"], h["train_graphs_per_s_with_collate"]),
                             ratio(o["eval_graphs_per_s"], h["eval_graphs_per_s"]),
                             ratio(h["peak_mib"], o["peak_mib"])])
        if (ours, "bucket") in by and ("hf", "random") in by:
            o, h = by[(ours, "bucket")], by[("hf", "random")]
            rows.append([ours, "bucket / random (own)", ratio(o["train_graphs_per_s"], h["train_graphs_per_s"]),
                         ratio(o["train_graphs_per_s_with_collate"], h["train_graphs_per_s_with_collate"]),
                         ratio(o["eval_graphs_per_s"], h["eval_graphs_per_s"]),
                         ratio(h["peak_mib"], o["peak_mib"])])
    out += ["### graph-urpe / transformers", "", markdown_table(
        ["graph-urpe attention", "batching (ours / HF)", "train graphs/s", "train incl. collate",
         "eval graphs/s", "peak memory HF / ours"], rows), ""]
    mm = res["matmul"]
    out += [(f"Matmul ceiling: {_ceiling(res):.1f} GFLOP/s (float32 {mm['n']}x{mm['n']}, "
             f"{mm['threads']} thread, best of 10 in each worker: {mm['gflops']:.1f} in "
             f"graph-urpe's environment, {res['matmul_hf_venv']['gflops']:.1f} in the "
             "transformers one)."), ""]
    batching = list(res["train"])[-1]
    for label, prof in res["profile"].items():
        mm_gflops = prof["matmul_flops"] / prof["matmul_ms"] / 1e6
        out += [(f"### torch.profiler: one {label} training step ({batching} batch "
                 f"{res['args']['warmup']}; {prof['total_ms']:.0f} ms self CPU), top ops"), "",
                markdown_table(["op", "self ms", "share", "calls"],
                               [[o["op"], f"{o['self_ms']:.1f}", f"{o['share']:.3f}", o["calls"]]
                                for o in prof["ops"]]), "",
                (f"Matrix products ({', '.join(MATMUL_OPS)}): {prof['matmul_ms']:.0f} ms = "
                 f"{prof['matmul_ms'] / prof['total_ms']:.2f} of the step, at {mm_gflops:.1f} "
                 f"GFLOP/s = {mm_gflops / _ceiling(res):.2f} of the ceiling (profiler FLOPs "
                 f"{prof['matmul_flops'] / 1e9:.2f} G)."), ""]
    out += ["### Targets (issue 13)", ""]
    for ours in ("rpe", "urpe"):
        for b in res["train"]:
            if (ours, b) in by and ("hf", b) in by:
                x = by[(ours, b)]["train_graphs_per_s"] / by[("hf", b)]["train_graphs_per_s"]
                out.append(f"- {ours}, {b} batches: training graphs/s {x:.2f}x transformers "
                           f">= 3: {'met' if x >= 3 else 'MISSED'}")
    for r in models:
        if r["impl"] == "graph-urpe":
            out.append(f"- {r['model']}, {r['batching']}: {r['ceiling_share']:.2f} of the matmul "
                       f"ceiling >= 0.5: {'met' if r['ceiling_share'] >= 0.5 else 'MISSED'}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--venv", default=DEFAULT_VENV,
                   help="virtual environment with transformers, created if missing "
                   "(default: .venv-peers in the repository root, git-ignored)")
    p.add_argument("--setup-only", action="store_true", help="create the venv and stop")
    p.add_argument("--root", default="data/zinc_like", help="processed ZINC-like folder")
    p.add_argument("--pool", type=int, default=10_000,
                   help="molecules (first of the training split) preprocessed and batched from "
                   "(default: 10000, all)")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--steps", type=int, default=40, help="timed training steps per batching")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps per batching first")
    p.add_argument("--eval-steps", type=int, default=20, help="timed inference batches")
    p.add_argument("--flop-batches", type=int, default=3, help="batches whose FLOPs are counted")
    p.add_argument("--memory-steps", type=int, default=3, help="steps of the peak-memory runs")
    p.add_argument("--chunk", type=int, default=128, help="molecules per preprocessing turn")
    p.add_argument("--batchings", nargs="+", default=list(BATCHINGS), choices=BATCHINGS)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory workers")
    p.add_argument("--quick", action="store_true",
                   help="10 timed steps, 2 warm-up, 5 inference batches, 2 counted, 2 memory "
                   "steps, a pool of just enough molecules")
    args = p.parse_args(argv)
    python_hf = ensure_venv(args.venv)
    if args.setup_only:
        print(python_hf)
        return
    if args.quick:
        args.steps, args.warmup, args.eval_steps = 10, 2, 5
        args.flop_batches, args.memory_steps = 2, 2
        args.pool = min(args.pool, (args.steps + args.warmup + 1) * args.batch_size)
    count = args.warmup + args.steps
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "molecules.npz")
        summary = write_data(data, args.root, args.pool, args.batch_size, count, args.seed)
        emit({"bench": "peers", "event": "start", "machine": machine_info(torch.device("cpu")),
              "hf_config": hf_config(), **summary, **vars(args)})
        res = measure(args, python_hf, data)
    records = summarise(res)
    for r in records:
        emit({"bench": "peers", **r})
    emit({"bench": "peers", "event": "end", "machine": machine_info(torch.device("cpu")),
          "versions": {k: v.get("torch") for k, v in res["load"].items()},
          "matmul": res["matmul"], "check": res["check"]})
    print()
    print(report(records, res))


if __name__ == "__main__":
    main(sys.argv[1:])
