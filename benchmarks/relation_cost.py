"""What a continuous relation costs a training step: RPE / URPE x SPD / SPD + resistance (issue 47).

Graphormer-GD's resistance distance reaches ``B`` and ``C`` through
:class:`~graph_urpe.nn.GaussianBasisEmbedding` (128 Gaussians, a 128 x 128 hidden layer, a
per-head output layer). Evaluated on every cell of the padded ``[B, N + 1, N + 1]`` map it made a
step 2.4x (RPE) and 3.9x (URPE) one with the SPD alone (``benchmarks/README.md`` section 23; issue
47 measured 3.7x and 4.7x on another day); a batch of 128 ZINC molecules holds about 60,000 pairs
but only ~1,400 distinct resistance values. The measurements, one torch thread, CPU
time of the process, on real batches of the embedded ZINC-like data (the default job's batches
of at most 128 molecules, resistance stored):

1. **The four models** of the default job's network (12 layers, width 80, 8 heads, FFN 80,
   multi-hop edge encoding, no dropout): ``rpe-spd``, ``urpe-spd``, ``rpe-gd``, ``urpe-gd``
   (``gd``: ``relations=["spd", "resistance"]``), same seed, each a whole training step (forward,
   L1 loss, backward, fused AdamW), every batch fed to every model in rotating order
   (:func:`cpu_step.rotate`) so that machine load hits all alike. The targets of issue 47:
   ``urpe-gd / rpe-gd <= 1.15`` and ``urpe-gd / urpe-spd <= 1.3``.
2. **One embedding alone** (``--parts``), forward + backward of one ``[B, H, N', N']`` term on
   the same batches: the per-cell evaluation (the naive reference kept in this script), the library's
   path, and the parts of the latter (``torch.unique`` with its inverse index, the ``[U, H]`` table,
   three exact forms of the gather whose backward sums gradients into the table:
   ``F.embedding`` (its dense backward), ``index_select`` on the ``[H, U]`` table (backward
   ``index_add``), and advanced indexing ``table[:, index]`` (backward ``index_put`` with
   accumulation)).
3. **The CSV template from scratch** (``--template SET --out DIR``): two ``graph-urpe fit`` runs
   of ``configs/csv/template.yaml`` on a set of the Chemprop peer benchmark
   (``benchmarks/peers/chemprop.py``: same rows, same scaffold split, one thread, seed 0),
   ``--model.init_args.finetune.pretrained null``, with ``relations: [spd]`` and with
   ``[spd, resistance]`` (the data store the resistance: graph-urpe links it from the
   relations): CPU s of each process (user + system) and the test metric. Issue 47's target: the second within 1.3x the first.

Run it on two checkouts (``PYTHONPATH=<checkout>``) for before / after numbers; ``--parts`` needs
a checkout with :mod:`graph_urpe.nn.densify` (issue 47 and later).

Usage::

    python benchmarks/relation_cost.py --root /tmp/data --steps 12
    python benchmarks/relation_cost.py --root /tmp/data --steps 12 --parts
    python benchmarks/relation_cost.py --template bace_pic50 --out runs/relation-cost
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from _common import emit, machine_info, markdown_table, ratio
from cpu_step import DEFAULT_PAD, rotate

from graph_urpe.data.featurize import feature_dims
from graph_urpe.data.modules.molecule import ZincLikeDataModule
from graph_urpe.nn import GaussianBasisEmbedding, Graphormer

VARIANTS = {"rpe-spd": ("rpe", ["spd"]), "urpe-spd": ("urpe", ["spd"]),
            "rpe-gd": ("rpe", ["spd", "resistance"]), "urpe-gd": ("urpe", ["spd", "resistance"])}


def default_network(atom: int, bond: int, attention: str, relations: list[str]) -> Graphormer:
    """The default job's network (``configs/default.yaml``) with the given attention and
    relations, seeded."""
    torch.manual_seed(0)
    return Graphormer(1, atom_categories=atom, bond_categories=bond, num_layers=12, embed_dim=80,
                      num_heads=8, ffn_dim=80, attention=attention, relations=relations,
                      max_distance=36, max_degree=63, max_hops=20, dropout=0.0,
                      attention_dropout=0.0)


def cpu_ms(fn, repeats: int) -> float:
    """Mean CPU ms of ``fn()`` over ``repeats`` calls after one untimed call."""
    fn()
    start = time.process_time()
    for _ in range(repeats):
        fn()
    return (time.process_time() - start) / repeats * 1e3


def per_cell(emb: GaussianBasisEmbedding, value: torch.Tensor) -> torch.Tensor:
    """The per-cell evaluation (the code before issue 47): the Gaussians and both layers on
    every cell of ``value`` ``[B, N', N']``, zero where the value is negative -> ``[B, H, N', N']``."""
    r = (emb.scale * value + emb.shift).unsqueeze(-1)
    std = emb.stds.abs() + 1e-2
    phi = torch.exp(-0.5 * ((r - emb.means) / std) ** 2) / (math.sqrt(2 * math.pi) * std)
    out = emb.out(F.gelu(emb.hidden(phi))).movedim(-1, -3).contiguous()
    return out.masked_fill((value < 0).unsqueeze(-3), 0.0)


def embedding_parts(batches: list, repeats: int) -> list[dict]:
    """Part 2: CPU ms of one embedding term and of its parts, per batch."""
    from graph_urpe.nn import ContinuousRelations

    torch.manual_seed(0)
    relations = ContinuousRelations(["resistance"], num_heads=8)
    rows = [_parts_of_one_batch(relations, batch, repeats) for batch in batches]
    for row in rows:
        emit(row)
    return rows


def _parts_of_one_batch(relations, batch, repeats: int) -> dict:
    from graph_urpe.nn import distinct_values
    from graph_urpe.nn.densify import densify_graphs

    emb = relations.embeddings["resistance"]
    dense = densify_graphs(torch.zeros(batch.num_nodes, 1),
                           {"spd": batch.spd, "resistance": batch.resistance},
                           batch.pair_index, batch.batch, batch.ptr, torch.zeros(1, 1), 36)
    value = dense.values["resistance"]
    index = value.index
    padded = index.shape
    grad = torch.randn(padded[0], 8, *padded[1:])
    table = torch.randn(value.values.numel(), 8, requires_grad=True)

    def naive():
        per_cell(emb, value.values[index]).backward(grad)

    def library():
        relations({"resistance": value}).backward(grad)

    def unique():
        distinct_values(value.values[index])

    def table_only():
        emb.table(value.values).sum().backward()

    def gather_embedding():
        F.embedding(index, table).movedim(-1, -3).contiguous().backward(grad)

    def gather_index_select():
        t = table.t()
        out = t.index_select(1, index.flatten()).view(8, *padded).movedim(0, 1).contiguous()
        out.backward(grad)

    def gather_advanced():
        table.t()[:, index].movedim(0, 1).contiguous().backward(grad)

    row = {"bench": "embedding", "cells": index.numel(), "distinct": value.values.numel(),
           "per_cell_ms": cpu_ms(naive, max(1, repeats // 10))}
    for name, fn in (("library_ms", library), ("unique_ms", unique),
                     ("table_ms", table_only), ("gather_embedding_ms", gather_embedding),
                     ("gather_index_select_ms", gather_index_select),
                     ("gather_advanced_ms", gather_advanced)):
        row[name] = cpu_ms(fn, repeats)
    return row


def template_fits(name: str, out: Path, seed: int = 0) -> None:
    """Part 3: the CSV template from scratch with the SPD alone and with SPD + resistance."""
    spec = importlib.util.spec_from_file_location(
        "chemprop_bench", Path(__file__).resolve().parent / "peers" / "chemprop.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    _, task, metric = bench.SETS[name]
    folder = bench.prepare_set(name, bench.ROOT / "runs" / "wheels", out / "sets")
    scratch = ["--model.init_args.finetune.pretrained", "null"]
    runs = {"spd": scratch + ["--model.init_args.model.init_args.relations", '["spd"]'],
            "spd+resistance": scratch + ["--model.init_args.model.init_args.relations",
                                         '["spd", "resistance"]']}
    records = {}
    for relations, extra in runs.items():
        record = bench.run_ours(folder, task, metric, seed, f"scratch-{relations}",
                                out / "runs" / name, extra)
        records[relations] = record
        emit({"bench": "template", "set": name, "relations": relations, "seed": seed,
              "metric": metric, "test": record["value"], "cpu_s": record["cpu_s"],
              "wall_s": record["wall_s"], "loadavg_1min": os.getloadavg()[0]})
    print("\n" + markdown_table(
        ["relations", f"test {metric}", "CPU s", "/ spd"],
        [[k, f"{r['value']:.3f}", f"{r['cpu_s']:.0f}", ratio(r["cpu_s"], records["spd"]["cpu_s"])]
         for k, r in records.items()]))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="data", help="data root of the ZINC-like data "
                        "(default: data; built with the resistance distance on first use)")
    parser.add_argument("--steps", type=int, default=12, help="timed batches (default: 12)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed batches (default: 2)")
    parser.add_argument("--parts", action="store_true",
                        help="also time one embedding term and its parts (part 2)")
    parser.add_argument("--template", default=None, metavar="SET",
                        help="only part 3: template fits on this peer-benchmark set, e.g. "
                        "bace_pic50")
    parser.add_argument("--out", type=Path, default=Path("runs") / "relation-cost",
                        help="part 3's folder (default: runs/relation-cost)")
    args = parser.parse_args(argv)
    if args.template:
        template_fits(args.template, args.out.resolve())
        return
    torch.set_num_threads(1)
    emit({"bench": "machine", **machine_info(torch.device("cpu")),
          "malloc": os.environ.get("LD_PRELOAD", "glibc")})
    dm = ZincLikeDataModule(root=args.root, batch_size=128, resistance=True)
    dm.prepare_data()
    dm.setup("fit")
    batches = [b for _, b in zip(range(args.warmup + args.steps), dm.train_dataloader())]
    atom, bond = feature_dims("ogb")

    def variant(attention, relations):
        model = default_network(atom, bond, attention, relations).train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, fused=True)
        return model, opt, DEFAULT_PAD

    steps = rotate({name: variant(*spec) for name, spec in VARIANTS.items()}, batches,
                   args.warmup)
    ms = {name: t["cpu_s"] / args.steps * 1e3 for name, t in steps.items()}
    emit({"bench": "relation_cost", "steps": args.steps, **{f"{k}_ms": v for k, v in ms.items()},
          "loadavg_1min": os.getloadavg()[0]})
    print("\n" + markdown_table(
        ["model", "CPU ms per step", "/ rpe-spd", "/ urpe-spd", "/ rpe-gd"],
        [[name, f"{v:.0f}", ratio(v, ms["rpe-spd"]), ratio(v, ms["urpe-spd"]),
          ratio(v, ms["rpe-gd"])] for name, v in ms.items()]))
    print(f"\nurpe-gd / rpe-gd = {ratio(ms['urpe-gd'], ms['rpe-gd'])} (target <= 1.15); "
          f"urpe-gd / urpe-spd = {ratio(ms['urpe-gd'], ms['urpe-spd'])} (target <= 1.3)")
    if args.parts:
        rows = embedding_parts(batches[args.warmup:args.warmup + 4], repeats=20)
        keys = [k for k in rows[0] if k.endswith("_ms")]
        print("\n" + markdown_table(
            ["cells", "distinct", *keys],
            [[r["cells"], r["distinct"], *(f"{r[k]:.1f}" for k in keys)] for r in rows]))


if __name__ == "__main__":
    main()
