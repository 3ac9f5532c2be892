"""The paper's argument on graphs: structural targets with identical node features, none / RPE / URPE.

Luo et al. (NeurIPS 2022, arXiv 2205.13401, Sec. 3) show that RPE attention with identical input
tokens gives identical outputs, since the rows of ``softmax(B)`` sum to one. On graphs the same
holds for an RPE Graphormer whose ``B`` is indexed by the shortest-path distance, as long as nothing
else breaks the symmetry: no graph token, no centrality (degree) encoding. URPE's multiplier ``C``
(indexed by the SPD, applied after the softmax) breaks it. This script trains small Graphormers on
:class:`~graph_urpe.data.synthetic_graphs.SyntheticGraphDataset` (random trees and connected
Erdős–Rényi graphs, 8-20 nodes, seeded, identical node and edge features) with structural
classification targets:

* node level: degree, number of nodes at distance 2, eccentricity;
* graph level: diameter, number of node pairs at distance 2;

for ``attention`` in none / rpe / urpe, with and without the graph token and the degree encoding,
over seeds.

``--biconnectivity``: is a node a cut vertex (node level), has the graph one (graph level; Zhang,
Luo, Wang, He, ICLR 2023: no model whose relations are shortest-path distances alone can tell
cut vertices in general; the resistance distance can), on two chorded cycles joined through a
connector node, half of them with one more edge between the blocks that makes the graph
2-connected (``kinds=("bridged",)``, 8-20 nodes), URPE attention, identical node features, no
degree encoding, no graph token (mean readout), for ``relations`` in ``spd`` / ``resistance`` /
``spd+resistance`` (Graphormer-GD), over seeds. (Whether an *edge* is a bridge is an edge-level target, which
:class:`~graph_urpe.nn.Graphormer` has no head for; it is not run.) Model: ``Graphormer`` with 3 layers, width 32, 4 heads, FFN 64, no edge encoding, no
dropout; readout = graph token when it is on, else the mean of the nodes. Training: AdamW (lr 3e-3,
no weight decay), cross-entropy, ``--epochs`` epochs of batch 32 on 80 % of the graphs; accuracy on
the other 20 % (node level: over all their nodes), against the majority class of the training labels
(``baseline_accuracy``).

Output: one JSON line per run (keys ``task``, ``level``, ``attention``, ``graph_token``,
``degree_encoding``, ``seed``, ``accuracy``, ``baseline_accuracy``, ``epochs``, ``graphs``,
``seconds``), then a markdown table (mean accuracy over seeds).

Usage::

    python benchmarks/graph_synthetic.py --quick   # node tasks, token and degree off, seed 0
    python benchmarks/graph_synthetic.py           # full grid: 5 tasks x 3 x 2 x 2 x 3 seeds
    python benchmarks/graph_synthetic.py --jobs 2  # the same, two runs at a time (one thread each)
    python benchmarks/graph_synthetic.py --biconnectivity --jobs 2  # cut vertices: SPD vs RD
"""

from __future__ import annotations

import argparse
import concurrent.futures
import itertools
import json
import multiprocessing
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch_geometric.loader import DataLoader
from torch_geometric.transforms import Compose

from graph_urpe.data.synthetic_graphs import SYNTHETIC_TASKS, SyntheticGraphDataset
from graph_urpe.nn import Graphormer
from graph_urpe.transforms import AddResistanceDistance, AddShortestPathDistance

ATTENTIONS = ("none", "rpe", "urpe")
BICONNECTIVITY = ("cut_vertex", "has_cut_vertex")
NODE_TASKS = [t for t, level in SYNTHETIC_TASKS.items()
              if level == "node" and t not in BICONNECTIVITY]
RELATION_SETS = (("spd",), ("resistance",), ("spd", "resistance"))
PRE = Compose([AddShortestPathDistance(paths=False), AddResistanceDistance()])


def run(task: str, attention: str, graph_token: bool, degree_encoding: bool, seed: int,
        graphs: int, epochs: int, relations: tuple[str, ...] = ("spd",),
        kinds: tuple[str, ...] = ("tree", "erdos_renyi")) -> dict:
    """Train one model and return its JSON record."""
    start = time.perf_counter()
    data = SyntheticGraphDataset(task, num_graphs=graphs, seed=seed, kinds=kinds,
                                 pre_transform=PRE)
    cut = int(0.8 * len(data))
    train, test = data[:cut], data[cut:]
    torch.manual_seed(seed)
    model = Graphormer(
        data.num_classes, atom_categories=1, level=data.level,
        readout="graph_token" if graph_token else "mean",
        num_layers=3, embed_dim=32, num_heads=4, ffn_dim=64, attention=attention,
        max_distance=20, max_degree=20, edge_encoding="none", relations=list(relations),
        num_kernels=16,
        centrality_encoding=degree_encoding, graph_token=graph_token,
        dropout=0.0, attention_dropout=0.0,
    )
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    loader = DataLoader(train, batch_size=32, shuffle=True,
                        generator=torch.Generator().manual_seed(seed))
    model.train()
    for _ in range(epochs):
        for batch in loader:
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(model(batch), batch.y).backward()
            opt.step()
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for batch in DataLoader(test, batch_size=64):
            correct += int((model(batch).argmax(-1) == batch.y).sum())
            total += batch.y.numel()
    majority = int(torch.bincount(train.y).argmax())
    baseline = float((test.y == majority).float().mean())
    return {
        "bench": "graph_synthetic", "task": task, "level": data.level, "attention": attention,
        "graph_token": graph_token, "degree_encoding": degree_encoding, "seed": seed,
        "accuracy": correct / total, "baseline_accuracy": baseline, "epochs": epochs,
        "graphs": graphs, "seconds": round(time.perf_counter() - start, 1),
        "relations": "+".join(relations), "kinds": "+".join(kinds),
    }


