"""A kernel head on the fine-tuned template's molecule embedding, against its MLP head and the
ECFP4 Tanimoto SVM (issue 41, item 3), on the runs of the encoder benchmark.

For each CSV-template run recorded by ``benchmarks/finetune_encoders.py`` (``OUT/encoders/<set>/
<encoder>-seed<S>.json``: the peer benchmark's sets and scaffold splits, the template fine-tuned),
the checkpoint the run tested (``last`` for regression, ``best`` for classification, as
``test_checkpoint: auto``) embeds every molecule of the set (:meth:`graph_urpe.Predictor.
fingerprint`, ``layer="encoder"``: the vector the MLP head reads). On the training rows only,
three SVMs with a precomputed kernel are fitted (SVR on standardised labels for regression, SVC
for classification, ranked by its decision value), ``C`` by shuffled 5-fold cross-validation over
:data:`C_GRID` with the one-standard-error rule (:func:`graph_urpe.models.classical.
one_standard_error_index`), as the in-fit classical model:

* ``tanimoto``: the Tanimoto kernel on ECFP4 (:func:`graph_urpe.data.fingerprints.
  tanimoto_kernel`), i.e. the classical model of every CSV fit;
* ``embedding``: an RBF kernel on the embedding standardised with the training rows' mean and
  std, ``gamma = 1 / D`` (scikit-learn's ``"scale"`` on standardised features);
* ``sum``: ``w * tanimoto + (1 - w) * embedding``, ``w`` in :data:`SUM_WEIGHTS` chosen by the
  same cross-validation (the best mean fold score over ``w`` and ``C``); ``sum_by_val``: ``w``
  chosen on the validation rows instead (RMSE or ROC-AUC). The embedding was fine-tuned on the
  training rows, so cross-validation inside them overrates the embedding kernel; the validation
  rows, which the network did not train on, do not.

Printed per set (means over the seeds): the test metric of the MLP head (the run's own,
``network``), of each kernel head, and the validation metric of each (the choice a user could make
without test rows). One JSON line per run.

Usage::

    python benchmarks/kernel_head.py --out /work/scratch/partB/out --encoder moses-descriptors \\
        --sets freesolv lipophilicity bace bace_pic50 bbbp
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
from pathlib import Path

import numpy as np
from _common import emit, markdown_table

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("chemprop_bench", HERE / "peers" / "chemprop.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

C_GRID = (0.01, 0.1, 1.0, 10.0, 100.0)
"""The SVM's ``C`` candidates (most regularised first, for the one-standard-error rule)."""

SUM_WEIGHTS = (0.25, 0.5, 0.75)
"""The Tanimoto kernel's weights tried in the ``sum`` kernel."""

KERNELS = ("tanimoto", "embedding", "sum", "sum_by_val")


