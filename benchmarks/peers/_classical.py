"""The classical anchor of the Chemprop peer benchmark: SVR / SVC with a Tanimoto kernel and a random
forest, both on ECFP4 (Morgan radius 2, 2048 bits), fitted on the same train rows the deep models
train on (the valid rows are not used: the anchors have no early stopping) and scored on the same
test rows (``benchmarks/peers/chemprop.py``, tool ``classical``, variants ``svr`` and ``rf``).

* **Fingerprint**: RDKit's Morgan generator, radius 2 (ECFP4), 2048 folded bits, as 0/1.
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

#: anchor name -> description
VARIANTS = {"svr": "SVR/SVC, Tanimoto kernel, ECFP4", "rf": "random forest, ECFP4"}


def ecfp4(smiles: Sequence[str], n_bits: int = 2048) -> np.ndarray:
    """ECFP4 bit vectors, ``[N, n_bits]`` ``uint8`` (0/1).

    Raises:
        ValueError: if RDKit cannot parse a SMILES (named with its position).
    """
    from rdkit import Chem, rdBase
    from rdkit.Chem import rdFingerprintGenerator

    generator = rdFingerprintGenerator.GetMorganGenerator(radius=2, fpSize=n_bits)
    out = np.zeros((len(smiles), n_bits), dtype=np.uint8)
    with rdBase.BlockLogs():
        for i, smi in enumerate(smiles):
            mol = Chem.MolFromSmiles(str(smi))
            if mol is None:
                raise ValueError(f"SMILES {i} ({smi!r}) does not parse; drop the row first")
            out[i] = generator.GetFingerprintAsNumPy(mol)
    return out


def tanimoto_kernel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Tanimoto similarity of every row of :obj:`a` ``[N, D]`` with every row of :obj:`b`
    ``[M, D]`` (0/1 arrays): ``[N, M]`` float64; 1 where both fingerprints are empty."""
    a, b = a.astype(np.float64), b.astype(np.float64)
    inter = a @ b.T
    union = a.sum(1)[:, None] + b.sum(1)[None, :] - inter
    return np.divide(inter, union, out=np.ones_like(inter), where=union > 0)


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
