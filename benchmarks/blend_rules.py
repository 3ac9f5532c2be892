"""How should the blend weights be chosen? Rules compared offline on the run folders of
``peers/chemprop.py`` (issue 41 item 2): the tested checkpoint of each template run predicts its
validation and test rows with :class:`graph_urpe.Predictor` (the network's ``<target>_network``,
``<target>_pred`` in checkpoints written before the blend became the prediction, and the in-fit
classical model's members: ``<target>_ecfp_svm`` and, for classification since section 29,
``<target>_ecfp_rf``), each rule chooses the weights ``(w_0, w_1, ...)`` of the network and the
members from the validation rows only, and the test metric of the blend is reported with the mean
network weight ``w_0``.

Rules (``prior``: the network 0.5 and the members sharing the rest equally,
:data:`graph_urpe.models.blend.NO_EVIDENCE_WEIGHT`; with the SVM as the one member, 0.5 / 0.5):

* ``network``: ``w_0 = 1``; ``svm``: the SVM alone; ``half``: the prior;
* ``val``: the validation minimiser ``w_val`` alone (:func:`graph_urpe.models.blend.validation_weight`);
* ``shrunk``: the first default (6651ec6), ``(n w_val + n0 prior) / (n + n0)``, ``n0 = 100``
  pseudo-rows;
* ``bagged``: the mean of ``w_val`` over bootstrap resamples of the validation rows (200, seeded;
  :func:`graph_urpe.models.blend.bagged_weight`, the default since): it moves away from the
  middle only as far as resampled validation sets agree;
* ``pool`` (classification only; the fit's rule since ``benchmarks/README.md`` section 31):
  the pool of standardised logits, :mod:`graph_urpe.models.logit_pool` (its ``w_0`` shown);
* ``pool_prior``: that pool with the prior's weights (Platt's sigmoid still fitted);
* ``ranks`` (classification only): the mean of the network's and the SVM's ranks, a ROC-AUC
  reference (not a probability);
* ``effective``: the bagged weights shrunk to the prior by what the rows are worth,
  ``(m w_bagged + n0 prior) / (m + n0)`` with ``n0 = --prior-rows`` and ``m`` the validation rows'
  effective size: ``n`` for regression, ``2 n_1 n_0 / n`` for classification (the harmonic mean
  of the two classes' counts: 148 ClinTox rows with 6 toxic ones are worth about 11).

    python benchmarks/blend_rules.py --out /work/scratch/b41/out --sets bace bace_pic50 freesolv lipophilicity
"""

from __future__ import annotations

import argparse
import re
import statistics
from pathlib import Path

import numpy as np
import pandas as pd
from _common import markdown_table

RULES = ("network", "svm", "half", "val", "shrunk", "bagged", "effective", "pool", "pool_prior",
         "ranks")
MEMBER_COLUMNS = ("target_ecfp_svm", "target_ecfp_rf")


def effective_rows(target: np.ndarray, task: str) -> float:
    """What ``n`` validation labels are worth: ``n`` for regression; for classification
    :func:`graph_urpe.models.logit_pool.effective_rows` (``2 n_1 n_0 / n``)."""
    from graph_urpe.models.logit_pool import effective_rows as classification_rows

    return float(len(target)) if task == "regression" else classification_rows(target)


def rule_weight(rule: str, network, classical, target, task, prior_rows: float = 20.0
                ) -> np.ndarray:
    """The weights ``[1 + K]`` (the network's first) under ``rule`` from validation predictions
    (``classical`` ``[n, K]``) and labels."""
    from graph_urpe.models.blend import NO_EVIDENCE_WEIGHT, bagged_weight, validation_weight

    k = classical.shape[1]
    prior = np.array([NO_EVIDENCE_WEIGHT] + [(1 - NO_EVIDENCE_WEIGHT) / k] * k)
    if rule == "network":
        return np.eye(1, 1 + k).ravel()
    if rule == "svm":
        return np.eye(1, 1 + k, 1).ravel()
    if rule == "half":
        return prior
    if rule in ("val", "shrunk"):
        w_val = validation_weight(network, classical, target, task)
        n = len(target)
        return w_val if rule == "val" else (n * w_val + 100 * prior) / (n + 100)
    bagged = bagged_weight(network, classical, target, task)
    if rule == "bagged":
        return bagged
    m = effective_rows(target, task)
    return (m * bagged + prior_rows * prior) / (m + prior_rows)


