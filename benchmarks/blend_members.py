"""Which classical members should the blend weigh? The network and the ECFP4 SVM, with and
without a random forest on ECFP4 as a third (issue 41: the forest is the anchor the template
trails on BACE), compared offline on the run folders of ``peers/chemprop.py`` /
``finetune_encoders.py``.

For each run the tested checkpoint (the one its summary marks ``tested``) predicts its validation
and test rows with :class:`graph_urpe.Predictor` (the network's ``<target>_network`` and the
in-fit SVM's ``<target>_ecfp_svm``); a random forest (scikit-learn, 500 trees, defaults but
``max_features="sqrt"`` for regression too, ``random_state`` = the run's seed) is fitted on the
training rows of the same split; then the fit's own rule (:func:`graph_urpe.models.blend.
blend_weights`: the simplex grid of step 0.05, bagged over 200 bootstrap resamples of the
validation rows) chooses the weights of (network, SVM) and of (network, SVM, forest), and the test
metric of each blend is reported beside the members' own, with the mean weights and the forest's
CPU seconds and nodes. A two-level variant stacks the members on the training rows instead
(``network+oof``): the SVM's share ``a`` in ``a SVM + (1 - a) forest`` is chosen on out-of-fold
predictions of all training rows (the SVM refitted on shuffled 5-fold splits as the fit fits it,
the forest's out-of-bag predictions), then the network's weight against that mixture by the
fit's rule on the validation rows. With ``--embedding`` a fourth member is tried (issue 41 item 3
as a member of the blend): an SVM on ``w x Tanimoto + (1 - w) x RBF`` of the tested checkpoint's
standardised molecule embedding (``kernel_head.py``'s sum kernel, ``w = 0.5``, fitted as the
in-fit SVM is, :func:`graph_urpe.models.classical.fit_task`), weighed with the others by the same
rule (``network+...+embedding``). Classification forests are what the fit now stores
(:class:`graph_urpe.models.forest.Forest`: the same trees); for regression the forest is measured
here only.

Usage::

    python benchmarks/blend_members.py --out /work/scratch/partB/out \\
        --sets freesolv lipophilicity bace bace_pic50 bbbp --runs 'ours-enc-moses-descriptors-seed*.log'
    python benchmarks/blend_members.py --out /work/scratch/clintox/out --sets clintox --embedding
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import pandas as pd
from _common import markdown_table
from blend_rules import set_runs, tested_checkpoint

COLUMNS = ("network", "svm", "forest", "network+svm", "network+svm+forest", "network+oof")
EMBEDDING_COLUMNS = ("embedding", "network+svm+embedding", "network+svm+forest+embedding")
EMBEDDING_TANIMOTO_WEIGHT = 0.5
"""``w`` of the embedding member's sum kernel (``kernel_head.py``'s middle weight)."""


def run_predictions(log: Path, data: pd.DataFrame) -> dict[str, np.ndarray]:
    """The tested checkpoint's network and SVM predictions of the validation and test rows
    (NaN where a molecule has no prediction)."""
    from graph_urpe import Predictor

    model = Predictor.from_checkpoint(str(tested_checkpoint(log)))
    out = {}
    for split in ("valid", "test"):
        table = model.predict(data.loc[data["split"] == split, "smiles"].tolist())
        ok = (table["error"].astype(str) == "").to_numpy()
        network = "target_network" if "target_network" in table else "target_pred"
        out[f"{split}_network"] = np.where(ok, table[network].to_numpy(float), np.nan)
        out[f"{split}_svm"] = np.where(ok, table["target_ecfp_svm"].to_numpy(float), np.nan)
    return out


def embedding_predictions(log: Path, data: pd.DataFrame, task: str, seed: int
                          ) -> dict[str, np.ndarray]:
    """The embedding member's validation and test predictions (module doc): an SVM fitted on the
    training rows with the sum kernel of ECFP4 Tanimoto and an RBF (``gamma = 1 / D``) on the
    tested checkpoint's embedding standardised by the training rows (labels' units, or Platt's
    probability of class 1)."""
    from sklearn.metrics.pairwise import rbf_kernel

    from graph_urpe import Predictor
    from graph_urpe.data.fingerprints import ecfp4, tanimoto_kernel
    from graph_urpe.models.classical import fit_task

    frame = Predictor.from_checkpoint(str(tested_checkpoint(log))).fingerprint(
        data["smiles"].tolist())
    emb = frame[[c for c in frame.columns if c.startswith("fp_")]].to_numpy(np.float64)
    bits, y = ecfp4(data["smiles"].tolist()), data["target"].to_numpy(float)
    train = np.flatnonzero((data["split"] == "train").to_numpy() & np.isfinite(y))
    std = emb[train].std(0)
    z = (emb - emb[train].mean(0)) / np.where(std > 0, std, 1.0)
    w = EMBEDDING_TANIMOTO_WEIGHT
    kernel = w * tanimoto_kernel(bits, bits[train]) + (1 - w) * rbf_kernel(
        z, z[train], gamma=1.0 / z.shape[1])
    model = fit_task(kernel[train], y[train], task, seed)
    decision = kernel[:, model["support"]] @ model["dual_coef"] + model["intercept"]
    pred = decision * model["std"] + model["mean"] if task == "regression" else \
        1.0 / (1.0 + np.exp(model["platt_a"] * decision + model["platt_b"]))
    return {f"{split}_embedding": pred[(data["split"] == split).to_numpy()]
            for split in ("valid", "test")}


def forest_predictions(data: pd.DataFrame, task: str, seed: int) -> dict[str, np.ndarray]:
    """A 500-tree forest on the training rows' ECFP4: validation and test predictions, CPU
    seconds (classification: the stored forest and a second one for its out-of-bag predictions;
    regression: one forest with them), node count; and the out-of-fold predictions of the
    training rows (``oof_svm``, ``oof_forest``) with their labels (``oof_y``)."""
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
    from sklearn.model_selection import KFold, StratifiedKFold

    from graph_urpe.data.fingerprints import ecfp4
    from graph_urpe.models.classical import ClassicalModel
    from graph_urpe.models.forest import Forest

    train = data[(data["split"] == "train") & data["target"].notna()]
    bits, y = ecfp4(train["smiles"].tolist()), train["target"].to_numpy(float)
    start = time.process_time()
    if task == "classification":
        forest = Forest.fit(bits, y, seed)
        predict, nodes = forest.predict, len(forest.value)
        bagged = RandomForestClassifier(500, random_state=seed, n_jobs=1, oob_score=True)
        oob = bagged.fit(bits, y.astype(int)).oob_decision_function_[:, 1]
    else:
        model = RandomForestRegressor(500, max_features="sqrt", random_state=seed, n_jobs=1,
                                      oob_score=True)
        model.fit(bits, y)
        predict, nodes = model.predict, sum(e.tree_.node_count for e in model.estimators_)
        oob = model.oob_prediction_
    out = {f"{split}_forest": predict(ecfp4(data.loc[data["split"] == split, "smiles"].tolist()))
           for split in ("valid", "test")}
    cpu = time.process_time() - start
    folds = (StratifiedKFold if task == "classification" else KFold)(5, shuffle=True,
                                                                     random_state=seed)
    svm = np.zeros(len(y))
    for fit_rows, held in folds.split(bits, y.astype(int) if task == "classification" else y):
        fold = ClassicalModel.fit(bits[fit_rows], y[fit_rows, None], fit_rows, task, seed)
        svm[held] = fold.predict(bits[held])[:, 0, 0]
    return {**out, "cpu": cpu, "nodes": nodes, "oof_svm": svm, "oof_forest": oob, "oof_y": y}


def score(metric: str, y: np.ndarray, p: np.ndarray) -> float:
    from sklearn.metrics import mean_absolute_error, roc_auc_score

    keep = np.isfinite(y) & np.isfinite(p)
    return float(mean_absolute_error(y[keep], p[keep]) if metric == "mae"
                 else roc_auc_score(y[keep], p[keep]))


def one_run(parts: dict[str, np.ndarray], data: pd.DataFrame, task: str
            ) -> dict[str, float | list[float]]:
    """The members' and the blends' test metrics, and the blends' weights (with the embedding
    member where ``parts`` holds its predictions)."""
    from graph_urpe.models.blend import blend, blend_weights, validation_weight

    metric = "mae" if task == "regression" else "rocauc"
    y = {s: data.loc[data["split"] == s, "target"].to_numpy(float)[:, None] for s in
         ("valid", "test")}
    out: dict[str, float | list[float]] = {
        m: score(metric, y["test"][:, 0], parts[f"test_{m}"]) for m in ("network", "svm", "forest")}
    combos = [("svm",), ("svm", "forest")]
    if "test_embedding" in parts:
        out["embedding"] = score(metric, y["test"][:, 0], parts["test_embedding"])
        combos += [("svm", "embedding"), ("svm", "forest", "embedding")]
    for members in combos:
        stacked = {s: np.stack([parts[f"{s}_{m}"] for m in members], 1)[:, None, :]
                   for s in ("valid", "test")}
        weight = blend_weights(parts["valid_network"][:, None], stacked["valid"], y["valid"],
                               task)
        mixed = blend(parts["test_network"][:, None], stacked["test"], weight)[:, 0]
        name = "+".join(("network",) + members)
        out[name] = score(metric, y["test"][:, 0], mixed)
        out[f"w {name}"] = weight[0].tolist()
    share = validation_weight(parts["oof_svm"], parts["oof_forest"], parts["oof_y"], task)[0]
    mixture = {s: (share * parts[f"{s}_svm"] + (1 - share) * parts[f"{s}_forest"])[:, None, None]
               for s in ("valid", "test")}
    weight = blend_weights(parts["valid_network"][:, None], mixture["valid"], y["valid"], task)
    out["network+oof"] = score(metric, y["test"][:, 0], blend(parts["test_network"][:, None],
                                                               mixture["test"], weight)[:, 0])
    out["w network+oof"] = [float(weight[0, 0]), float(share)]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the benchmark's --out folder")
    parser.add_argument("--sets", nargs="+", required=True)
    parser.add_argument("--runs", default="ours-default-seed*.log",
                        help="glob of the run logs in OUT/runs/<set>/")
    parser.add_argument("--embedding", action="store_true",
                        help="also the SVM on the Tanimoto + embedding kernel as a member")
    args = parser.parse_args()
    columns = COLUMNS + EMBEDDING_COLUMNS * args.embedding
    rows = []
    for name in args.sets:
        data, task, logs = set_runs(args.out, name, args.runs)
        results, cpu, nodes = [], [], []
        for log in logs:
            seed = int(log.stem.rsplit("seed", 1)[1])
            forest = forest_predictions(data, task, seed)
            cpu.append(forest.pop("cpu"))
            nodes.append(forest.pop("nodes"))
            parts = {**run_predictions(log, data), **forest}
            if args.embedding:
                parts.update(embedding_predictions(log, data, task, seed))
            results.append(one_run(parts, data, task))
            print(name, log.stem, results[-1], flush=True)
        means = [f"{statistics.fmean(r[c] for r in results):.3f}" for c in columns]
        weights = [np.round(np.mean([r[f"w {c}"] for r in results], 0), 2).tolist()
                   for c in columns if "+" in c]
        rows.append([name, "MAE" if task == "regression" else "ROC-AUC", str(len(results)),
                     *means, *(str(w) for w in weights), f"{statistics.fmean(cpu):.1f}",
                     f"{statistics.fmean(nodes):,.0f}"])
    print(markdown_table(["set", "metric", "runs", *columns, *(f"w ({c})" for c in columns
                                                               if "+" in c),
                          "forest CPU s (fits with OOB, predictions)", "forest nodes"], rows))


if __name__ == "__main__":
    main()
