"""The classical anchor of the Chemprop peer benchmark: SVR / SVC with a Tanimoto kernel and a random
forest, both on ECFP4 (Morgan radius 2, 2048 bits), fitted on the same train rows the deep models
train on (the valid rows are not used: the anchors have no early stopping) and scored on the same
test rows (``benchmarks/peers/chemprop.py``, tool ``classical``, variants ``svr`` and ``rf``).

* **Fingerprint**: RDKit's Morgan generator, radius 2 (ECFP4), 2048 folded bits, as 0/1, and
  the Tanimoto kernel: :mod:`graph_urpe.data.fingerprints` (the same as the classical model of
  every CSV fit, :mod:`graph_urpe.models.classical`, which also chooses C by cross-validation
  and Platt-scales the SVC).
* **Tanimoto kernel** :math:`K(a, b) = |a \\cap b| / (|a| + |b| - |a \\cap b|)` (1 for two empty
  fingerprints), a positive semi-definite kernel on bit vectors (Gower 1971; Ralaivola et al.,
  Neural Networks 2005), passed to scikit-learn's :class:`~sklearn.svm.SVR` /
  :class:`~sklearn.svm.SVC` as ``kernel="precomputed"``. Defaults ``C = 1`` (SVR's ``epsilon =
  0.1`` in standardised target units: the regression target is standardised with the train mean
  and standard deviation, as the deep models do, and predictions mapped back). Classification
  scores are the SVC's ``decision_function`` (ROC-AUC needs only a ranking).
* **Random forest**: scikit-learn's :class:`~sklearn.ensemble.RandomForestRegressor` /
  :class:`~sklearn.ensemble.RandomForestClassifier`, 500 trees, ``random_state`` = the seed,
  ``n_jobs=1``; classification scores are the positive class' probability.

CPU time is the process' own (:func:`time.process_time`) for fingerprints, fit and prediction.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from graph_urpe.data.fingerprints import ecfp4, tanimoto_kernel

#: anchor name -> description
VARIANTS = {"svr": "SVR/SVC, Tanimoto kernel, ECFP4", "rf": "random forest, ECFP4"}


def fit_predict(variant: str, task: str, x_train: np.ndarray, y_train: np.ndarray,
                x_test: np.ndarray, seed: int) -> np.ndarray:
    """Fit the anchor on the train rows; its test predictions (regression: the labels' units;
    classification: a score for class 1).

    Raises:
        ValueError: for an unknown variant or task.
    """
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
    from sklearn.svm import SVC, SVR

    if task not in ("regression", "classification"):
        raise ValueError(f"task must be 'regression' or 'classification', got {task!r}")
    if variant == "svr":
        k_train, k_test = tanimoto_kernel(x_train, x_train), tanimoto_kernel(x_test, x_train)
        if task == "classification":
            return SVC(kernel="precomputed").fit(k_train, y_train).decision_function(k_test)
        mean, std = float(y_train.mean()), float(y_train.std()) or 1.0
        model = SVR(kernel="precomputed").fit(k_train, (y_train - mean) / std)
        return model.predict(k_test) * std + mean
    if variant == "rf":
        if task == "classification":
            model = RandomForestClassifier(n_estimators=500, random_state=seed, n_jobs=1)
            return model.fit(x_train, y_train).predict_proba(x_test)[:, 1]
        model = RandomForestRegressor(n_estimators=500, random_state=seed, n_jobs=1)
        return model.fit(x_train, y_train).predict(x_test)
    raise ValueError(f"variant must be one of {sorted(VARIANTS)}, got {variant!r}")


def run_classical(smiles: Sequence[str], y: np.ndarray, rows: dict[str, np.ndarray], task: str,
                  variant: str, seed: int) -> tuple[np.ndarray, float]:
    """Fingerprints, fit on ``rows["train"]``, predictions on ``rows["test"]``; returns them and
    the CPU seconds spent (fingerprints included)."""
    start = time.process_time()
    fp = ecfp4(smiles)
    y = np.asarray(y, dtype=np.float64)
    pred = fit_predict(variant, task, fp[rows["train"]], y[rows["train"]], fp[rows["test"]], seed)
    return pred, time.process_time() - start
