"""Throughput of the shortest-path preprocessing against networkx BFS and Floyd-Warshall.

Every method computes, for each molecule, the all-pairs SPD matrix and a compact encoding of one
shortest path per pair (a predecessor matrix, from which :func:`graph_urpe.dense.to_dense_path_edges`
reads the edges at batch time), starting from the same ``edge_index`` (both bond directions):

* ``ours (paths)``: :class:`graph_urpe.transforms.AddShortestPathDistance` ``(paths=True)`` applied
  to each PyG ``Data`` (as a ``pre_transform``): SciPy's compiled Floyd-Warshall on a masked dense
  adjacency for molecules (Dijkstra on a CSR adjacency above 256 nodes); ``ours (no paths)``: ``paths=False``; ``ours without PyG Data (paths)``: the same
  computation called directly (:func:`graph_urpe.transforms.shortest_path_arrays`), without the
  transform protocol (PyG's ``copy.copy`` of the ``Data``, attribute writes): the overhead of the
  PyG side.
* ``networkx BFS (paths)``: ``nx.all_pairs_shortest_path`` (one BFS per node, all paths), SPD and
  predecessor matrices filled from the paths; ``networkx BFS (lengths)``:
  ``nx.all_pairs_shortest_path_length`` into an SPD matrix (no paths).
* ``numpy Floyd-Warshall (paths)``: Graphormer's algorithm (``graphormer/data/algos.pyx``:
  ``floyd_warshall`` records for every pair the intermediate node ``k`` that last improved it),
  vectorised over all pairs for each ``k`` in NumPy, then the path reconstruction that Graphormer's
  ``get_all_edges`` does recursively, vectorised: ``pred[i, j] = i`` for direct edges, else
  ``pred[i, j] = pred[k, j]`` with ``k`` the recorded intermediate, iterated to a fixed point.
* ``scipy Floyd-Warshall (paths)``: the same algorithm compiled
  (:func:`scipy.sparse.csgraph.floyd_warshall`) on Graphormer's input, a dense matrix with ``inf``
  for non-edges: what ``ours`` runs, but with SciPy's (slower) dense-input conversion.

Before timing, the methods' SPD matrices are checked equal on the first molecules and every
predecessor walk checked to be a shortest path. Each method then processes all molecules
``--repeats`` times, the methods taking turns in each round, on one core:
``torch.set_num_threads(1)``, the process pinned to one CPU (no BLAS is involved). Reported: the
median CPU time of the process (``time.process_time``; robust to other processes sharing the
machine), with the wall time alongside in the JSON. The SMILES-to-graph conversion (RDKit) is not
timed. Molecules: the embedded ZINC-like 12k CSV (``graph_urpe/data/embedded/zinc_like_12k.csv.gz``,
column ``smiles``) when present, else ``--smiles-csv``.

Output: one JSON line per method, then a markdown table with graphs/s, ms/graph, the CPU time for
all molecules and the speed-up of ``ours (paths)`` over each method. Issue-6 targets: at least 10x
networkx (paths), and all ZINC-like 12k molecules in under 10 s on one core.

Usage::

    python benchmarks/preprocess.py                    # all 12k molecules, 3 repeats
    python benchmarks/preprocess.py --limit 2000 --repeats 1
    python benchmarks/preprocess.py --smiles-csv my.csv --smiles-column SMILES
"""

from __future__ import annotations

import argparse
import glob
import os
import time

import networkx as nx
import numpy as np
import pandas as pd
import torch
from _common import emit, machine_info, markdown_table, median, ratio
from rdkit import Chem, RDLogger
from scipy.sparse.csgraph import floyd_warshall
from torch_geometric.data import Data

import graph_urpe
from graph_urpe.transforms import UNREACHABLE, AddShortestPathDistance, shortest_path_arrays

EMBEDDED = os.path.join(os.path.dirname(graph_urpe.__file__), "data", "embedded")
REFERENCE = "ours (paths)"
CHECKED = 300  # molecules on which all methods are cross-checked before timing


def default_csv() -> str | None:
    """The embedded ZINC-like CSV if present, else any embedded ``*.csv.gz``, else None."""
    preferred = os.path.join(EMBEDDED, "zinc_like_12k.csv.gz")
    if os.path.exists(preferred):
        return preferred
    found = sorted(glob.glob(os.path.join(EMBEDDED, "*.csv.gz")))
    return found[0] if found else None


