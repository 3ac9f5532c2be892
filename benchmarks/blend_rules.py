"""How should the blend weight be chosen? Rules compared offline on the run folders of
``peers/chemprop.py`` (issue 41 item 2): the tested checkpoint of each template run predicts its
validation and test rows with :class:`graph_urpe.Predictor` (the network's ``<target>_network``,
``<target>_pred`` in checkpoints written before the blend became the prediction, and the in-fit
classical model's ``<target>_ecfp_svm``), each rule chooses the network's weight ``w``
from the validation rows only, and the test metric of ``w x network + (1 - w) x SVM`` is reported.

Rules:

* ``network``: ``w = 1``; ``svm``: ``w = 0``; ``half``: ``w = 0.5``;
* ``val``: the validation minimiser ``w_val`` alone (:func:`graph_urpe.models.blend.validation_weight`);
* ``shrunk``: the first default (6651ec6), ``(n w_val + n0 w0) / (n + n0)`` with ``w0 = 0.5``,
  ``n0 = 100`` pseudo-rows;
* ``bagged``: the mean of ``w_val`` over bootstrap resamples of the validation rows (200, seeded;
  :func:`graph_urpe.models.blend.bagged_weight`, the default since): it moves away from the
  middle only as far as resampled validation sets agree.

    python benchmarks/blend_rules.py --out /work/scratch/b41/out --sets bace bace_pic50 freesolv lipophilicity
"""

from __future__ import annotations

import argparse
import re
import statistics
from pathlib import Path

import pandas as pd
from _common import markdown_table

RULES = ("network", "svm", "half", "val", "shrunk", "bagged")


def rule_weight(rule: str, network, classical, target, task) -> float:
    """The network's weight under ``rule`` from validation predictions and labels."""
    from graph_urpe.models.blend import bagged_weight, validation_weight

    if rule in ("network", "svm", "half"):
        return {"network": 1.0, "svm": 0.0, "half": 0.5}[rule]
    w_val = float(validation_weight(network, classical, target, task)[0])
    if rule == "val":
        return w_val
    if rule == "shrunk":
        n = len(target)
        return (n * w_val + 100 * 0.5) / (n + 100)
    return float(bagged_weight(network, classical, target, task)[0])


def tested_checkpoint(log: Path) -> Path:
    """The checkpoint the fit tested, from its summary (``... (metric, tested)``)."""
    for line in log.read_text().splitlines():
        found = re.match(r"^(?:Best|Last) checkpoint: (\S+)\s+\(.*tested", line)
        if found:
            return Path(found.group(1))
    raise SystemExit(f"{log}: no tested checkpoint in the summary")


def set_runs(out: Path, name: str, runs: str = "ours-default-seed*.log"
             ) -> tuple[pd.DataFrame, str, list[Path]]:
    """A set of the peer benchmark's folder ``out``: its data (``sets/<name>/data.csv``), its task
    (classification where every label is 0 or 1) and its runs' logs (``runs/<name>/<runs>``)."""
    data = pd.read_csv(out / "sets" / name / "data.csv")
    task = "classification" if set(data["target"].dropna().unique()) <= {0, 1} else "regression"
    return data, task, sorted((out / "runs" / name).glob(runs))


def score(metric: str, y, p) -> float:
    from sklearn.metrics import mean_absolute_error, roc_auc_score

    return float(mean_absolute_error(y, p) if metric == "mae" else roc_auc_score(y, p))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="peers/chemprop.py's --out")
    parser.add_argument("--sets", nargs="+", required=True)
    args = parser.parse_args()
    from graph_urpe import Predictor

    rows = []
    for name in args.sets:
        data, task, logs = set_runs(args.out, name)
        metric = "rocauc" if task == "classification" else "mae"
        per_rule: dict[str, list[float]] = {r: [] for r in RULES}
        weights: dict[str, list[float]] = {r: [] for r in RULES}
        for log in logs:
            model = Predictor.from_checkpoint(str(tested_checkpoint(log)))
            parts = {}
            for split in ("valid", "test"):
                frame = data[data["split"] == split]
                table = model.predict(frame["smiles"].tolist())
                ok = table["error"].astype(str) == ""
                network = "target_network" if "target_network" in table else "target_pred"
                parts[split] = (table.loc[ok, network].to_numpy(float),
                                table.loc[ok, "target_ecfp_svm"].to_numpy(float),
                                frame["target"].to_numpy(float)[ok.to_numpy()])
            for rule in RULES:
                w = rule_weight(rule, *parts["valid"], task)
                net, svm, y = parts["test"]
                per_rule[rule].append(score(metric, y, w * net + (1 - w) * svm))
                weights[rule].append(w)
        rows.append([name, "MAE" if metric == "mae" else "ROC-AUC", str(len(per_rule["val"]))] + [
            f"{statistics.fmean(per_rule[r]):.3f} (w {statistics.fmean(weights[r]):.2f})"
            for r in RULES])
    print(markdown_table(["set", "metric", "runs"] + list(RULES), rows))


if __name__ == "__main__":
    main()
