"""The data path and ``predict`` at scale, on MOSES molecules: time and memory against the number
of molecules, side by side.

For each size ``N`` (the first ``N`` SMILES of MOSES' training set, the ``molsets`` wheel's
``moses/dataset/data/train.csv.gz``; one label column ``y``: seeded random numbers, or with
``--label logp`` RDKit's Crippen logP, a real property for the loss curves), every measurement runs in a fresh
process (its own peak RSS, ``ru_maxrss``; worker processes' peak separately):

* ``featurize``: :class:`~graph_urpe.data.modules.molecule.CSVDataModule` processing the CSV as
  ``graph-urpe fit`` does (OGB features, shortest paths and predecessors, random split,
  ``max_graph_nodes`` 128), with ``--workers`` processes: CPU seconds (the process and its workers),
  wall seconds, molecules per wall second, peak RSS, size of the cache on disk;
* ``load``: the same dataset opened again from its cache (what every later ``fit`` pays);
* ``first_step``: from process start (imports included) to the end of the first training step of
  the CSV template's network (4 x 64, 8 heads, dropout 0.1) through
  :class:`~graph_urpe.data.modules.molecule.CSVDataModule` on the cached data;
* ``ddp``: two processes (ranks of a ``gloo`` process group, the network in
  :class:`~torch.nn.parallel.DistributedDataParallel`, the data module's size-bucketed sampler
  splitting the batches) open the same cache and take ``--ddp-steps`` training steps; each rank's
  RSS split into ``RssAnon`` / ``RssFile`` and its PSS (``/proc/PID/smaps_rollup``), after the
  steps and again after reading every page of the memory-mapped cache (what an epoch touches);
* ``epoch``: ``graph-urpe fit`` itself (the CSV template's network from scratch, no classical
  model, no test) on the cached data for ``--epoch-fraction`` of one epoch (Lightning's
  ``limit_train_batches`` and ``limit_val_batches``), once per ``--epoch-processes`` count (``1``,
  and ``2``: Lightning's ``ddp`` strategy on CPU, ``gloo``, one thread a rank): wall and CPU
  seconds, training graphs per wall second, the largest rank's peak RSS, and the training loss
  against the graphs seen (``metrics.csv``), so that the curves of 1 and 2 processes can be
  compared;
* ``predict``: :func:`graph_urpe.cli.predict.predict_smiles` (what ``graph-urpe predict`` runs)
  over the N SMILES with the template's network (untrained: the speed is the trained one's),
  chunked (``--chunk-rows``): molecules per second, peak RSS, output size.

The ``predict`` sizes are given separately (``--predict-sizes``): it needs no cache, so it reaches
further on a small machine. ``--stages`` picks among featurize / load / first_step. With
``--checkout NAME=PATH`` (repeatable) every measurement runs once per checkout of graph-urpe (its
``graph_urpe`` first on ``sys.path``, its own caches), side by side: before / after a change.
Prints one JSON line per measurement, then a markdown table; "molecules / CPU s" is what two idle
cores would give at most, half of it per core (the honest figure on a shared machine).

Usage::

    pip download --no-deps molsets==0.3.1 -d /tmp/w && unzip -o /tmp/w/molsets-0.3.1-*.whl \\
        'moses/dataset/data/train.csv.gz' -d /tmp/moses
    python benchmarks/scale.py --moses /tmp/moses/moses/dataset/data/train.csv.gz \\
        --work /tmp/scale --sizes 10000 100000 --predict-sizes 100000 300000 --workers 2
"""

from __future__ import annotations

import time

START = time.time()  # before the heavy imports: first_step counts them

import argparse
import itertools
import json
import math
import os
import os.path as osp
import resource
import shutil
import sys

from _common import emit, markdown_table, run_worker

from graph_urpe.models.record import ModelRecord


def _usage() -> dict:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"cpu_s": me.ru_utime + me.ru_stime,
            "workers_cpu_s": kids.ru_utime + kids.ru_stime,
            "peak_rss_mb": me.ru_maxrss / 1024, "workers_peak_rss_mb": kids.ru_maxrss / 1024}


