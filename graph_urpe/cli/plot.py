"""``graph-urpe plot``: redraw a run's figures, or draw what a checkpoint's model learned.

::

    graph-urpe plot RUN_DIR [--out DIR] [--task regression|classification|multiclass]
    graph-urpe plot CKPT [--out DIR] [--smiles SMILES] [--layer L] [--head H]

* a **run folder**: :func:`~graph_urpe.viz.run.plot_run` (``learning_curves.png`` and
  ``parity.png``, ``roc_pr.png`` or ``confusion.png``), by default into ``RUN_DIR/figures``;
* a **checkpoint** (``.ckpt``): ``relation_tables.png``, the learned ``B`` and ``C`` per head read
  straight from the checkpoint's ``state_dict`` (no model is rebuilt); with ``--smiles`` also
  ``attention_layer<L>_head<H>.png``, the attention map of one layer and head before and after
  ``C`` beside the molecule (this rebuilds the model). By default into ``figures/`` of the run
  folder holding the checkpoint (the folder above ``checkpoints/``), else beside the checkpoint.

Every user error ends in one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from torch import nn

from graph_urpe.viz.attention import attention_maps, plot_attention
from graph_urpe.viz.relations import plot_relation_tables, relation_tables_from_state_dict
from graph_urpe.viz.results import TASK_TYPES
from graph_urpe.viz.run import plot_run

__all__ = ["build_parser", "default_out_dir", "load_graph_model", "main"]

ModelLoader = Callable[[Path], tuple[nn.Module, str]]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``graph-urpe plot``."""
    parser = argparse.ArgumentParser(
        prog="graph-urpe plot", allow_abbrev=False,
        description="Draw PNG figures: a run folder's learning curves and test-set plots, or a "
        "checkpoint's learned relation tables (B, C) and, for one molecule, attention maps.",
    )
    parser.add_argument("path", type=Path, help="a run folder, or a .ckpt checkpoint file")
    parser.add_argument("--out", type=Path, default=None,
                        help="output folder (default: figures/ of the run folder)")
    parser.add_argument("--task", choices=TASK_TYPES, default=None,
                        help="run folders: the test plots to draw (default: inferred from "
                        "test_predictions.csv: multiclass if it has T_prob_0 columns, else "
                        "classification if all targets are 0/1 and all predictions in [0, 1])")
    parser.add_argument("--smiles", default=None,
                        help="checkpoints: draw this molecule's attention map (quote it)")
    parser.add_argument("--layer", type=int, default=-1,
                        help="checkpoints with --smiles: layer index, negative counts from the "
                        "end (default: -1, the last layer)")
    parser.add_argument("--head", type=int, default=0,
                        help="checkpoints with --smiles: head index (default: 0)")
    return parser


def default_out_dir(path: Path) -> Path:
    """Where figures go by default: ``RUN/figures`` for a run folder ``RUN``, and for a
    checkpoint ``RUN/checkpoints/x.ckpt`` also ``RUN/figures`` (else ``figures`` beside it)."""
    if path.is_dir():
        return path / "figures"
    parent = path.parent
    return (parent.parent if parent.name == "checkpoints" else parent) / "figures"


def load_graph_model(ckpt: Path) -> tuple[nn.Module, str]:
    """The network and featurization of a graph checkpoint saved by ``graph-urpe fit``.

    Loads :class:`~graph_urpe.models.graph.GraphPropertyModule` (checked, built from the
    checkpoint's checked values: :mod:`graph_urpe.trust`) on the CPU and returns ``(module.model, module.record.featurization or "ogb")``.

    Raises:
        graph_urpe.trust.ReceivedFileError: (a :class:`ValueError`) if the checkpoint does not
            record its network or is refused (:func:`graph_urpe.trust.read_checkpoint`).
    """
    from graph_urpe.models.graph import GraphPropertyModule

    module = GraphPropertyModule.load_from_checkpoint(ckpt, map_location="cpu")
    return module.model, module.record.featurization or "ogb"


def _load_checkpoint(path: Path) -> dict:
    from graph_urpe.trust import read_checkpoint

    return read_checkpoint(str(path))


def _plot_checkpoint(args: argparse.Namespace, out: Path, load_model: ModelLoader) -> list[Path]:
    ckpt = _load_checkpoint(args.path)
    state_dict = ckpt.get("state_dict", ckpt)
    tables = relation_tables_from_state_dict(state_dict, ckpt.get("hyper_parameters"))
    written = [plot_relation_tables(
        tables.bias, tables.multiplier, tables.labels, out / "relation_tables.png",
        tables.xlabel, title=f"learned B and C: {args.path.name}",
    )]
    if args.smiles is not None:
        model, featurization = load_model(args.path)
        maps = attention_maps(model, args.smiles, featurization)
        num_layers = len(maps)
        if not -num_layers <= args.layer < num_layers:
            raise ValueError(f"--layer {args.layer} is out of range: the model has {num_layers} "
                             "attention layers.")
        layer = args.layer % num_layers
        before, after = maps[layer]
        if not 0 <= args.head < before.shape[0]:
            raise ValueError(f"--head {args.head} is out of range: the model has "
                             f"{before.shape[0]} heads.")
        written.append(plot_attention(
            args.smiles, before[args.head], after[args.head],
            out / f"attention_layer{layer}_head{args.head}.png", layer, args.head,
        ))
    return written


def main(argv: Sequence[str] | None = None, load_model: ModelLoader | None = None) -> int:
    """Run ``graph-urpe plot`` with ``argv`` (the arguments after ``plot``).

    Args:
        argv (list[str], optional): command-line arguments. (default: :obj:`None`, ``sys.argv[1:]``)
        load_model (callable, optional): ``ckpt_path -> (network, featurization)``, used for
            ``--smiles``. (default: :obj:`None`, :func:`load_graph_model`)

    Returns:
        int: 0 on success, 2 after a user error (one line on stderr).
    """
    args = build_parser().parse_args(argv)
    out = args.out if args.out is not None else default_out_dir(args.path)
    try:
        if args.path.is_dir():
            if args.smiles is not None:
                raise ValueError("--smiles needs a checkpoint (.ckpt), not a run folder.")
            written = plot_run(args.path, task=args.task, out_dir=out)
        elif args.path.is_file():
            written = _plot_checkpoint(args, out, load_model or load_graph_model)
        else:
            raise FileNotFoundError(f"{args.path} is neither a run folder nor a checkpoint file.")
    except (FileNotFoundError, ValueError, ImportError) as err:
        print(f"graph-urpe plot: error: {err}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