def table(records: list[dict]) -> str:
    """Markdown: one row per (task, token, degree), mean accuracy over seeds per attention."""
    groups: dict[tuple, dict[str, list[float]]] = {}
    base: dict[tuple, list[float]] = {}
    if any(r["relations"] != "spd" for r in records):
        return relations_table(records)
    for r in records:
        key = (r["task"], r["level"], r["graph_token"], r["degree_encoding"])
        groups.setdefault(key, {}).setdefault(r["attention"], []).append(r["accuracy"])
        base.setdefault(key, []).append(r["baseline_accuracy"])
    lines = ["| task | level | graph token | degree enc. | majority | none | rpe | urpe | seeds |",
             "|---|---|---|---|---|---|---|---|---|"]
    for key, accs in groups.items():
        cells = [f"{statistics.mean(accs[a]):.3f}" if a in accs else "-" for a in ATTENTIONS]
        seeds = max(len(v) for v in accs.values())
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | "
                     f"{statistics.mean(base[key]):.3f} | " + " | ".join(cells) + f" | {seeds} |")
    return "\n".join(lines)


def relations_table(records: list[dict]) -> str:
    """Markdown: one row per (task, attention, relations), accuracy per seed and the mean."""
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        groups.setdefault((r["task"], r["kinds"], r["attention"], r["relations"]), []).append(r)
    lines = ["| task | graphs | attention | relations | majority | accuracy per seed | mean |",
             "|---|---|---|---|---|---|---|"]
    for (task, kinds, attention, relations), rs in groups.items():
        accs = [r["accuracy"] for r in rs]
        lines.append(
            f"| {task} | {kinds} | {attention} | {relations} | "
            f"{statistics.mean(r['baseline_accuracy'] for r in rs):.3f} | "
            + ", ".join(f"{a:.3f}" for a in accs) + f" | {statistics.mean(accs):.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="node tasks only, graph token and degree encoding off, one seed")
    p.add_argument("--biconnectivity", action="store_true",
                   help="cut vertices on glued chorded cycles, URPE with SPD / RD / both relations")
    p.add_argument("--graphs", type=int, default=300, help="graphs per dataset (default: 300)")
    p.add_argument("--epochs", type=int, default=40, help="training epochs (default: 40)")
    p.add_argument("--seeds", type=int, default=3, help="seeds 0..S-1 (default: 3)")
    p.add_argument("--tasks", nargs="+", choices=SYNTHETIC_TASKS,
                   default=[t for t in SYNTHETIC_TASKS if t not in BICONNECTIVITY])
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads per run (default: 1)")
    p.add_argument("--jobs", type=int, default=1,
                   help="runs at a time, each in its own process (default: 1)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.biconnectivity:
        grid = [(task, "urpe", False, False, seed, args.graphs, args.epochs, relations,
                 ("bridged",))
                for task, seed, relations in itertools.product(
                    BICONNECTIVITY, range(args.seeds), RELATION_SETS)]
    else:
        if args.quick:
            tasks, flags, seeds = NODE_TASKS, [(False, False)], [0]
        else:
            tasks, seeds = args.tasks, range(args.seeds)
            flags = list(itertools.product([False, True], [False, True]))
        grid = [(task, attention, token, degree, seed, args.graphs, args.epochs)
                for task, (token, degree), seed, attention
                in itertools.product(tasks, flags, seeds, ATTENTIONS)]
    records = []
    with concurrent.futures.ProcessPoolExecutor(
        max_workers=args.jobs, mp_context=multiprocessing.get_context("spawn"),
        initializer=torch.set_num_threads, initargs=(args.threads,),
    ) as pool:
        for rec in pool.map(run, *zip(*grid)):  # results in grid order
            print(json.dumps(rec), flush=True)
            records.append(rec)
    print()
    print(table(records))


if __name__ == "__main__":
    main(sys.argv[1:])