def load_graphs(path: str, column: str, limit: int | None) -> list[Data]:
    """RDKit molecules of a SMILES CSV as PyG graphs (``edge_index`` both directions, ``num_nodes``)."""
    smiles = pd.read_csv(path, usecols=[column])[column]
    if limit is not None:
        smiles = smiles.iloc[:limit]
    RDLogger.DisableLog("rdApp.*")
    graphs = []
    for row, text in enumerate(smiles):
        mol = Chem.MolFromSmiles(str(text))
        if mol is None:
            raise ValueError(f"{path}: row {row}: invalid SMILES {text!r}")
        bonds = [(b.GetBeginAtomIdx(), b.GetEndAtomIdx()) for b in mol.GetBonds()]
        pairs = bonds + [(v, u) for u, v in bonds]
        edge_index = torch.tensor(pairs, dtype=torch.long).t().reshape(2, -1)
        graphs.append(Data(edge_index=edge_index, num_nodes=mol.GetNumAtoms()))
    return graphs


# Each method maps (edge_index [2, E] long tensor, n) -> (spd int [n, n], pred int [n, n] or None),
# with UNREACHABLE for unreachable pairs and -1 where there is no predecessor.


def ours(paths: bool):
    transform = AddShortestPathDistance(paths=paths)

    def run(data: Data):
        out = transform(data)
        n = out.num_nodes
        if not paths:
            return out.spd.view(n, n), None
        pred = out.spd_pred_index.view(n, n)  # "no predecessor" is stored as the key node j
        return out.spd.view(n, n), torch.where(pred == torch.arange(n, dtype=pred.dtype), -1, pred)

    return run


def arrays_only(data: Data):
    return shortest_path_arrays(data.edge_index, data.num_nodes)


def networkx_bfs(paths: bool):
    def run(data: Data):
        n = data.num_nodes
        graph = nx.Graph()
        graph.add_nodes_from(range(n))
        graph.add_edges_from(data.edge_index.t().tolist())
        spd = np.full((n, n), UNREACHABLE, dtype=np.int16)
        if not paths:
            for i, lengths in nx.all_pairs_shortest_path_length(graph):
                spd[i, list(lengths)] = list(lengths.values())
            return spd, None
        pred = np.full((n, n), -1, dtype=np.int16)
        for i, all_paths in nx.all_pairs_shortest_path(graph):
            targets = list(all_paths)
            spd[i, targets] = [len(p) - 1 for p in all_paths.values()]
            pred[i, targets] = [p[-2] if len(p) > 1 else -1 for p in all_paths.values()]
        return spd, pred

    return run


def _dense_adjacency(data: Data) -> np.ndarray:
    n = data.num_nodes
    dist = np.full((n, n), np.inf)
    ei = data.edge_index.numpy()
    dist[ei[0], ei[1]] = 1.0
    np.fill_diagonal(dist, 0.0)
    return dist


def _to_int(dist: np.ndarray) -> np.ndarray:
    return np.where(np.isinf(dist), UNREACHABLE, dist).astype(np.int16)


def numpy_floyd_warshall(data: Data):
    """Graphormer's Floyd-Warshall with intermediate-node paths, vectorised over pairs per k."""
    dist = _dense_adjacency(data)
    n = dist.shape[0]
    via = np.full((n, n), -1, dtype=np.int64)
    for k in range(n):
        through = dist[:, k, None] + dist[None, k, :]
        better = through < dist
        dist = np.where(better, through, dist)
        via = np.where(better, k, via)
    # Path reconstruction (Graphormer's get_all_edges, vectorised): predecessor of j on i -> j.
    rows = np.broadcast_to(np.arange(n)[:, None], (n, n))
    cols = np.broadcast_to(np.arange(n)[None, :], (n, n))
    reachable = np.isfinite(dist) & (rows != cols)
    direct = reachable & (via < 0)
    pred = np.where(direct, rows, -1)
    pending = reachable & (via >= 0)
    while pending.any():
        # pred(i, j) = pred(k, j) for the recorded intermediate k, once that one is known.
        candidate = pred[via.clip(min=0), cols]
        ready = pending & (candidate >= 0)
        pred = np.where(ready, candidate, pred)
        pending &= ~ready
    return _to_int(dist), pred.astype(np.int16)


def scipy_floyd_warshall(data: Data):
    dist, pred = floyd_warshall(_dense_adjacency(data), directed=True, return_predecessors=True)
    return _to_int(dist), np.maximum(pred, -1).astype(np.int16)


METHODS = {
    REFERENCE: ours(paths=True),
    "ours (no paths)": ours(paths=False),
    "ours without PyG Data (paths)": arrays_only,
    "networkx BFS (paths)": networkx_bfs(paths=True),
    "networkx BFS (lengths)": networkx_bfs(paths=False),
    "numpy Floyd-Warshall (paths)": numpy_floyd_warshall,
    "scipy Floyd-Warshall (paths)": scipy_floyd_warshall,
}


