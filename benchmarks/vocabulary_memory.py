"""CPU time and peak anonymous memory of ``training_vocabulary`` on a large CSV store's training
split, in a fresh process, for one checkout of graph-urpe (run it once per checkout to compare):
the split is loaded from the cache ``benchmarks/scale.py`` built, then
:func:`graph_urpe.data.predict_inputs.training_vocabulary` runs while a thread polls ``RssAnon``
(``/proc/self/status``) every 20 ms. Prints one JSON line.

    python benchmarks/vocabulary_memory.py --checkout /path/to/before --csv .../moses_1584663_logp.csv \\
        --root .../this/cache_1584663_random_1
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time


def _anon_mb() -> float:
    with open("/proc/self/status") as handle:
        return next(int(ln.split()[1]) for ln in handle if ln.startswith("RssAnon")) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", default="", help="a checkout's root (its graph_urpe first)")
    parser.add_argument("--csv", required=True, help="the CSV scale.py wrote (columns smiles, y)")
    parser.add_argument("--root", required=True, help="the cache folder scale.py built")
    args = parser.parse_args()
    if args.checkout:
        sys.path.insert(0, args.checkout)
    import graph_urpe
    from graph_urpe.data.modules.molecule import CSVDataModule
    from graph_urpe.data.predict_inputs import training_vocabulary

    data = CSVDataModule(args.csv, target_columns=["y"], split="random", root=args.root,
                         batch_size=64, max_graph_nodes=128, processing_workers=1)
    split = data.load().splits["train"]
    before = _anon_mb()
    peak, done = [before], threading.Event()

    def watch() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _anon_mb())
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    cpu, wall = time.process_time(), time.perf_counter()
    vocabulary = training_vocabulary(split)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    done.set()
    watcher.join()
    print(json.dumps({"graph_urpe": graph_urpe.__file__, "graphs": len(split),
                      "cpu_s": round(cpu, 2), "wall_s": round(wall, 2),
                      "anon_before_mb": round(before), "anon_peak_mb": round(peak[0]),
                      "atom_values_per_column": [len(c) for c in vocabulary["atom"]]}))


if __name__ == "__main__":
    main()
