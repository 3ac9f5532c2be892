"""Calibration of graph-urpe's uncertainty against Chemprop 2.3.1's, on the same split and rows.

The sets, split, Chemprop venv, one-thread setting and CPU accounting are those of
``benchmarks/peers/chemprop.py`` (imported from it). Per set and seed:

* **regression** (FreeSolv, Lipophilicity), two methods per tool:

  - ``ensemble``: graph-urpe ``fit --config csv/template --ensemble_size N``; Chemprop
    ``chemprop train --ensemble-size N`` then ``chemprop predict --uncertainty-method ensemble``;
  - ``mve``: graph-urpe ``--model.init_args.objective.loss mve``; Chemprop ``--task-type regression-mve``
    then ``--uncertainty-method mve``.

  Both calibrate on the validation rows: graph-urpe by itself during training (z-scaled std and
  a conformal 95 % interval, ``graph_urpe/models/calibration.py``); Chemprop with
  ``--calibration-method zscaling --cal-path valid.csv`` (its output ``target_unc`` is the
  calibrated variance). Scored here, with graph-urpe's own
  :func:`~graph_urpe.models.calibration.calibration_metrics` on both tools' files: MAE, coverage of
  ``pred +- 1.96 std`` (the z-scaled Gaussian interval, both tools), graph-urpe's conformal
  interval's coverage, Spearman(|error|, std), Gaussian NLL in the labels' units.

* **classification** (BACE, BBBP), one plain model each (seed S), the probabilities themselves:
  ROC-AUC, NLL (log loss) and Brier score (scikit-learn). With ``--methods platt`` also
  ``platt``: the probabilities calibrated on the validation rows by Platt scaling, graph-urpe's
  ``--model.init_args.objective.platt_scaling true`` (a fit of its own); for Chemprop the plain model's
  run, its validation probabilities from ``chemprop predict`` and graph-urpe's
  :func:`~graph_urpe.models.calibration.fit_platt` on their logits (Chemprop 2.3.1's
  ``predict --calibration-method platt`` computes calibrated probabilities but does not write
  them for ``--uncertainty-method classification``: its ``save_predictions`` keeps the raw ones).

Usage (one run at a time, ``nice -n 10`` on a shared machine)::

    python benchmarks/peers/calibration.py --venv CHEMPROP_VENV --out runs/bench-calibration \\
        --sets freesolv lipophilicity bace bbbp --ensemble-size 3
    python benchmarks/peers/calibration.py --out runs/bench-calibration --report

Every run's record is ``OUT/results/<set>/<tool>-<method>-seed<S>.json`` (not run again when it
exists).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # peers/chemprop.py, benchmarks/_common.py
from _common import markdown_table
from chemprop import (
    ONE_THREAD,
    ROOT,
    SETS,
    TEMPLATE,
    prepare_set,
    read_split,
    run_measured,
)

Z95 = 1.959964


def regression_scores(y: np.ndarray, pred: np.ndarray, std: np.ndarray,
                      lower: np.ndarray | None = None, upper: np.ndarray | None = None) -> dict:
    """MAE, Gaussian-interval coverage, conformal coverage (when given), Spearman, NLL."""
    from graph_urpe.models.calibration import calibration_metrics

    t = {k: torch.tensor(np.asarray(v, dtype=float))[:, None]
         for k, v in (("y", y), ("pred", pred), ("std", std))}
    gauss = calibration_metrics(t["pred"], t["std"], t["pred"] - Z95 * t["std"],
                                t["pred"] + Z95 * t["std"], t["y"])
    out = {"mae": float(np.mean(np.abs(y - pred))), "coverage_gauss": gauss["coverage"],
           "spearman": gauss["spearman"], "nll": gauss["nll"]}
    if lower is not None:
        out["coverage_conformal"] = float(np.mean((y >= lower) & (y <= upper)))
    return out


def classification_scores(y: np.ndarray, prob: np.ndarray) -> dict:
    """ROC-AUC, NLL (log loss) and Brier score of probabilities."""
    from sklearn.metrics import brier_score_loss, log_loss, roc_auc_score

    prob = np.clip(prob, 1e-7, 1 - 1e-7)
    return {"rocauc": float(roc_auc_score(y, prob)), "nll": float(log_loss(y, prob)),
            "brier": float(brier_score_loss(y, prob))}


def run_chemprop(folder: Path, task: str, method: str, seed: int, size: int, venv: Path,
                 runs: Path) -> dict:
    if method == "platt":
        return _chemprop_platt(folder, seed, size, venv, runs)
    data, rows = read_split(folder)
    for part in ("valid", "test"):
        data.iloc[rows[part]][["smiles", "target"]].to_csv(runs / f"{part}.csv", index=False)
    out_dir = runs / f"chemprop-{method}-seed{seed}"
    task_type = "regression-mve" if method == "mve" else task
    train = [str(venv / "bin" / "chemprop"), "train", "--data-path", str(folder / "data.csv"),
             "--task-type", task_type, "--smiles-columns", "smiles", "--target-columns",
             "target", "--splits-file", str(folder / "splits.json"), "--data-seed", str(seed),
             "--pytorch-seed", str(seed), "-o", str(out_dir)]
    if method == "ensemble":
        train += ["--ensemble-size", str(size)]
    env = dict(os.environ, **ONE_THREAD)
    done = out_dir / "train_cpu.json"  # a finished training is kept if predicting fails
    if done.exists():
        cpu = json.loads(done.read_text())["cpu_s"]
    else:
        cpu, _wall = run_measured(train, runs / f"chemprop-{method}-seed{seed}.log", folder, env)
        done.write_text(json.dumps({"cpu_s": cpu}))
    test = rows["test"]
    y = data["target"].to_numpy(dtype=float)[test]
    if task != "regression":
        pred = pd.read_csv(out_dir / "model_0" / "test_predictions.csv")
        return {**classification_scores(y, pred["target"].to_numpy()), "cpu_s": cpu,
                "command": train}
    preds = runs / f"chemprop-{method}-seed{seed}-preds.csv"
    predict = [str(venv / "bin" / "chemprop"), "predict", "--test-path", str(runs / "test.csv"),
               "--smiles-columns", "smiles", "--model-paths", str(out_dir), "-o", str(preds),
               "--uncertainty-method", method, "--calibration-method", "zscaling",
               "--cal-path", str(runs / "valid.csv")]
    cpu2, _ = run_measured(predict, runs / f"chemprop-{method}-seed{seed}-predict.log", folder,
                           env)
    frame = pd.read_csv(preds)
    if frame["smiles"].tolist() != data["smiles"].iloc[test].tolist():
        raise SystemExit(f"{preds}: Chemprop's rows are not the test rows")
    std = np.sqrt(frame["target_unc"].to_numpy(dtype=float))
    return {**regression_scores(y, frame["target"].to_numpy(dtype=float), std),
            "cpu_s": cpu + cpu2, "command": train + ["&&"] + predict}


def _chemprop_platt(folder: Path, seed: int, size: int, venv: Path, runs: Path) -> dict:
    """Chemprop's plain model (the ``single`` run, trained here if missing), Platt-scaled on its
    validation probabilities with graph-urpe's ``fit_platt`` (module docstring)."""
    from graph_urpe.models.calibration import fit_platt

    single = run_chemprop(folder, "classification", "single", seed, size, venv, runs)
    data, rows = read_split(folder)
    out_dir = runs / f"chemprop-single-seed{seed}"
    preds = runs / f"chemprop-single-seed{seed}-valid-preds.csv"
    predict = [str(venv / "bin" / "chemprop"), "predict", "--test-path", str(runs / "valid.csv"),
               "--smiles-columns", "smiles", "--model-paths", str(out_dir), "-o", str(preds)]
    cpu, _ = run_measured(predict, runs / f"chemprop-platt-seed{seed}-predict.log", folder,
                          dict(os.environ, **ONE_THREAD))
    y = data["target"].to_numpy(dtype=float)

    def logit(p):
        p = np.clip(np.asarray(p, dtype=float), 1e-7, 1 - 1e-7)
        return torch.tensor(np.log(p / (1 - p)))[:, None]

    valid = pd.read_csv(preds)
    if valid["smiles"].tolist() != data["smiles"].iloc[rows["valid"]].tolist():
        raise SystemExit(f"{preds}: Chemprop's rows are not the validation rows")
    scale, bias = fit_platt(logit(valid["target"]), torch.tensor(y[rows["valid"]])[:, None])
    test = pd.read_csv(out_dir / "model_0" / "test_predictions.csv")["target"]
    prob = torch.sigmoid(logit(test) * scale + bias).numpy().ravel()
    return {**classification_scores(y[rows["test"]], prob), "cpu_s": single["cpu_s"] + cpu,
            "platt": [float(scale[0]), float(bias[0])], "command": single["command"] + ["&&"]
            + predict}


