"""``graph-urpe summarize NAME``: a dataset's graphs, splits and label statistics
(:func:`graph_urpe.data.statistics.summarize`), processed as ``fit`` processes it (same cache)."""

from __future__ import annotations

import argparse

from graph_urpe.data.families import DATASET_NAMES, load_dataset
from graph_urpe.data.statistics import summarize
from graph_urpe.transforms import AddShortestPathDistance

__all__ = ["main"]


def main(argv: list[str] | None = None) -> None:
    """Print the splits and label statistics of a dataset (``graph-urpe summarize NAME``).

    Args:
        argv (list[str], optional): the arguments (default: ``sys.argv[1:]``).
    """
    parser = argparse.ArgumentParser(prog="graph-urpe summarize",
                                     description="Print graphs, splits and label statistics.")
    parser.add_argument("name", help=f"dataset name: {', '.join(DATASET_NAMES)}")
    parser.add_argument("--root", default="data")
    parser.add_argument("--max-graph-nodes", type=int, default=None,
                        help="refuse graphs with more nodes (reported, never dropped silently)")
    parser.add_argument("--strict", action="store_true")
    parser.add_argument("--download", action="store_true", help="allow PyG/OGB downloads")
    parser.add_argument("--num-workers", type=int, default=None)
    parser.add_argument("--csv-path")
    parser.add_argument("--smiles-column", default="smiles")
    parser.add_argument("--target-columns", nargs="+", default=["target"])
    parser.add_argument("--task", default="regression", choices=["regression", "classification"])
    parser.add_argument("--split", default="random")
    parser.add_argument("--featurization", default="ogb", choices=["ogb", "zinc"])
    parser.add_argument("--no-spd", action="store_true",
                        help="process without AddShortestPathDistance (by default the summary "
                             "uses, and so shares the cache of, the training pre_transform)")
    args = parser.parse_args(argv)
    pre_transform = None if args.no_spd else AddShortestPathDistance(max_distance=None, paths=True)
    loaded = load_dataset(
        args.name, root=args.root, pre_transform=pre_transform, max_graph_nodes=args.max_graph_nodes,
        strict=args.strict,
        download=args.download, num_workers=args.num_workers, csv_path=args.csv_path,
        smiles_column=args.smiles_column, target_columns=args.target_columns, task=args.task,
        split=args.split, featurization=args.featurization)
    print(summarize(loaded))

