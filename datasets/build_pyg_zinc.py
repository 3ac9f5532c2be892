"""Write PyG's raw ZINC format from SMILES and targets, so :class:`torch_geometric.datasets.ZINC`
reads molecules of your choice (by default the embedded ZINC-like 12k set) offline.

    python datasets/build_pyg_zinc.py --root data/zinc_like_pyg
    python datasets/build_pyg_zinc.py --root data/my_zinc --csv my.csv  # smiles,target,split

The raw format (the "Benchmarking GNNs" ``molecules.zip``, read by PyG's ``ZINC.process``):
``raw/{train,val,test}.pickle``, each a pickled list of dicts with ``num_atom`` (int),
``atom_type`` (``torch.long`` ``[n]``, the 28 ZINC types), ``bond_type`` (``torch.long`` ``[n, n]``
adjacency, 0 = no bond, 1/2/3 = single/double/triple) and ``logP_SA_cycle_normalized``
(``torch.float32`` ``[1]``); and ``raw/{train,val,test}.index``, comma-separated molecule indices
of the subset (here every molecule of the split). The folder also gets a
:data:`~graph_urpe.data.zinc.STANDIN_MARKER` file saying which molecules it holds (for the embedded
set: :data:`~graph_urpe.data.zinc.ZINC_LIKE_STANDIN`), read by the dataset summary and
:func:`~graph_urpe.data.families.load_dataset` (``DatasetSplits.source``).
"""

from __future__ import annotations

import argparse
import os
import os.path as osp
import pickle
import shutil
from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch

from graph_urpe.data.csv.row_errors import handle_row_errors
from graph_urpe.data.csv.splits import column_split
from graph_urpe.data.processing import molecules_to_graphs
from graph_urpe.data.zinc import EMBEDDED_ZINC_LIKE, RAW_FILES, STANDIN_MARKER, ZINC_LIKE_STANDIN

_PYG_NAMES = {"train": "train", "valid": "val", "test": "test"}


def write_pyg_zinc_raw(root: str, smiles: Sequence[str], targets: Sequence[float],
                       splits: Sequence[str], strict: bool = False, overwrite: bool = False,
                       num_workers: int | None = None,
                       description: str = ZINC_LIKE_STANDIN) -> str:
    r"""Writes ``root/raw`` in PyG's ZINC format (see the module docstring).

    Molecules that cannot be typed with the 28 ZINC atom types (or are invalid) are skipped, listed
    in ``root/invalid_rows.csv`` and warned about (an error with :obj:`strict`).

    Args:
        root (str): dataset root for :class:`torch_geometric.datasets.ZINC`.
        smiles (Sequence[str]): SMILES strings.
        targets (Sequence[float]): one target per molecule.
        splits (Sequence[str]): ``train``/``valid`` (or ``val``)/``test`` per molecule.
        strict (bool, optional): fail on unusable molecules. (default: :obj:`False`)
        overwrite (bool, optional): replace an existing dataset in ``root`` (its processed files
            would otherwise be stale). A folder without a complete raw set and without processed
            files (e.g. left by a failed download) is filled without it. (default: :obj:`False`)
        num_workers (int, optional): worker processes. (default: :obj:`None`, auto)
        description (str, optional): what the molecules are, written to the
            :data:`~graph_urpe.data.zinc.STANDIN_MARKER` file.
            (default: :data:`~graph_urpe.data.zinc.ZINC_LIKE_STANDIN`)

    Returns:
        str: the raw folder.

    Raises:
        FileExistsError: if ``root`` holds a dataset (all raw files, or processed files) and
            :obj:`overwrite` is false.
        ValueError: for mismatched lengths, bad split names, or a split left empty.
    """
    if not len(smiles) == len(targets) == len(splits):
        raise ValueError(f"smiles, targets and splits differ in length: "
                         f"{len(smiles)}, {len(targets)}, {len(splits)}")
    if osp.exists(root):
        if overwrite:
            shutil.rmtree(root)
        elif _holds_dataset(root):
            raise FileExistsError(f"{root} holds a ZINC dataset; pass overwrite=True (--overwrite) "
                                  "to replace it")
        else:  # empty or partial (a failed download): clear what PyG would read
            for name in ("raw", "molecules", "molecules.zip", STANDIN_MARKER):
                path = osp.join(root, name)
                if osp.isdir(path):
                    shutil.rmtree(path)
                elif osp.exists(path):
                    os.remove(path)
    split_idx = column_split(splits)
    graphs, errors = molecules_to_graphs(list(smiles), np.asarray(targets, dtype=np.float64),
                                         featurization="zinc", num_workers=num_workers,
                                         desc="Featurizing (ZINC types)")
    os.makedirs(osp.join(root, "raw"))
    with open(osp.join(root, STANDIN_MARKER), "w", encoding="utf-8") as f:
        f.write(description + "\n")
    handle_row_errors(errors, len(smiles), "the ZINC input", osp.join(root, "invalid_rows.csv"),
                      strict)
    by_row = {g.row: g for g in graphs}
    for name, idx in split_idx.items():
        mols = [_to_record(by_row[i]) for i in idx.tolist() if i in by_row]
        if not mols:
            raise ValueError(f"split {name!r} has no usable molecule; PyG's ZINC needs all three")
        with open(osp.join(root, "raw", f"{_PYG_NAMES[name]}.pickle"), "wb") as f:
            pickle.dump(mols, f, protocol=pickle.HIGHEST_PROTOCOL)
        with open(osp.join(root, "raw", f"{_PYG_NAMES[name]}.index"), "w") as f:
            f.write(",".join(str(i) for i in range(len(mols))) + "\n")
    return osp.join(root, "raw")