def _rss_mb() -> float:
    with open("/proc/self/status") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith("VmRSS")) / 1024


def _memory() -> dict:
    """This process's resident memory by kind (MB): ``/proc/self/status`` and ``smaps_rollup``."""
    fields = {}
    for name in ("/proc/self/status", "/proc/self/smaps_rollup"):
        with open(name) as handle:
            for line in handle:
                key, _, rest = line.partition(":")
                if rest.strip().endswith("kB"):
                    fields[key] = int(rest.split()[0]) / 1024
    return {"rss_mb": fields["VmRSS"], "rss_anon_mb": fields["RssAnon"],
            "rss_file_mb": fields["RssFile"], "rss_shmem_mb": fields["RssShmem"],
            "pss_mb": fields["Pss"], "pss_anon_mb": fields.get("Pss_Anon"),
            "pss_file_mb": fields.get("Pss_File")}


def _touch_cache(dataset) -> float:
    """Reads every page of a dataset's memory-mapped store (what one epoch touches); its MB."""
    import numpy as np
    import torch

    graphs = dataset._graphs
    arrays = [graphs.num_nodes, *(c.values for _, c in graphs.derived.values()),
              *(c.slices for _, c in graphs.derived.values()),
              *(t.numpy() for t in graphs.slices.values())]
    for value in graphs.data.to_dict().values():
        arrays += [value.numpy()] if isinstance(value, torch.Tensor) else [value.blob, value.offsets]
    total = 0
    for array in arrays:
        flat = np.asarray(array).reshape(-1).view(np.uint8)
        for start in range(0, len(flat), 1 << 26):
            int(flat[start:start + (1 << 26)][::4096].sum())  # one byte of every page
        total += flat.nbytes
    return total / 2**20


