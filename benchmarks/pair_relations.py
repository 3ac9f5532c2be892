"""Cost of the pair relations of :mod:`graph_urpe.transforms` on the embedded ZINC-like molecules:
CPU time per graph of each transform, and the bytes stored per graph in the pair layout.

* ``AddShortestPathDistance(paths=True)``: ``pair_index`` (int32 ``[2, n*n]``), ``spd`` (int16),
  ``spd_pred_index`` (int32);
* ``AddResistanceDistance()``: ``pair_index`` (shared with the SPD when both run) and
  ``resistance`` (float32);
* the layout before issue 30, for reference: ``spd`` and ``spd_pred`` as int16 ``[n*n]`` (4 bytes
  per pair, no index).

Timing: ``time.process_time`` over the first ``--limit`` molecules, one thread, the molecules
featurized once beforehand (not timed), each transform applied to a fresh copy.

Usage::

    python benchmarks/pair_relations.py --limit 2000
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import time

import torch

import graph_urpe
from graph_urpe.data.featurize import smiles_to_graph
from graph_urpe.transforms import AddResistanceDistance, AddShortestPathDistance

CSV = os.path.join(os.path.dirname(graph_urpe.__file__), "data", "embedded", "zinc_like_12k.csv.gz")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--limit", type=int, default=2000, help="molecules (default: 2000)")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    with gzip.open(CSV, "rt") as f:
        smiles = [row["smiles"] for row, _ in zip(csv.DictReader(f), range(args.limit))]
    graphs = [smiles_to_graph(s, "ogb") for s in smiles]
    rows = []
    for name, transform, keys in (
        ("AddShortestPathDistance(paths=True)", AddShortestPathDistance(),
         ("pair_index", "spd", "spd_pred_index")),
        ("AddResistanceDistance()", AddResistanceDistance(), ("pair_index", "resistance")),
    ):
        start = time.process_time()
        out = [transform(g.clone()) for g in graphs]
        cpu = time.process_time() - start
        stored = sum(d[k].numel() * d[k].element_size() for d in out for k in keys)
        rows.append({"transform": name, "graphs": len(graphs),
                     "cpu_ms_per_graph": round(cpu / len(graphs) * 1e3, 3),
                     "bytes_per_graph": round(stored / len(graphs), 1)})
    pairs = sum(g.num_nodes ** 2 for g in graphs) / len(graphs)
    rows.append({"transform": "layout before issue 30 (spd + spd_pred, int16)",
                 "graphs": len(graphs), "cpu_ms_per_graph": None,
                 "bytes_per_graph": round(4 * pairs, 1)})
    for row in rows:
        print(json.dumps(row))
    print(f"\nmean pairs per graph: {pairs:.1f}\n")
    print("| transform | CPU ms / graph | bytes / graph |\n|---|---|---|")
    for r in rows:
        ms = "-" if r["cpu_ms_per_graph"] is None else f"{r['cpu_ms_per_graph']:.3f}"
        print(f"| {r['transform']} | {ms} | {r['bytes_per_graph']:,.0f} |")


if __name__ == "__main__":
    main()
