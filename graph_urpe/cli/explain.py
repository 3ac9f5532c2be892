"""``graph-urpe explain``: why this prediction: per-atom attributions of a checkpoint's
predictions, drawn on each molecule (PNG) and written as numbers (CSV).

::

    graph-urpe explain --ckpt_path CKPT --smiles "CS(=O)(=O)c1ccccc1" "CCO" --out why
    graph-urpe explain --ckpt_path CKPT --csv molecules.csv --smiles_column smiles --target logS

Attributions are integrated gradients over the atom embeddings
(:func:`graph_urpe.viz.attribution.atom_attributions`, Captum): each atom's share of the
difference between the prediction and the prediction of the same graph without atom identities;
they add up to that difference. Writes ``OUT/attributions.csv`` (one row per input molecule,
target and atom: ``row``, ``smiles``, ``target``, ``prediction``, ``baseline``, ``atom``,
``element``, ``attribution``, and ``error`` for inputs that could not be used, one row each, never
dropped: invalid SMILES, too large, or a prediction or attribution that is not finite) and
``OUT/row<R>_<target>.png`` per molecule and target (blue: the atom raises the prediction, red:
it lowers it).
"""

from __future__ import annotations

import argparse
import math
import os.path as osp
import sys
from collections.abc import Sequence

from graph_urpe.cli.messages import CLIError

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``graph-urpe explain``."""
    parser = argparse.ArgumentParser(
        prog="graph-urpe explain", allow_abbrev=False,
        description="Per-atom attributions (integrated gradients over the atom embeddings, "
        "Captum) of a checkpoint's predictions: a PNG per molecule and target, and the numbers "
        "as CSV.",
    )
    parser.add_argument("--ckpt_path", required=True, help="a checkpoint written by fit")
    inputs = parser.add_mutually_exclusive_group(required=True)
    inputs.add_argument("--smiles", nargs="+", help="the molecules (quote each SMILES)")
    inputs.add_argument("--csv", help="a CSV of molecules (one SMILES per row)")
    parser.add_argument("--smiles_column", default=None,
                        help="the CSV's SMILES column (default: the training file's, kept in the "
                        "checkpoint; else smiles)")
    parser.add_argument("--target", action="append", default=None,
                        help="a target to explain, by name; may be repeated (default: every "
                        "target of the model)")
    parser.add_argument("--out", default="explanations",
                        help="output folder (default: explanations)")
    parser.add_argument("--steps", type=int, default=50,
                        help="steps of the integrated-gradients path integral (default: 50)")
    return parser


def _load(ckpt_path: str):
    from graph_urpe.models import GraphPropertyModule

    if not osp.isfile(ckpt_path):
        raise FileNotFoundError(f"checkpoint {ckpt_path!r} not found: pass --ckpt_path with an "
                                "existing .ckpt file (fit prints the best and last ones).")
    try:
        module = GraphPropertyModule.load_from_checkpoint(ckpt_path, map_location="cpu",
                                                          weights_only=True)
    except TypeError as err:  # no network configuration stored (a module built in Python)
        raise ValueError(f"{ckpt_path} does not record its network (it was not written by "
                         "`graph-urpe fit`): call graph_urpe.viz.atom_attributions in Python.") \
            from err
    if module.record.task not in ("regression", "classification"):
        raise ValueError(f"explain covers regression and binary classification models; "
                         f"{ckpt_path} is a {module.record.task} model.")
    return module.eval()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``graph-urpe explain`` (see the module docstring).

    Returns:
        int: ``0``; ``2`` when no input molecule could be explained (the error rows are still
        written).

    Raises:
        CLIError: for an unknown ``--target`` or ``--steps`` below 1.
        FileNotFoundError: for a missing checkpoint or CSV.
    """
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.steps < 1:
        raise CLIError(f"--steps must be >= 1, got {args.steps}.")
    try:
        import captum  # noqa: F401
    except ImportError:
        raise CLIError("graph-urpe explain needs Captum: pip install 'graph-urpe[explain]' "
                       "(or pip install captum).") from None
    import pandas as pd
    import torch

    from graph_urpe.data.csv.reading import csv_header
    from graph_urpe.data.featurize import parse_smiles
    from graph_urpe.data.predict_inputs import model_input_graphs, read_predict_inputs
    from graph_urpe.data.predictions import NOT_FINITE
    from graph_urpe.files import atomic_write_csv, check_writable
    from graph_urpe.viz.attribution import atom_attributions, draw_attributions

    module = _load(args.ckpt_path)
    names = module.target_names
    targets = args.target or names
    unknown = [t for t in targets if t not in names]
    if unknown:
        raise CLIError(f"--target {unknown[0]}: the model's targets are {', '.join(names)}.")
    out = args.out
    table_path = osp.join(out, "attributions.csv")
    check_writable(table_path)
    column = args.smiles_column or module.record.smiles_column or "smiles"
    if args.csv is not None:
        if not osp.isfile(args.csv):
            raise FileNotFoundError(f"--csv {args.csv}: no such file.")
        columns = csv_header(args.csv)
        if column not in columns:
            raise CLIError(f"--csv {args.csv} has no column {column!r} (its columns: "
                           f"{', '.join(map(str, columns))}): name the SMILES column with "
                           "--smiles_column.")
    frame = read_predict_inputs(args.csv, args.smiles, column)
    smiles = frame[column].tolist()
    # graph-urpe predict's path and default budgets: the same molecules accepted and refused.
    graphs, errors = model_input_graphs(smiles, module)
    by_row = {int(g.sample_id): g for g in graphs}
    rows = []
    for row, text in enumerate(smiles):
        results = {} if row not in by_row else {
            name: atom_attributions(module, by_row[row], names.index(name), args.steps)
            for name in targets}
        broken = next((what for r in results.values() for what, ok in (
            ("prediction", math.isfinite(r.prediction) and math.isfinite(r.baseline)),
            ("attribution", bool(torch.isfinite(r.atoms).all()))) if not ok), None)
        if broken is not None:
            errors[row] = NOT_FINITE.format(what=broken)
        if row in errors:
            rows.append({"row": row, "smiles": text, "error": errors[row]})
            continue
        mol = parse_smiles(text)
        for name, result in results.items():
            figure = draw_attributions(text, result.atoms, osp.join(out, f"row{row}_{name}.png"))
            top = int(result.atoms.abs().argmax())
            print(f"row {row} {text}: {name} {result.prediction:.4g} (without atom identities "
                  f"{result.baseline:.4g}); largest: {mol.GetAtomWithIdx(top).GetSymbol()}{top} "
                  f"{float(result.atoms[top]):+.3g}; {figure}")
            rows += [{"row": row, "smiles": text, "target": name,
                      "prediction": result.prediction, "baseline": result.baseline,
                      "atom": i, "element": atom.GetSymbol(),
                      "attribution": float(result.atoms[i]), "error": ""}
                     for i, atom in enumerate(mol.GetAtoms())]
    columns = ["row", "smiles", "target", "prediction", "baseline", "atom", "element",
               "attribution", "error"]
    table = pd.DataFrame(rows, columns=columns)
    table["atom"] = table["atom"].astype("Int64")  # error rows have none
    atomic_write_csv(table, table_path)
    failed = len(errors)
    print(f"Explained {len(smiles) - failed} of {len(smiles)} molecules ({failed} failed: see the "
          f"error column) for {', '.join(targets)}: {osp.abspath(table_path)}")
    return 2 if failed == len(smiles) else 0