def rbf_kernel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``exp(-||x - y||^2 / D)`` between the rows of ``a`` ``[n, D]`` and ``b`` ``[m, D]``."""
    from sklearn.metrics.pairwise import rbf_kernel as sk_rbf

    return sk_rbf(a, b, gamma=1.0 / a.shape[1])


def cv_fit(gram: np.ndarray, y: np.ndarray, task: str, seed: int):
    """``(best mean CV score, fitted SVM)`` for a precomputed training Gram matrix."""
    from sklearn.model_selection import GridSearchCV, KFold, StratifiedKFold
    from sklearn.svm import SVC, SVR

    from graph_urpe.models.classical import one_standard_error_index

    if task == "regression":
        svm, scoring, cv = SVR(kernel="precomputed"), "neg_root_mean_squared_error", \
            KFold(5, shuffle=True, random_state=seed)
    else:
        svm, scoring, cv = SVC(kernel="precomputed"), "roc_auc", \
            StratifiedKFold(5, shuffle=True, random_state=seed)
    search = GridSearchCV(svm, {"C": list(C_GRID)}, scoring=scoring,
                          refit=one_standard_error_index, cv=cv).fit(gram, y)
    return float(np.max(search.cv_results_["mean_test_score"])), search.best_estimator_


def kernel_heads(emb: np.ndarray, fps: np.ndarray, y: np.ndarray, rows: dict, task: str,
                 seed: int) -> dict[str, np.ndarray]:
    """Predictions (labels' units, or SVC decision values) of every row for each kernel."""
    from sklearn.metrics import roc_auc_score

    from graph_urpe.data.fingerprints import tanimoto_kernel

    train = rows["train"]
    mean, std = emb[train].mean(0), emb[train].std(0)
    z = (emb - mean) / np.where(std > 0, std, 1.0)
    tan = tanimoto_kernel(fps, fps[train])  # [N, n_train]
    rbf = rbf_kernel(z, z[train])
    target = y[train]
    if task == "regression":
        y_mean, y_std = target.mean(), target.std() or 1.0
        target = (target - y_mean) / y_std
    out = {}
    for name in ("tanimoto", "embedding"):
        gram = tan if name == "tanimoto" else rbf
        _, svm = cv_fit(gram[train], target, task, seed)
        out[name] = svm.predict(gram) if task == "regression" else svm.decision_function(gram)
    tried = []  # (CV score, validation score, predictions, w)
    valid = rows["valid"]
    for w in SUM_WEIGHTS:
        gram = w * tan + (1 - w) * rbf
        cv_score, svm = cv_fit(gram[train], target, task, seed)
        pred = svm.predict(gram) if task == "regression" else svm.decision_function(gram)
        if task == "regression":
            val_score = -float(np.sqrt(np.mean((pred[valid] * y_std + y_mean - y[valid]) ** 2)))
        else:
            val_score = float(roc_auc_score(y[valid], pred[valid]))
        tried.append((cv_score, val_score, pred, w))
    by_cv = max(tried, key=lambda t: t[0])
    by_val = max(tried, key=lambda t: t[1])
    out["sum"], out["sum_weight"] = by_cv[2], np.array([by_cv[3]])
    out["sum_by_val"], out["sum_by_val_weight"] = by_val[2], np.array([by_val[3]])
    if task == "regression":
        for name in KERNELS:
            out[name] = out[name] * y_std + y_mean
    return out


def run_record(record: dict, out: Path) -> dict:
    """The kernel heads of one recorded run; its JSON line."""
    from graph_urpe import Predictor
    from graph_urpe.cli.run import tested_checkpoint
    from graph_urpe.data.fingerprints import ecfp4

    name, seed, metric = record["set"], record["seed"], record["metric"]
    _, task, _ = bench.SETS[name]
    data, rows = bench.read_split(out / "sets" / name)
    smiles = data["smiles"].tolist()
    which = tested_checkpoint("auto", task)
    predictor = Predictor.from_checkpoint(str(Path(record["run_dir"]) / "checkpoints"
                                              / f"{which}.ckpt"))
    frame = predictor.fingerprint(smiles)
    if frame["error"].astype(bool).any():
        raise SystemExit(f"{name} seed {seed}: some molecules were not embedded")
    emb = frame[[c for c in frame.columns if c.startswith("fp_")]].to_numpy(np.float64)
    y = data["target"].to_numpy(np.float64)
    preds = kernel_heads(emb, ecfp4(smiles), y, rows, task, seed)
    line = {"bench": "kernel_head", "set": name, "seed": seed, "metric": metric,
            "encoder": record["encoder"], "network_test": record["value"],
            "network_val": record["val"], "sum_weight": float(preds["sum_weight"][0]),
            "sum_by_val_weight": float(preds["sum_by_val_weight"][0])}
    for kernel in KERNELS:
        for part in ("valid", "test"):
            idx = rows[part]
            line[f"{kernel}_{'val' if part == 'valid' else part}"] = bench.score(
                metric, y[idx], preds[kernel][idx])
    emit(line)
    return line


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="finetune_encoders.py's --out")
    parser.add_argument("--encoder", default="moses-descriptors")
    parser.add_argument("--sets", nargs="+", choices=sorted(bench.SETS), required=True)
    args = parser.parse_args(argv)
    out = args.out.resolve()
    lines = []
    for name in args.sets:
        for path in sorted((out / "encoders" / name).glob(f"{args.encoder}-seed*.json")):
            lines.append(run_record(json.loads(path.read_text()), out))
    rows = []
    for name in args.sets:
        mine = [r for r in lines if r["set"] == name]
        if not mine:
            continue

        def mean(key, mine=mine):
            return f"{statistics.fmean(r[key] for r in mine):.3f}"

        rows.append([name, mine[0]["metric"], len(mine), mean("network_test"),
                     *(mean(f"{k}_test") for k in KERNELS), mean("network_val"),
                     *(mean(f"{k}_val") for k in KERNELS), mean("sum_weight"),
                     mean("sum_by_val_weight")])
    print("\n" + markdown_table(
        ["set", "metric", "seeds", "test: MLP head", "Tanimoto SVM", "embedding SVM",
         "sum, w by CV", "sum, w by val", "val: MLP head", "Tanimoto", "embedding", "sum (CV)",
         "sum (val)", "w by CV", "w by val"], rows))


if __name__ == "__main__":
    main()
