"""Is rebuilding ``pair_index`` on access (not storing it) the right call for the CSV dataset's
store? The same molecules cached twice, ``pair_index`` rebuilt from the node count (the default,
``graph_urpe.data.stored_graphs.DERIVED``) and stored like any other attribute (``DERIVED``
emptied while building and reading): cache size, and CPU time of ``dataset[i]`` over every graph,
both caches alternating in one process (``--rounds`` times).

Usage::

    python benchmarks/stored_pair_index.py --csv moses_20000.csv --work /tmp/pairs --rounds 4
"""

from __future__ import annotations

import argparse
import json
import os
import os.path as osp
import shutil
import time


def _folder_mb(folder: str) -> float:
    return sum(osp.getsize(osp.join(d, f)) for d, _, fs in os.walk(folder) for f in fs) / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", required=True, help="CSV with columns smiles, y")
    parser.add_argument("--work", required=True, help="folder for the two caches")
    parser.add_argument("--rounds", type=int, default=4, help="timed passes per cache")
    args = parser.parse_args()
    import torch

    import graph_urpe.data.stored_graphs as stored
    from graph_urpe.data.csv.dataset import SmilesCSVDataset
    from graph_urpe.transforms import AddShortestPathDistance

    torch.set_num_threads(1)
    derived, datasets = stored.DERIVED, {}
    for mode in ("rebuilt", "stored"):
        stored.DERIVED = derived if mode == "rebuilt" else {}
        root = osp.join(args.work, mode)
        shutil.rmtree(root, ignore_errors=True)
        datasets[mode] = SmilesCSVDataset(root, args.csv, "smiles", ["y"], num_workers=0,
                                          pre_transform=AddShortestPathDistance(), log=False,
                                          max_graph_nodes=128)
    stored.DERIVED = derived
    n = len(datasets["rebuilt"])
    times: dict[str, list[float]] = {mode: [] for mode in datasets}
    for _ in range(args.rounds):
        for mode, ds in datasets.items():
            start = time.thread_time()
            for i in range(n):
                ds[i]
            times[mode].append((time.thread_time() - start) / n * 1e6)
    for mode, ds in datasets.items():
        print(json.dumps({"mode": mode, "graphs": n, "cache_mb": _folder_mb(ds.processed_dir),
                          "get_us_per_graph": sorted(times[mode])}))


if __name__ == "__main__":
    main()
