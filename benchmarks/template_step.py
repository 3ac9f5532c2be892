"""CPU time of a training step of the CSV template's network, with and without its dropout.

The template (``configs/csv/template.yaml``) trains a 4-layer, width-64, 8-head URPE-Graphormer
with ``dropout`` and ``attention_dropout`` 0.1 on batches of 64 molecules. Dropout's random numbers
were 17 % of its step (``benchmarks/README.md`` section 12); this script measures what they cost
now: the same network with dropout 0.1 / 0.1 and with 0 / 0, every batch fed to both in rotating
order (:func:`cpu_step.rotate`), one torch thread, CPU time of the process. Run it on two
checkouts (``PYTHONPATH=<checkout>``) to compare implementations.

Usage::

    python benchmarks/template_step.py --root /tmp/data --steps 40
"""

from __future__ import annotations

import argparse
import sys

import torch
from _common import emit, markdown_table, ratio
from cpu_step import DEFAULT_PAD, rotate

from graph_urpe.data.featurize import feature_dims
from graph_urpe.data.modules.molecule import ZincLikeDataModule
from graph_urpe.nn import Graphormer


def template_model(atom, bond, dropout: float) -> Graphormer:
    """The CSV template's network (its sizes; dropout as given), seeded."""
    torch.manual_seed(0)
    return Graphormer(1, atom_categories=atom, bond_categories=bond, num_layers=4, embed_dim=64,
                      num_heads=8, ffn_dim=64, attention="urpe", readout="sum",
                      head_hidden_dim=128, head_dropout=dropout, dropout=dropout,
                      attention_dropout=dropout)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="data", help="data root (default: data)")
    parser.add_argument("--steps", type=int, default=40, help="timed batches (default: 40)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed batches (default: 3)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    dm = ZincLikeDataModule(root=args.root, batch_size=64)
    dm.prepare_data()
    dm.setup("fit")
    batches = [b for _, b in zip(range(args.warmup + args.steps), dm.train_dataloader())]
    atom, bond = feature_dims("ogb")

    def variant(dropout):
        model = template_model(atom, bond, dropout).train()
        return model, torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True), DEFAULT_PAD

    steps = rotate({"dropout 0.1": variant(0.1), "no dropout": variant(0.0)}, batches,
                   args.warmup)
    ms = {k: v["cpu_s"] / args.steps * 1e3 for k, v in steps.items()}
    cost = ms["dropout 0.1"] - ms["no dropout"]
    emit({"bench": "template_step", **{f"{k} cpu_ms": v for k, v in ms.items()},
          "dropout_ms": cost, "dropout_share": cost / ms["dropout 0.1"]})
    print("\n" + markdown_table(
        ["dropout 0.1, CPU ms / step", "no dropout", "dropout's cost", "share of the step"],
        [[f"{ms['dropout 0.1']:.1f}", f"{ms['no dropout']:.1f}", f"{cost:.1f} ms",
          ratio(cost, ms["dropout 0.1"])]]))


if __name__ == "__main__":
    sys.exit(main())
