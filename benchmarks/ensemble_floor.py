"""The std floor of the calibration (``fit_sigma_floor``) against none, on the same trained networks.

For each run folder given (a ``graph-urpe fit`` of a regression CSV, any ensemble size or MVE), its
``last.ckpt`` predicts the validation and test rows of the CSV it was trained on (``split``
column): each row's mean and raw variance (the members' spread, MVE's variance), the model's own
``mean_and_variance``. On those rows the calibration of ``graph_urpe/models/calibration.py`` is
fitted twice on the validation rows, once with the floor fixed at 0 (what every fit did before
the floor) and once with the floor the likelihood picks, then scored on the test rows with
:func:`~graph_urpe.models.calibration.calibration_metrics`: coverage of the conformal 95 %
interval, its mean width, the median std, Spearman(|error|, std) and the Gaussian NLL. The
networks are the same in both columns: only the calibration differs.

Usage::

    python benchmarks/ensemble_floor.py --data lipo350.csv --runs 'runs/lipo350-e2-s*/version_0'
"""

from __future__ import annotations

import argparse
import glob
import os.path as osp

import pandas as pd
import torch

from graph_urpe.data.budgets import DEFAULT_BUDGETS
from graph_urpe.data.predict_inputs import model_input_graphs
from graph_urpe.models.calibration import (
    LEVEL,
    calibration_metrics,
    fit_calibration,
    fit_sigma_floor,
    floored_sigma,
)
from graph_urpe.models.graph import GraphPropertyModule


@torch.inference_mode()
def mean_and_variance(module: GraphPropertyModule, smiles: list[str]) -> tuple[torch.Tensor, ...]:
    """``(mean, variance)`` ``[N, T]`` of each SMILES, in input order."""
    graphs, failed = model_input_graphs(smiles, module)
    if failed:
        raise ValueError(f"{len(failed)} molecules have no graph: {list(failed.items())[:3]}")
    means, variances, rows = [], [], []
    for batch in DEFAULT_BUDGETS.loader(graphs):
        mean, var = module.mean_and_variance(batch)
        means.append(mean)
        variances.append(var)
        rows.append(batch.sample_id)
    order = torch.argsort(torch.cat(rows))
    return torch.cat(means)[order], torch.cat(variances)[order]


def scores(val, test, floor: torch.Tensor) -> dict[str, float]:
    """Fit the calibration on ``val`` with ``floor`` and score it on ``test``."""
    (vm, vv, vy), (tm, tv, ty) = val, test
    scale, q = fit_calibration(vm, floored_sigma(vv, floor), vy, LEVEL)
    ts = floored_sigma(tv, floor)
    std, half = ts * scale, ts * q
    got = calibration_metrics(tm, std, tm - half, tm + half, ty)
    return {"coverage": got["coverage"], "width": float((2 * half).mean()),
            "median_std": float(std.median()), "spearman": got["spearman"], "nll": got["nll"],
            "scale": float(scale[0])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="the CSV the runs trained on")
    parser.add_argument("--runs", nargs="+", required=True, help="run folders (globs)")
    parser.add_argument("--target", default="target")
    args = parser.parse_args()
    torch.set_num_threads(1)
    frame = pd.read_csv(args.data)
    split = {s: frame[frame["split"] == s] for s in ("valid", "test")}
    header = ("| run | members | tau | floor | coverage | mean width | median std | Spearman "
              "| NLL | z-scale s |")
    lines = [header, "|---|---|---|---|---|---|---|---|---|---|"]
    for run in sorted(r for pattern in args.runs for r in glob.glob(pattern)):
        module = GraphPropertyModule.load_from_checkpoint(
            osp.join(run, "checkpoints", "last.ckpt")).eval()
        parts = {}
        for name, rows in split.items():
            mean, var = mean_and_variance(module, rows["smiles"].tolist())
            parts[name] = (mean, var, torch.tensor(rows[args.target].to_numpy())[:, None].float())
        vm, vv, vy = parts["valid"]
        tau = fit_sigma_floor(vm, vv.clamp(min=0).sqrt(), vy)
        for label, floor in (("none", torch.zeros_like(tau)), ("fitted", tau)):
            s = scores(parts["valid"], parts["test"], floor)
            lines.append(f"| {run} | {len(module.members)} | {float(tau[0]):.3g} | {label} | "
                         f"{s['coverage']:.3f} | {s['width']:.3g} | {s['median_std']:.3g} | "
                         f"{s['spearman']:.3f} | {s['nll']:.3f} | {s['scale']:.3g} |")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