def _holds_dataset(root: str) -> bool:
    """Whether ``root`` has all raw files of PyG's ZINC or any processed file."""
    if all(osp.exists(osp.join(root, "raw", f)) for f in RAW_FILES):
        return True
    processed = [osp.join(root, part, "processed") for part in ("subset", "full")]
    return any(osp.isdir(p) and os.listdir(p) for p in processed)


def _to_record(graph) -> dict:
    n = graph.num_nodes
    adjacency = torch.zeros(n, n, dtype=torch.long)
    adjacency[graph.edge_index[0], graph.edge_index[1]] = graph.edge_attr.view(-1)
    return {
        "num_atom": n,
        "atom_type": graph.x.view(-1).clone(),
        "bond_type": adjacency,
        "logP_SA_cycle_normalized": graph.y.view(1).clone(),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", required=True, help="dataset root to create")
    parser.add_argument("--csv", default=EMBEDDED_ZINC_LIKE,
                        help="CSV with smiles, target, split columns (default: embedded 12k set)")
    parser.add_argument("--smiles-column", default="smiles")
    parser.add_argument("--target-column", default="target")
    parser.add_argument("--split-column", default="split")
    parser.add_argument("--strict", action="store_true", help="fail on unusable molecules")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing root")
    parser.add_argument("--num-workers", type=int, default=None)
    args = parser.parse_args(argv)
    frame = pd.read_csv(args.csv)
    description = ZINC_LIKE_STANDIN if osp.abspath(args.csv) == EMBEDDED_ZINC_LIKE else \
        f"molecules of {osp.basename(args.csv)} in PyG ZINC format (offline stand-in)"
    raw = write_pyg_zinc_raw(args.root, frame[args.smiles_column].tolist(),
                             frame[args.target_column].to_numpy(),
                             frame[args.split_column].tolist(), strict=args.strict,
                             overwrite=args.overwrite, num_workers=args.num_workers,
                             description=description)
    print(f"wrote {raw}; load it with torch_geometric.datasets.ZINC({args.root!r}, subset=True) "
          "or graph_urpe.data.zinc.pyg_zinc(root, download=False)")


if __name__ == "__main__":
    main()