def _ddp_rank(config: dict, out: dict) -> None:
    """One rank of the ``ddp`` stage (see the module docstring)."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{config['port']}",
                            rank=config["rank"], world_size=2)
    dm = _datamodule(config)
    dm.prepare_data()
    dm.setup("fit")
    net = DistributedDataParallel(_template_net().train())
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3, fused=True)
    loader = iter(dm.train_dataloader())
    for _ in range(config["steps"]):
        batch = next(loader)
        loss = F.l1_loss(net(batch).view(-1), batch.y.view(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    dist.barrier()
    out.update(rank=config["rank"], steps=config["steps"], after_steps=_memory())
    dist.barrier()
    out["touched_mb"] = _touch_cache(dm.load().splits["train"])
    dist.barrier()
    out["after_touch"] = _memory()
    dist.barrier()
    dist.destroy_process_group()


def _folder_mb(folder: str) -> float:
    return sum(osp.getsize(osp.join(d, f)) for d, _, fs in os.walk(folder) for f in fs) / 2**20


def write_inputs(moses: str, n: int, work: str, label: str = "random") -> str:
    """The first ``n`` MOSES SMILES with a label column ``y`` (seeded random numbers, or RDKit's
    Crippen logP for :obj:`label` ``"logp"``), as CSV."""
    import numpy as np
    import pandas as pd

    path = osp.join(work, f"moses_{n}.csv" if label == "random" else f"moses_{n}_{label}.csv")
    if not osp.isfile(path):
        frame = pd.read_csv(moses, nrows=n)
        if label == "logp":
            from rdkit import Chem
            from rdkit.Chem import Crippen

            y = [Crippen.MolLogP(Chem.MolFromSmiles(s)) for s in frame["SMILES"]]
        else:
            y = np.random.default_rng(0).normal(size=len(frame))
        pd.DataFrame({"smiles": frame["SMILES"], "y": y}).to_csv(path, index=False)
    return path


def _watch_tree(proc, period: float = 0.5) -> dict:
    """Waits for :obj:`proc`; every :obj:`period` seconds reads the CPU seconds and memory (MB)
    of it and of every process under it (Lightning's ``ddp`` launcher starts rank 1 as a child
    of rank 0 that nobody waits for, so ``RUSAGE_CHILDREN`` misses it): for each process id the
    last CPU seconds seen (at most :obj:`period` short of its end), its peak RSS (``VmHWM``:
    anonymous memory plus the pages of the memory-mapped store it touched, which the page cache
    shares between processes) and the largest anonymous RSS seen (``RssAnon``, its own)."""
    import subprocess

    import psutil

    seen: dict[int, dict[str, float]] = {}
    root = psutil.Process(proc.pid)
    while True:
        try:
            tree = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            tree = []
        for p in tree:
            try:
                times = p.cpu_times()
                with open(f"/proc/{p.pid}/status") as handle:
                    status = {ln.split(":")[0]: int(ln.split()[1]) / 1024
                              for ln in handle if ln.startswith(("VmHWM", "RssAnon"))}
                before = seen.get(p.pid, {})
                seen[p.pid] = {"cpu_s": times.user + times.system, "hwm_mb": status["VmHWM"],
                               "anon_mb": max(status["RssAnon"], before.get("anon_mb", 0.0))}
            except (psutil.Error, OSError, KeyError):
                pass
        try:
            proc.wait(timeout=period)
            break
        except subprocess.TimeoutExpired:
            continue
    if proc.returncode != 0:
        raise RuntimeError(f"graph-urpe fit failed (exit {proc.returncode})")
    return seen


def fit_epoch(config: dict) -> dict:
    """The ``epoch`` stage: ``graph-urpe fit`` in a child process (see the module docstring)."""
    import subprocess

    import pandas as pd

    import graph_urpe

    processes, fraction = config["processes"], config["fraction"]
    runs = osp.join(config["work"], f"runs_{config['n']}")
    name = f"epoch_p{processes}"
    shutil.rmtree(osp.join(runs, name), ignore_errors=True)
    template = osp.join(osp.dirname(graph_urpe.__file__), "configs", "csv", "template.yaml")
    command = [sys.executable, "-m", "graph_urpe.cli", "fit", "--config", template,
               "--name", name, "--trainer.default_root_dir", runs,
               "--data.init_args.path", config["csv"], "--data.init_args.target_columns", "[y]",
               "--data.init_args.split", config["split"], "--data.init_args.root", config["root"],
               "--data.init_args.batch_size", "64", "--data.init_args.max_graph_nodes", "128",
               "--data.init_args.processing_workers", str(config["workers"]),
               "--model.init_args.finetune.pretrained", "null", "--classical_baseline", "false",
               "--test_after_fit", "false", "--trainer.max_epochs", "1",
               "--trainer.limit_train_batches", str(fraction),
               "--trainer.limit_val_batches", str(fraction), "--trainer.log_every_n_steps", "10",
               "--trainer.accelerator", "cpu", "--trainer.devices", str(processes),
               "--trainer.enable_progress_bar", "false"]
    if processes > 1:
        command += ["--trainer.strategy", "ddp"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    if config.get("checkout"):
        env["PYTHONPATH"] = config["checkout"]
    wall = time.perf_counter()
    seen = _watch_tree(subprocess.Popen(command, env=env))
    wall = time.perf_counter() - wall
    cpu_s = sum(r["cpu_s"] for r in seen.values())
    peak_mb = max(r["hwm_mb"] for r in seen.values())
    anon_mb = max(r["anon_mb"] for r in seen.values())
    metrics = pd.read_csv(osp.join(runs, name, "version_0", "metrics.csv"))
    curve = metrics.dropna(subset=["train/loss"])[["step", "train/loss"]]
    steps = int(metrics["step"].max()) + 1
    graphs = steps * 64 * processes  # every rank takes one batch a step (the last may be short)
    return {"bench": "epoch", "n": config["n"], "checkout": config.get("name", "this"),
            "processes": processes, "fraction": fraction, "steps": steps, "wall_s": wall,
            "cpu_s": cpu_s, "workers_cpu_s": 0.0, "peak_rss_mb": peak_mb,
            "workers_peak_rss_mb": 0.0, "rss_after_imports_mb": 0.0,
            "train_graphs_per_wall_s": graphs / wall, "mol_per_wall_s": graphs / wall,
            "cpu_ms_per_mol": 1e3 * cpu_s / graphs, "processes_seen": len(seen),
            "peak_anon_mb": anon_mb,
            "loss_curve": [[int(s) * 64 * processes, float(v)] for s, v in curve.to_numpy()]}


def _datamodule(config: dict, **kwargs):
    """The CSV data module of ``fit`` on the inputs (OGB features, ``--split``, <= 128 atoms)."""
    from graph_urpe.data.modules.molecule import CSVDataModule

    return CSVDataModule(config["csv"], target_columns=["y"], split=config.get("split", "random"),
                         root=config["root"], batch_size=64, max_graph_nodes=128,
                         processing_workers=config["workers"], **kwargs)


def _template_net():
    from graph_urpe.data.featurize import feature_dims
    from graph_urpe.nn import Graphormer

    atom, bond = feature_dims("ogb")
    return Graphormer(1, atom_categories=atom, bond_categories=bond, num_layers=4, embed_dim=64,
                      num_heads=8, ffn_dim=64, readout="sum", head_hidden_dim=128,
                      head_dropout=0.1, dropout=0.1, attention_dropout=0.1)


def worker(config: dict) -> dict:
    """One measurement in this process (see the module docstring)."""
    if config.get("checkout"):  # this checkout's graph_urpe, not the installed one
        sys.path.insert(0, config["checkout"])
    import torch
    from lightning.pytorch import Trainer

    from graph_urpe.cli.predict import PredictInputs, predict_smiles
    from graph_urpe.data.modules.molecule import CSVDataModule  # noqa: F401 (before timing)
    from graph_urpe.models.graph import GraphPropertyModule

    torch.set_num_threads(1)
    kind = config["kind"]
    before = _usage()  # after the imports: the stage's own cost is the difference
    wall = time.perf_counter()
    out: dict = {"bench": kind, "n": config["n"], "checkout": config.get("name", "this"),
                 "imports_cpu_s": before["cpu_s"],
                 "rss_after_imports_mb": _rss_mb()}
    if kind in ("featurize", "load"):
        splits = _datamodule(config).load().splits
        out.update(graphs=sum(len(s) for s in splits.values()),
                   cache_mb=_folder_mb(config["root"]), memory=_memory())
    elif kind == "ddp":
        _ddp_rank(config, out)
    elif kind == "first_step":
        import torch.nn.functional as F

        dm = _datamodule(config)
        dm.prepare_data()
        dm.setup("fit")
        net = _template_net().train()
        opt = torch.optim.AdamW(net.parameters(), lr=1e-3, fused=True)
        batch = next(iter(dm.train_dataloader()))
        loss = F.l1_loss(net(batch).view(-1), batch.y.view(-1))
        loss.backward()
        opt.step()
        out["since_start_s"] = time.time() - START
        out["memory"] = _memory()
    elif kind == "predict":
        from functools import partial

        model = GraphPropertyModule(_template_net(), record=ModelRecord(featurization="ogb", target_names=["y"], max_graph_nodes=128), optimizer=partial(torch.optim.AdamW, lr=1e-3))
        output = osp.join(osp.dirname(config["root"]), f"predictions_{config['n']}.csv")
        os.makedirs(osp.dirname(output), exist_ok=True)
        if osp.exists(output):  # measure the whole run, not a resumed or finished one
            os.remove(output)
        shutil.rmtree(f"{output}.parts", ignore_errors=True)
        dm = _datamodule({**config, "csv": config["train_csv"]})
        inputs = PredictInputs(csv=config["csv"], output=output, chunk_rows=config["chunk_rows"])
        trainer = Trainer(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                          enable_model_summary=False)
        counts = predict_smiles(trainer, model, dm, inputs)
        out.update(predicted=counts["predicted"], output_mb=osp.getsize(output) / 2**20)
    out["wall_s"] = time.perf_counter() - wall
    after = _usage()
    out.update(peak_rss_mb=after["peak_rss_mb"], workers_peak_rss_mb=after["workers_peak_rss_mb"],
               cpu_s=after["cpu_s"] - before["cpu_s"], workers_cpu_s=after["workers_cpu_s"],
               process_cpu_s=after["cpu_s"])
    out["mol_per_wall_s"] = config["n"] / out["wall_s"]
    out["cpu_ms_per_mol"] = (out["cpu_s"] + out["workers_cpu_s"]) / config["n"] * 1e3
    return out


def _run_ranks(script: str, config: dict) -> list[dict]:
    """The ``ddp`` stage: two rank processes started together; their JSON records."""
    import socket
    import subprocess

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    procs = [subprocess.Popen([sys.executable, script, "--worker", json.dumps(
        {**config, "rank": rank, "port": port})], stdout=subprocess.PIPE, text=True)
        for rank in range(2)]
    records = []
    for proc in procs:
        stdout, _ = proc.communicate(timeout=6 * 3600)
        lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
        if proc.returncode != 0 or not lines:
            raise RuntimeError(f"ddp rank failed (exit {proc.returncode})")
        records.append(json.loads(lines[-1]))
    return records


def _curve_parts(curve: list, parts: int = 8) -> list[float]:
    """The mean training loss in each of :obj:`parts` equal spans of the graphs seen (NaN, shown
    as ``-``, where no step was logged: a short run logs every 10 steps)."""
    import numpy as np

    points = np.asarray(curve, dtype=float).reshape(-1, 2)
    if not len(points):
        return []
    edges = np.linspace(0.0, points[:, 0].max() + 1.0, parts + 1)
    inside = [points[(points[:, 0] >= a) & (points[:, 0] < b), 1]
              for a, b in itertools.pairwise(edges)]
    return [float(v.mean()) if len(v) else float("nan") for v in inside]  # NaN: none logged


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--moses", help="MOSES train.csv.gz (see the module docstring)")
    parser.add_argument("--work", default="scale_runs", help="folder for inputs and caches")
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000],
                        help="molecules for featurize / load / first_step (default: 10k 100k)")
    parser.add_argument("--predict-sizes", type=int, nargs="*", default=[100_000],
                        help="molecules for predict (default: 100k)")
    parser.add_argument("--workers", type=int, default=2,
                        help="featurization worker processes (default: 2)")
    parser.add_argument("--chunk-rows", type=int, default=20_000,
                        help="predict's rows per chunk (default: 20,000)")
    parser.add_argument("--split", default="random", choices=["random", "scaffold"],
                        help="the data module's split (default: random; the CSV template's is "
                        "scaffold)")
    parser.add_argument("--stages", nargs="*", default=["featurize", "load", "first_step"],
                        choices=["featurize", "load", "first_step", "ddp", "epoch"],
                        help="what --sizes measures (default: featurize load first_step)")
    parser.add_argument("--ddp-steps", type=int, default=5,
                        help="training steps of each of the ddp stage's 2 ranks (default: 5)")
    parser.add_argument("--label", default="random", choices=["random", "logp"],
                        help="the label column y (default: random; logp: RDKit's Crippen logP)")
    parser.add_argument("--epoch-processes", type=int, nargs="*", default=[1, 2],
                        help="the epoch stage's process counts (default: 1 2)")
    parser.add_argument("--epoch-fraction", type=float, default=1.0,
                        help="the share of an epoch the epoch stage trains and validates "
                        "(default: 1.0)")
    parser.add_argument("--checkout", action="append", default=[], metavar="NAME=PATH",
                        help="a checkout's root (holding graph_urpe/); repeat to compare")
    args = parser.parse_args(argv)
    if args.worker:
        emit(worker(json.loads(args.worker)))
        return
    if not args.moses:
        parser.error("--moses is required (the MOSES train.csv.gz)")
    os.makedirs(args.work, exist_ok=True)
    script = osp.abspath(__file__)
    rows = []
    small = write_inputs(args.moses, 1000, args.work)
    checkouts = [c.split("=", 1) for c in args.checkout] or [("this", "")]
    for n, kinds in [*((n, args.stages) for n in args.sizes),
                     *((n, ("predict",)) for n in args.predict_sizes)]:
        csv = write_inputs(args.moses, n, args.work, args.label)
        for kind in kinds:
            for name, path in checkouts:
                root = osp.join(args.work, name, "small_cache" if kind == "predict"
                                else f"cache_{n}_{args.split}_{args.workers}")
                config = {"kind": kind, "n": n, "csv": csv, "root": root, "work": args.work,
                          "workers": args.workers, "chunk_rows": args.chunk_rows,
                          "train_csv": small, "name": name, "split": args.split,
                          "checkout": osp.abspath(path) if path else ""}
                if kind == "featurize":  # from the CSV, not an earlier run's cache
                    shutil.rmtree(root, ignore_errors=True)
                if kind == "ddp":
                    records = _run_ranks(script, {**config, "steps": args.ddp_steps})
                elif kind == "epoch":
                    records = [fit_epoch({**config, "processes": p, "fraction": args.epoch_fraction})
                               for p in args.epoch_processes]
                else:
                    records = [run_worker(script, config, memory_env=False, timeout=6 * 3600)]
                for record in records:
                    record["workers"] = args.workers
                    emit(record)
                    rows.append(record)
    print("\n" + markdown_table(
        ["stage", "molecules", "checkout", "wall s", "CPU s (process + workers)",
         "CPU ms / molecule", "molecules / CPU s", "molecules / wall s",
         "peak RSS MB (process / workers; after imports)", "cache or output MB"],
        [[r["bench"], f"{r['n']:,}", r["checkout"],
          f"{r['wall_s']:.1f}" + (f" ({r['since_start_s']:.1f} from start)"
                                  if "since_start_s" in r else ""),
          f"{r['cpu_s']:.1f} + {r['workers_cpu_s']:.1f}", f"{r['cpu_ms_per_mol']:.2f}",
          f"{1e3 / r['cpu_ms_per_mol']:.0f}", f"{r['mol_per_wall_s']:.0f}",
          (f"{r['peak_rss_mb']:.0f} / {r['workers_peak_rss_mb']:.0f}; "
           f"{r['rss_after_imports_mb']:.0f}"),
          f"{r.get('cache_mb', r.get('output_mb', 0)):.1f}"] for r in rows
         if r["bench"] != "epoch"]))  # the epoch stage has its own table below
    epochs = [r for r in rows if r["bench"] == "epoch"]
    if epochs:
        print("\n" + markdown_table(
            ["molecules", "processes", "share of an epoch", "steps", "wall s", "CPU s",
             "training graphs / wall s", "peak RSS MB (largest rank, store pages included)",
             "peak anonymous RSS MB", "training loss over the graphs seen (8 equal parts)"],
            [[f"{r['n']:,}", str(r["processes"]), f"{r['fraction']:g}", f"{r['steps']:,}",
              f"{r['wall_s']:.0f}", f"{r['cpu_s']:.0f}", f"{r['train_graphs_per_wall_s']:.0f}",
              f"{r['peak_rss_mb']:.0f}", f"{r.get('peak_anon_mb', float('nan')):.0f}",
              " ".join("-" if math.isnan(x) else f"{x:.3f}" for x in _curve_parts(r["loss_curve"]))]
             for r in epochs]))
    memory = [(r, when, m) for r in rows for when, m in (
        ("end", r.get("memory")), ("after the steps", r.get("after_steps")),
        ("after reading every page of the cache", r.get("after_touch"))) if m]
    if memory:
        print("\n" + markdown_table(
            ["stage", "molecules", "when", "RSS MB", "RssAnon", "RssFile", "PSS MB",
             "Pss_Anon", "Pss_File"],
            [[r["bench"] + (f" rank {r['rank']}" if "rank" in r else ""), f"{r['n']:,}", when,
              *(f"{m[k]:.0f}" if m.get(k) is not None else "-" for k in (
                  "rss_mb", "rss_anon_mb", "rss_file_mb", "pss_mb", "pss_anon_mb",
                  "pss_file_mb"))] for r, when, m in memory]))


if __name__ == "__main__":
    sys.exit(main())
