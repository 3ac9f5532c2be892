"""``graph-urpe fingerprint``: a checkpoint's learned molecule embeddings (Chemprop's
``fingerprint``), one row per input molecule, in input order.

::

    graph-urpe fingerprint --ckpt_path CKPT --csv mols.csv [--smiles_column smiles] --output fp.csv
    graph-urpe fingerprint --ckpt_path CKPT --smiles CCO c1ccccc1 --output fp.npz [--layer hidden]

``--layer encoder`` (default): the encoder's molecule embedding that the head reads (the graph
token's embedding or the pooled node embeddings, ``embed_dim`` values); ``--layer hidden``: the
head's hidden layer (``head_hidden_dim`` values). Output by its suffix: ``.csv`` (``row``, the
input columns, ``fp_0`` ... ``fp_<D-1>``, ``error``) or ``.npz`` (``fingerprints`` ``[N, D]``
float32, ``row``, ``smiles``, ``error``; read with ``numpy.load(path)``, no pickles). A row that
cannot be featurized (invalid SMILES, too large) keeps its place with empty values and the reason
in ``error``, as in ``predict``; so does a fingerprint that is not finite (broken weights). Computed by :meth:`graph_urpe.Predictor.fingerprint`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``graph-urpe fingerprint``."""
    parser = argparse.ArgumentParser(
        prog="graph-urpe fingerprint", allow_abbrev=False,
        description="Write a checkpoint's learned molecule embeddings for SMILES (CSV or .npz).")
    parser.add_argument("--ckpt_path", required=True, help="a graph-urpe checkpoint (.ckpt)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--csv", help="a CSV file with a SMILES column")
    source.add_argument("--smiles", nargs="+", help="SMILES strings (quote each one)")
    parser.add_argument("--smiles_column", default=None,
                        help="the SMILES column of --csv (default: the training file's, kept in "
                        "the checkpoint; else smiles)")
    parser.add_argument("--output", default="fingerprints.csv",
                        help="the output file, .csv or .npz (default: fingerprints.csv)")
    parser.add_argument("--layer", choices=["encoder", "hidden"], default="encoder",
                        help="encoder: the molecule embedding the head reads; hidden: the head's "
                        "hidden layer (default: encoder)")
    parser.add_argument("--member", type=int, default=0,
                        help="the member of an ensemble checkpoint (default: 0)")
    parser.add_argument("--batch_size", type=int, default=64,
                        help="molecules per forward pass (default: 64)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``graph-urpe fingerprint`` (see the module docstring); returns the exit status (2 when
    no molecule could be embedded, after writing the error rows).

    Raises:
        ValueError: an output suffix other than ``.csv`` / ``.npz``, or a CSV without the SMILES
            column (one line each, by the command's error handler).
    """
    args = build_parser().parse_args(argv)
    suffix = Path(args.output).suffix.lower()
    if suffix not in (".csv", ".npz"):
        raise ValueError(f"--output {args.output!r}: give a .csv or .npz file name.")
    from graph_urpe.data.predict_inputs import read_predict_inputs
    from graph_urpe.files import atomic_save, atomic_write_csv, check_writable
    from graph_urpe.models.predictor import Predictor

    check_writable(args.output)
    if not Path(args.ckpt_path).is_file():
        raise FileNotFoundError(f"checkpoint {args.ckpt_path!r} not found: pass --ckpt_path with "
                                "an existing .ckpt file.")
    predictor = Predictor.from_checkpoint(args.ckpt_path, batch_size=args.batch_size)
    column = args.smiles_column or predictor.module.record.smiles_column or "smiles"
    frame = read_predict_inputs(args.csv, args.smiles, column)
    table = predictor.fingerprint(frame[column].tolist(), args.layer, args.member)
    columns = [c for c in table.columns if c.startswith("fp_")]
    if suffix == ".csv":
        inputs = frame.drop(columns=[c for c in ("row", "error") if c in frame.columns])
        out = inputs.join(table[["row", *columns, "error"]].set_index(inputs.index))
        out.insert(0, "row", out.pop("row"))
        atomic_write_csv(out, args.output)
    else:
        def save(tmp: str) -> None:
            with open(tmp, "wb") as handle:
                np.savez(handle, fingerprints=table[columns].to_numpy(np.float32),
                         row=table["row"].to_numpy(), smiles=table["smiles"].to_numpy(str),
                         error=table["error"].to_numpy(str))
        atomic_save(save, args.output)
    failed = table["error"] != ""
    print(f"Wrote {len(columns)}-dimensional {args.layer} fingerprints of {len(table)} input rows "
          f"to {args.output}: {int((~failed).sum())} embedded, {int(failed.sum())} failed"
          + (" (reason in the 'error' column)." if failed.any() else "."))
    for row, reason in list(zip(table["row"][failed], table["error"][failed]))[:10]:
        print(f"  row {row}: {reason}")
    return 2 if len(table) and failed.all() else 0