def run_ours(folder: Path, task: str, method: str, seed: int, size: int, runs: Path) -> dict:
    data, rows = read_split(folder)
    root = runs / f"ours-{method}-seed{seed}"
    extra = {"ensemble": ["--ensemble_size", str(size)],
             "mve": ["--model.init_args.objective.loss", "mve"], "single": [],
             "platt": ["--model.init_args.objective.platt_scaling", "true"]}[method]
    cmd = [sys.executable, "-m", "graph_urpe.cli", "fit", "--config", str(TEMPLATE),
           "--data.init_args.path", str(folder / "data.csv"),
           "--data.init_args.target_columns", "[target]", "--data.init_args.task", task,
           "--data.init_args.split", "split", "--data.init_args.root", str(root / "data"),
           "--seed_everything", str(seed), "--name", "run",
           "--trainer.default_root_dir", str(root), "--trainer.enable_progress_bar", "false",
           *extra]
    env = dict(os.environ, **ONE_THREAD,
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    log = runs / f"ours-{method}-seed{seed}.log"
    cpu, _ = run_measured(cmd, log, ROOT, env)
    run_dir = Path(re.findall(r"^Run folder: (\S+)", log.read_text(), re.MULTILINE)[-1])
    pred = pd.read_csv(run_dir / "test_predictions.csv").sort_values("row")
    test = rows["test"]
    if not np.array_equal(pred["row"].to_numpy(), test):
        raise SystemExit(f"{run_dir}: the test rows are not the split file's")
    y = data["target"].to_numpy(dtype=float)[test]
    if task != "regression":
        return {**classification_scores(y, pred["target_pred"].to_numpy()), "cpu_s": cpu,
                "command": cmd}
    scores = regression_scores(y, pred["target_pred"].to_numpy(), pred["target_std"].to_numpy(),
                               pred["target_lower"].to_numpy(), pred["target_upper"].to_numpy())
    return {**scores, "cpu_s": cpu, "command": cmd}


def report(out: Path) -> str:
    """Markdown tables of every record under ``out/results``."""
    records = [json.loads(p.read_text()) for p in sorted((out / "results").glob("*/*.json"))]
    reg = [r for r in records if "coverage_gauss" in r]
    cls = [r for r in records if "brier" in r]

    def f(v):
        return "" if v is None or (isinstance(v, float) and np.isnan(v)) else f"{v:.3f}"

    lines = []
    if reg:
        lines.append(markdown_table(
            ["set", "tool", "method", "MAE", "coverage 1.96 std", "coverage conformal",
             "Spearman", "NLL", "CPU s"],
            [[r["set"], r["tool"], r["method"], f(r["mae"]), f(r["coverage_gauss"]),
              f(r.get("coverage_conformal")), f(r["spearman"]), f(r["nll"]), f"{r['cpu_s']:.0f}"]
             for r in reg]))
    if cls:
        lines.append(markdown_table(
            ["set", "tool", "method", "ROC-AUC", "NLL", "Brier", "CPU s"],
            [[r["set"], r["tool"], r["method"], f(r["rocauc"]), f(r["nll"]), f(r["brier"]),
              f"{r['cpu_s']:.0f}"] for r in cls]))
    return "\n\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", choices=sorted(SETS),
                        default=["freesolv", "bace", "bbbp", "lipophilicity"])
    parser.add_argument("--tools", nargs="+", choices=["ours", "chemprop"],
                        default=["ours", "chemprop"])
    parser.add_argument("--methods", nargs="+", choices=["ensemble", "mve", "platt"],
                        default=["ensemble", "mve"], help="ensemble, mve: regression sets; "
                        "platt: classification sets (besides the plain model)")
    parser.add_argument("--ensemble-size", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--venv", type=Path, default=Path(os.environ.get(
        "CHEMPROP_VENV", Path.home() / ".cache" / "graph-urpe" / "chemprop-venv")))
    parser.add_argument("--wheel-dir", type=Path, default=ROOT / "runs" / "wheels")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "bench-calibration")
    parser.add_argument("--report", action="store_true", help="print the tables only")
    args = parser.parse_args()
    out = args.out.resolve()
    if not args.report:
        for name in args.sets:
            _, task, _ = SETS[name]
            folder = prepare_set(name, args.wheel_dir, out / "sets")
            methods = [m for m in args.methods if m != "platt"] if task == "regression" \
                else ["single"] + [m for m in args.methods if m == "platt"]
            for method in methods:
                for tool in args.tools:
                    path = out / "results" / name / f"{tool}-{method}-seed{args.seed}.json"
                    if path.exists():
                        continue
                    runs = out / "runs" / name
                    runs.mkdir(parents=True, exist_ok=True)
                    print(f"{name}: {tool} {method} seed {args.seed}", flush=True)
                    record = run_ours(folder, task, method, args.seed, args.ensemble_size, runs) \
                        if tool == "ours" else run_chemprop(folder, task, method, args.seed,
                                                            args.ensemble_size, args.venv, runs)
                    record.update(set=name, tool=tool, method=method, seed=args.seed,
                                  ensemble_size=args.ensemble_size if method == "ensemble"
                                  else 1)
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(json.dumps(record, indent=1))
    print(report(out))


if __name__ == "__main__":
    main()