def check_agreement(graphs: list[Data]) -> None:
    """All methods give networkx's SPD; every predecessor walk is a shortest path of edges."""
    for index, data in enumerate(graphs):
        n = data.num_nodes
        edges = set(map(tuple, data.edge_index.t().tolist()))
        reference = None
        for name, method in METHODS.items():
            spd, pred = method(data.clone())
            spd = np.asarray(spd, dtype=np.int64)
            if reference is None:
                reference = spd
            elif not np.array_equal(spd, reference):
                raise AssertionError(f"{name}: SPD differs on molecule {index}")
            if pred is None:
                continue
            pred = np.asarray(pred, dtype=np.int64)
            for i in range(n):
                for j in range(n):
                    hops, node = 0, j
                    while node != i and pred[i, node] >= 0:
                        if (int(pred[i, node]), node) not in edges:
                            raise AssertionError(f"{name}: non-edge on a path, molecule {index}")
                        node, hops = int(pred[i, node]), hops + 1
                    expected = spd[i, j] if spd[i, j] != UNREACHABLE else 0
                    if hops != expected or (spd[i, j] != UNREACHABLE and node != i):
                        raise AssertionError(f"{name}: bad path {i}->{j}, molecule {index}")


def time_methods(names: list[str], graphs: list[Data], repeats: int) -> dict[str, dict]:
    """CPU and wall seconds of each method over all graphs, ``repeats`` rounds, interleaved.

    The methods take turns within each round, so a change in machine load hits all of them alike.
    """
    cpu = {name: [] for name in names}
    wall = {name: [] for name in names}
    for _ in range(repeats):
        for name in names:
            method = METHODS[name]
            start_cpu, start_wall = time.process_time(), time.perf_counter()
            for data in graphs:
                method(data)
            cpu[name].append(time.process_time() - start_cpu)
            wall[name].append(time.perf_counter() - start_wall)
    return {name: {"cpu": cpu[name], "wall": wall[name]} for name in names}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smiles-csv", default=None, help="CSV with SMILES (default: embedded)")
    parser.add_argument("--smiles-column", default="smiles")
    parser.add_argument("--limit", type=int, default=None, help="use the first N molecules")
    parser.add_argument("--repeats", type=int, default=3, help="timed passes per method")
    parser.add_argument(
        "--methods", nargs="+", choices=list(METHODS), default=list(METHODS), metavar="METHOD"
    )
    args = parser.parse_args()

    path = args.smiles_csv or default_csv()
    if path is None:
        parser.error(f"no embedded CSV under {EMBEDDED}: pass --smiles-csv PATH")
    torch.set_num_threads(1)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

    start = time.perf_counter()
    graphs = load_graphs(path, args.smiles_column, args.limit)
    convert_s = time.perf_counter() - start
    sizes = np.array([g.num_nodes for g in graphs])
    check_agreement(graphs[:CHECKED])
    info = machine_info(torch.device("cpu"))
    info["cpus_used"] = 1
    dataset = {
        "csv": os.path.relpath(path),
        "graphs": len(graphs),
        "mean_nodes": round(float(sizes.mean()), 2),
        "max_nodes": int(sizes.max()),
        "rdkit_convert_s": round(convert_s, 3),
    }

    timings = time_methods(args.methods, graphs, args.repeats)
    results = {}
    for name, times in timings.items():
        seconds = median(times["cpu"])
        results[name] = seconds
        emit(
            {
                "bench": "preprocess",
                "method": name,
                "cpu_seconds_all": seconds,
                "wall_seconds_all": median(times["wall"]),
                "graphs_per_s": len(graphs) / seconds,
                "ms_per_graph": 1e3 * seconds / len(graphs),
                "cpu_times": times["cpu"],
                "wall_times": times["wall"],
                "repeats": args.repeats,
                **dataset,
                **info,
            }
        )

    rows = []
    for name, seconds in results.items():
        rows.append(
            [
                name,
                f"{len(graphs) / seconds:,.0f}",
                f"{1e3 * seconds / len(graphs):.3f}",
                f"{seconds:.2f}",
                ratio(seconds, results.get(REFERENCE)),
            ]
        )
    print()
    print(
        f"{len(graphs)} molecules from {dataset['csv']} (mean {dataset['mean_nodes']} atoms, "
        f"max {dataset['max_nodes']}); one core; torch {info['torch']}; median CPU time of "
        f"{args.repeats} interleaved rounds; load average {info['loadavg_1min']:.2f}"
    )
    print()
    headers = ["method", "graphs/s", "ms/graph", "CPU s for all", f"time / {REFERENCE}"]
    print(markdown_table(headers, rows))
    if REFERENCE in results and "networkx BFS (paths)" in results:
        speedup = results["networkx BFS (paths)"] / results[REFERENCE]
        verdict = "met" if speedup >= 10 else "MISSED"
        print(f"\ntarget >= 10x networkx BFS (paths): {speedup:.1f}x, {verdict}")
    if REFERENCE in results:
        per_12k = 12_000 * results[REFERENCE] / len(graphs)
        verdict = "met" if per_12k < 10 else "MISSED"
        print(f"target 12k molecules < 10 s on one core: {per_12k:.2f} s (extrapolated), {verdict}")


if __name__ == "__main__":
    main()