def refit_platt(valid, weight: np.ndarray, factors: np.ndarray) -> np.ndarray:
    """The pool's factors ``[2 (1 + K) + 2, 1]`` with Platt's sigmoid refitted for other
    ``weight`` ``[1, 1 + K]`` on the validation rows ``(network, members, target)``."""
    import torch

    from graph_urpe.models.calibration import fit_platt
    from graph_urpe.models.logit_pool import logits

    network, members, target = valid
    k = members.shape[1]
    z = (logits(np.column_stack([network, members])) - factors[:1 + k, 0]) / factors[
        1 + k:2 + 2 * k, 0]
    a, b = fit_platt(torch.from_numpy(z @ weight[0])[:, None], torch.from_numpy(target)[:, None])
    return np.concatenate([factors[:2 + 2 * k, 0], [float(a[0]), float(b[0])]])[:, None]


def tested_checkpoint(log: Path) -> Path:
    """The checkpoint the fit tested, from its summary (``... (metric, tested)``)."""
    for line in log.read_text().splitlines():
        found = re.match(r"^(?:Best|Last|Soup) checkpoint: (\S+)\s+\(.*tested", line)
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
    parser.add_argument("--runs", default="ours-default-seed*.log",
                        help="the runs' logs in OUT/runs/<set>/ (default: %(default)s)")
    parser.add_argument("--prior-rows", type=float, default=20.0,
                        help="n0 of the effective rule (default: %(default)s)")
    args = parser.parse_args()
    from scipy.stats import rankdata

    from graph_urpe import Predictor
    from graph_urpe.models.logit_pool import fit_pool, pooled, prior_weight

    rows = []
    for name in args.sets:
        data, task, logs = set_runs(args.out, name, args.runs)
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
                members = [c for c in MEMBER_COLUMNS if c in table]
                parts[split] = (table.loc[ok, network].to_numpy(float),
                                table.loc[ok, members].to_numpy(float),
                                frame["target"].to_numpy(float)[ok.to_numpy()])
            for rule in RULES:
                net, members, y = parts["test"]
                if rule in ("pool", "pool_prior", "ranks") and task != "classification":
                    continue
                if rule in ("pool", "pool_prior"):
                    w, factors = fit_pool(*(a[:, None] for a in parts["valid"]))
                    if rule == "pool_prior":
                        w = prior_weight(members.shape[1])[None]
                        factors = refit_platt(parts["valid"], w, factors)
                    mixed = pooled(net[:, None], members[:, None], w, factors)[:, 0]
                    w = w[0]
                elif rule == "ranks":
                    w = np.array([0.5])
                    mixed = rankdata(net) + rankdata(members[:, 0])
                else:
                    w = rule_weight(rule, *parts["valid"], task, args.prior_rows)
                    mixed = w[0] * net + members @ w[1:]
                per_rule[rule].append(score(metric, y, mixed))
                weights[rule].append(float(w[0]))
        rows.append([name, "MAE" if metric == "mae" else "ROC-AUC", str(len(per_rule["val"]))] + [
            f"{statistics.fmean(per_rule[r]):.3f} (w {statistics.fmean(weights[r]):.2f})"
            if per_rule[r] else "-" for r in RULES])
    print(markdown_table(["set", "metric", "runs"] + list(RULES), rows))


if __name__ == "__main__":
    main()
