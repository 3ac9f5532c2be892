"""One 300-atom molecule in a batch: CPU time and peak memory of a training step of the CSV
template's network, against a batch of ordinary molecules.

The CSV template refused molecules above 128 heavy atoms (peptides of 206-234 atoms were lost from
a held-out bioactivity set); it now accepts what the batch budget allows
(``max_graph_nodes: 1448``, ``isqrt`` of the default padded-cell budget
:data:`graph_urpe.data.sampler.DEFAULT_MAX_CELLS`, 2^21). The size-bucketed sampler puts a large
molecule with the next-largest ones, at most ``max_cells / n^2`` graphs in its batch (23 at 300
atoms). Measured here, each batch in a fresh process (peak RSS above the entry, glibc returning
freed memory: :class:`_common.PeakMemory`; the time in another, plain process), one torch thread, featurized as ``fit`` does (OGB
features, shortest paths):

* ``moses x 64``: 64 MOSES molecules (the template's batch size);
* ``300-atom + 22 moses``: a 301-heavy-atom peptide (poly-alanine, 60 residues) with the 22
  largest of 2,000 MOSES molecules: the batch the sampler forms for it;
* ``300-atom alone``.

Forward, L1 loss, backward and a fused AdamW step (one warm-up step, then ``--steps`` timed ones,
CPU time).

Usage::

    python benchmarks/large_molecule.py --moses /tmp/moses/moses/dataset/data/train.csv.gz
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from _common import PeakMemory, emit, markdown_table, run_worker

PEPTIDE = "N" + "[C@@H](C)C(=O)N" * 59 + "[C@@H](C)C(=O)O"  # 60 alanines: 300 heavy atoms


def worker(config: dict) -> dict:
    import pandas as pd
    import torch
    import torch.nn.functional as F
    from torch_geometric.data import Batch

    from graph_urpe.data.featurize import feature_dims, smiles_to_graph
    from graph_urpe.nn import Graphormer
    from graph_urpe.transforms import pair_pre_transform

    torch.set_num_threads(1)
    spd = pair_pre_transform(False)
    moses = pd.read_csv(config["moses"], nrows=2000)["SMILES"].tolist()
    graphs = [spd(smiles_to_graph(s, "ogb")) for s in moses]
    if config["batch"] == "moses x 64":
        chosen = graphs[:64]
    else:
        big = spd(smiles_to_graph(PEPTIDE, "ogb"))
        largest = sorted(graphs, key=lambda g: g.num_nodes)[-22:]
        chosen = [big] if config["batch"] == "300-atom alone" else [big, *largest]
    for g in chosen:
        g.y = torch.zeros(1, 1)
    batch = Batch.from_data_list(chosen)
    atom, bond = feature_dims("ogb")
    torch.manual_seed(0)
    net = Graphormer(1, atom_categories=atom, bond_categories=bond, num_layers=4, embed_dim=64,
                     num_heads=8, ffn_dim=64, readout="sum", head_hidden_dim=128,
                     head_dropout=0.1, dropout=0.1, attention_dropout=0.1).train()
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4, fused=True)

    def step():
        loss = F.l1_loss(net(batch).view(-1), batch.y.view(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()

    sizes = [g.num_nodes for g in chosen]
    out = {"bench": "large_molecule", "batch": config["batch"], "graphs": len(chosen),
           "largest": max(sizes), "atoms": sum(sizes),
           "padded_cells": len(chosen) * (max(sizes) + 1) ** 2}
    if config["measure"] == "memory":
        with PeakMemory(torch.device("cpu")) as peak:
            step()  # the first step's peak is every step's (AdamW's state included)
        return {**out, "peak_mb": peak.peak_bytes / 2**20}
    step()  # warm-up
    start = time.process_time()
    for _ in range(config["steps"]):
        step()
    return {**out, "cpu_ms_per_step": (time.process_time() - start) / config["steps"] * 1e3}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--moses", help="MOSES train.csv.gz")
    parser.add_argument("--steps", type=int, default=5, help="timed steps (default: 5)")
    args = parser.parse_args(argv)
    if args.worker:
        emit(worker(json.loads(args.worker)))
        return
    if not args.moses:
        parser.error("--moses is required")
    rows = []
    for batch in ("moses x 64", "300-atom + 22 moses", "300-atom alone"):
        config = {"batch": batch, "moses": args.moses, "steps": args.steps}
        # Time in a plain process; the peak in one whose freed memory goes back to the kernel
        # (that malloc setting slows every allocation, so it would distort the time).
        record = {**run_worker(__file__, {**config, "measure": "time"}, memory_env=False),
                  **run_worker(__file__, {**config, "measure": "memory"}, memory_env=True)}
        emit(record)
        rows.append([batch, record["graphs"], record["largest"], f"{record['padded_cells']:,}",
                     f"{record['cpu_ms_per_step']:.0f}", f"{record['peak_mb']:.0f}"])
    print("\n" + markdown_table(
        ["batch", "graphs", "largest graph (atoms)", "padded cells (with the graph token)",
         "CPU ms / step", "peak MB above entry"], rows))


if __name__ == "__main__":
    sys.exit(main())
