r"""The classical model beside every CSV fit: an SVM on ECFP4 with a Tanimoto kernel and, for
classification, a random forest on ECFP4 beside it (:mod:`graph_urpe.models.forest`), kept as
plain arrays.

On bioactivity sets a fingerprint SVM is a strong reference (issue 41: BACE scaffold ROC-AUC
0.846 against the template's 0.804; six ChEMBL sets mean RMSE 0.617 against 0.731), so every
CSV fit trains one on the same training rows and reports it beside the network
(:class:`~graph_urpe.models.classical_baseline.ClassicalBaseline`).

* **Features and kernel**: ECFP4, 2048 bits, and the Tanimoto kernel
  (:mod:`graph_urpe.data.fingerprints`), a precomputed Gram matrix.
* **One model per label column** on its labelled training rows (NaN labels masked):
  regression: scikit-learn's :class:`~sklearn.svm.SVR` (``epsilon = 0.1``) on targets
  standardised with the training mean and std, predictions mapped back;
  classification: :class:`~sklearn.svm.SVC` with Platt scaling (Platt 1999: :math:`p = 1 /
  (1 + \exp(A f + B))` of the decision value :math:`f`), scikit-learn's
  :class:`~sklearn.calibration.CalibratedClassifierCV` (``method="sigmoid"``,
  ``ensemble=False``: the sigmoid fitted on shuffled stratified 5-fold out-of-fold decision
  values, the SVC on all rows; ``SVC(probability=True)`` is deprecated since scikit-learn 1.9).
  A column with a single class (or one molecule of a class) in training gets no model
  (``C = 0``; NaN predictions).
* **C** from :data:`C_GRID` by shuffled 5-fold cross-validation (stratified for
  classification; RMSE of the standardised targets, ROC-AUC of the decision values) on the
  training rows, on a seeded subsample of :data:`CV_MAX_MOLECULES` when there are more (the
  final model uses all of them), with the one-standard-error rule
  (:func:`one_standard_error_index`; Hastie, Tibshirani & Friedman, *The Elements of
  Statistical Learning*, 2nd ed., section 7.10): the smallest C (the most regularised) whose
  mean CV score is within one standard error of the best mean. On BACE (scaffold split,
  benchmarks/README section 21) classification's best CV mean is C = 10 (ROC-AUC 0.908 +- 0.007)
  and the rule picks C = 1 (0.906; test ROC-AUC 0.846 against 0.786, validation also prefers 1);
  regression keeps C = 10 (CV RMSE 0.512 +- 0.015 of standardised pIC50; C = 1: 0.528).
* **Members** (:attr:`ClassicalModel.members`): the SVM; for classification also a random
  forest per column with a model (:class:`~graph_urpe.models.forest.Forest`, 500 trees on the
  same rows, fewer where the columns' trees together would exceed
  :data:`~graph_urpe.models.forest.NODE_BUDGET` nodes; on BACE's scaffold split it scores test
  ROC-AUC 0.855 against the SVC's 0.846, and the blend of network, SVM and forest 0.855 against
  network and SVM's 0.841; for regression it was measured and left out: blended weights
  0.00-0.01 on Lipophilicity, BACE pIC50 and FreeSolv, ``benchmarks/README.md`` section 29). Each member's prediction is written by
  ``predict`` and weighed in the blend (:mod:`graph_urpe.models.blend`).
* **Stored** as plain arrays (:meth:`ClassicalModel.state_dict`, no pickle): the training
  fingerprints bit-packed (``uint8``, 256 bytes a molecule) and their CSV rows; per column the
  support vectors (indices into those fingerprints), dual coefficients, intercept, Platt A / B,
  target mean / std and the C chosen; the forests' arrays (``forests``, classification); the
  applicability threshold; the blend's weights per column (``blend_weight`` ``[T, 1 + K]``,
  :mod:`graph_urpe.models.blend`; ``[T]`` in a state written before the forest, the network's
  weight beside the SVM's; absent in a state written before the blend existed: no blend) and
  its factors (``blend_calibration``): for regression the blend's uncertainty (absent before
  they existed: the network's widths around the blend), for classification the pool of
  standardised logits (:mod:`graph_urpe.models.logit_pool`; absent before it: a linear average
  of probabilities). Predictions from these arrays
  equal scikit-learn's ``predict`` / ``predict_proba`` (tests/test_classical.py).
  :meth:`ClassicalModel.from_state` checks a received state (keys, dtypes, shapes, ranges,
  finiteness: :func:`~graph_urpe.models.classical_state.state_problem`) before anything is
  computed from it.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import torch

from graph_urpe.data.fingerprints import pack_bits, tanimoto_kernel, unpack_bits
from graph_urpe.models.blend import upgrade_weight
from graph_urpe.models.classical_state import STATE_FORMAT, TASK_KEYS, state_problem
from graph_urpe.models.forest import NODE_BUDGET, Forest

__all__ = ["CV_MAX_MOLECULES", "C_GRID", "MEMBER_NAMES", "STATE_FORMAT", "ClassicalModel",
           "fit_task", "one_standard_error_index", "state_problem"]

MEMBER_NAMES = {"svm": "SVM", "forest": "forest"}
"""The members a classical model may have, in their order (:attr:`ClassicalModel.members`), and
how the summary's blend note names them."""

C_GRID = (0.1, 1.0, 10.0, 100.0)
"""The values of the SVM's C that cross-validation chooses from, increasing (least
regularised last: :func:`one_standard_error_index` relies on the order)."""

CV_MAX_MOLECULES = 2000
"""At most this many (seeded, sampled) training molecules choose C; the final fit uses all."""

_BLOCK = 2048  # query rows per kernel block: [2048, N] float64 at a time


def one_standard_error_index(cv_results: dict[str, Any]) -> int:
    r"""The one-standard-error rule (Hastie, Tibshirani & Friedman, *The Elements of Statistical
    Learning*, 2nd ed., section 7.10): the first candidate (the most regularised, as
    :data:`C_GRID` is ordered) whose mean cross-validation score is at least the best mean minus
    the best candidate's standard error :math:`s / \sqrt{K}` (:math:`s` the sample standard
    deviation, ``ddof = 1``, of its :math:`K` fold scores). Used as scikit-learn's
    :class:`~sklearn.model_selection.GridSearchCV` ``refit`` callable.

    Args:
        cv_results (dict): :attr:`GridSearchCV.cv_results_`: ``split<k>_test_score`` (``[P]``
            each, higher is better) for ``k < K``, the candidates in grid order.

    Returns:
        int: the index of the chosen candidate.

    Raises:
        ValueError: without fold scores, or with one that is not finite.
    """
    folds = sorted(k for k in cv_results if k.startswith("split") and k.endswith("_test_score"))
    scores = np.array([cv_results[k] for k in folds], dtype=np.float64).T  # [P, K]
    if scores.size == 0 or len(folds) < 2 or not np.isfinite(scores).all():
        raise ValueError("cv_results needs finite split<k>_test_score of 2 or more folds")
    mean = scores.mean(1)
    best = int(mean.argmax())
    error = scores[best].std(ddof=1) / math.sqrt(scores.shape[1])
    return int(np.flatnonzero(mean >= mean[best] - error)[0])


def fit_task(kernel: np.ndarray, y: np.ndarray, task: str, seed: int = 0) -> dict[str, Any]:
    """Fit the SVM of one label column on its labelled training rows.

    Args:
        kernel (numpy.ndarray): ``[n, n]`` float64 Tanimoto Gram matrix of the rows.
        y (numpy.ndarray): ``[n]`` labels (no NaN; 0/1 for classification).
        task (str): ``"regression"`` or ``"classification"``.
        seed (int, optional): seed of the folds, the C subsample and Platt's folds.
            (default: :obj:`0`)

    Returns:
        dict: ``support`` (``[S]`` int64 row indices), ``dual_coef`` (``[S]`` float64),
        ``intercept``, ``C``, ``platt_a``, ``platt_b``, ``mean``, ``std`` (floats; ``C = 0`` and
        no support: a column with one class, no model).

    Raises:
        ValueError: for an unknown task.
    """
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.model_selection import GridSearchCV, KFold, StratifiedKFold
    from sklearn.svm import SVC, SVR

    n = len(y)
    out = {"support": np.zeros(0, np.int64), "dual_coef": np.zeros(0), "intercept": 0.0,
           "C": 0.0, "platt_a": 0.0, "platt_b": 0.0, "mean": 0.0, "std": 1.0}
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(n, CV_MAX_MOLECULES, replace=False)) if n > CV_MAX_MOLECULES \
        else np.arange(n)
    if task == "regression":
        mean, std = float(y.mean()), float(y.std())
        std = std if std > 0 else 1.0
        z = (y - mean) / std
        folds = min(5, len(rows))
        c = 1.0
        if folds >= 2:
            search = GridSearchCV(SVR(kernel="precomputed"), {"C": list(C_GRID)},
                                  scoring="neg_root_mean_squared_error",
                                  refit=one_standard_error_index,
                                  cv=KFold(folds, shuffle=True, random_state=seed))
            c = float(search.fit(kernel[np.ix_(rows, rows)], z[rows]).best_params_["C"])
        svm = SVR(kernel="precomputed", C=c).fit(kernel, z)
        out.update(mean=mean, std=std)
    elif task == "classification":
        labels = y.astype(np.int64)
        if len(np.unique(labels)) < 2:
            return out
        folds = min(5, int(np.bincount(labels[rows], minlength=2).min()))
        c = 1.0
        if folds >= 2:
            search = GridSearchCV(SVC(kernel="precomputed"), {"C": list(C_GRID)},
                                  scoring="roc_auc", refit=one_standard_error_index,
                                  cv=StratifiedKFold(folds, shuffle=True, random_state=seed))
            c = float(search.fit(kernel[np.ix_(rows, rows)], labels[rows]).best_params_["C"])
        platt_folds = min(5, int(np.bincount(labels, minlength=2).min()))
        if platt_folds < 2:  # one molecule of a class: no held-out decision values for Platt
            return out
        calibrated = CalibratedClassifierCV(
            SVC(kernel="precomputed", C=c), method="sigmoid", ensemble=False,
            cv=StratifiedKFold(platt_folds, shuffle=True, random_state=seed)).fit(kernel, labels)
        fitted = calibrated.calibrated_classifiers_[0]
        svm, sigmoid = fitted.estimator, fitted.calibrators[0]
        out.update(platt_a=float(sigmoid.a_), platt_b=float(sigmoid.b_))
    else:
        raise ValueError(f"task must be 'regression' or 'classification', got {task!r}")
    out.update(support=svm.support_.astype(np.int64), dual_coef=svm.dual_coef_[0].astype(
        np.float64), intercept=float(svm.intercept_[0]), C=c)
    return out


@dataclasses.dataclass
class ClassicalModel:
    r"""A fitted classical model as plain arrays (see the module docstring).

    Args:
        task (str): ``"regression"`` or ``"classification"``.
        train_fingerprints (numpy.ndarray): ``[N, 256]`` ``uint8``, the training molecules'
            ECFP4 bit-packed (:func:`~graph_urpe.data.fingerprints.pack_bits`).
        train_rows (numpy.ndarray): ``[N]`` int64, their CSV data rows (0-based).
        tasks (list[dict]): one entry per label column, as :func:`fit_task` returns.
        similarity_threshold (float): the applicability threshold on the Tanimoto similarity to
            the nearest training molecule (NaN: none chosen).
        blend_weight (numpy.ndarray, optional): ``[T, 1 + K]`` float64 in ``[0, 1]``, each
            column's weights in the blend (:mod:`graph_urpe.models.blend`: the network's, then
            each member's; rows sum to 1); :obj:`None`: none.
        blend_calibration (numpy.ndarray, optional): regression: ``[2, T]`` float64, the
            blend's z-scaling and conformal factors per column
            (:func:`~graph_urpe.models.blend.fit_blend_calibration`; NaN: no validation label);
            classification: ``[2 (1 + K) + 2, T]``, the factors of the pool of standardised
            logits (:func:`~graph_urpe.models.logit_pool.fit_pool`); :obj:`None`: none (a
            checkpoint written before them: a linear blend).
        forests (list, optional): one :class:`~graph_urpe.models.forest.Forest` (or
            :obj:`None` for a column without a model) per label column; :obj:`None`: no
            forest member (regression, or a checkpoint written before it).
    """

    task: str
    train_fingerprints: np.ndarray
    train_rows: np.ndarray
    tasks: list[dict]
    similarity_threshold: float = math.nan
    blend_weight: np.ndarray | None = None
    blend_calibration: np.ndarray | None = None
    forests: list[Forest | None] | None = None

    @property
    def members(self) -> tuple[str, ...]:
        """The members whose predictions :meth:`predict` gives, in its last axis:
        ``("svm",)`` or ``("svm", "forest")`` (keys of :data:`MEMBER_NAMES`)."""
        return ("svm",) if self.forests is None else ("svm", "forest")

    @property
    def member_names(self) -> tuple[str, ...]:
        """How the summary names :attr:`members` (:data:`MEMBER_NAMES`: ``SVM``, ``forest``)."""
        return tuple(MEMBER_NAMES[m] for m in self.members)

    @classmethod
    def fit(cls, bits: np.ndarray, labels: np.ndarray, rows: np.ndarray, task: str,
            seed: int = 0) -> ClassicalModel:
        """Fit one SVM per label column (:func:`fit_task`) on its labelled rows and, for
        classification, a forest beside each SVM (:meth:`Forest.fit
        <graph_urpe.models.forest.Forest.fit>`, the same rows and seed).

        Args:
            bits (numpy.ndarray): ``[N, 2048]`` 0/1 ECFP4 of the training molecules.
            labels (numpy.ndarray): ``[N, T]`` labels, NaN = missing.
            rows (numpy.ndarray): ``[N]`` their CSV data rows.
            task (str): ``"regression"`` or ``"classification"``.
            seed (int, optional): see :func:`fit_task`. (default: :obj:`0`)

        Returns:
            ClassicalModel: without an applicability threshold (NaN).
        """
        kernel = tanimoto_kernel(bits, bits)
        tasks, forests = [], []
        for t in range(labels.shape[1]):
            keep = np.flatnonzero(~np.isnan(labels[:, t]))
            sub = kernel if len(keep) == len(kernel) else kernel[np.ix_(keep, keep)]
            entry = fit_task(sub, labels[keep, t], task, seed)
            entry["support"] = keep[entry["support"]]  # indices into all N training molecules
            tasks.append(entry)
            if task == "classification":  # the columns share the forests' node budget
                forests.append(Forest.fit(bits[keep], labels[keep, t], seed,
                                          NODE_BUDGET // labels.shape[1]) if entry["C"] > 0
                               else None)
        return cls(task, pack_bits(bits), np.asarray(rows, dtype=np.int64), tasks,
                   forests=forests or None)

    def _blocks(self, bits: np.ndarray):
        train = unpack_bits(self.train_fingerprints)
        for start in range(0, len(bits), _BLOCK):
            yield start, tanimoto_kernel(bits[start:start + _BLOCK], train)

    def _from_kernel(self, kernel: np.ndarray) -> np.ndarray:
        out = np.full((len(kernel), len(self.tasks)), np.nan)
        for t, entry in enumerate(self.tasks):
            if entry["C"] == 0:
                continue
            f = kernel[:, entry["support"]] @ entry["dual_coef"] + entry["intercept"]
            if self.task == "regression":
                out[:, t] = f * entry["std"] + entry["mean"]
            else:  # Platt's sigmoid of the decision value
                out[:, t] = 1.0 / (1.0 + np.exp(entry["platt_a"] * f + entry["platt_b"]))
        return out

    def _members(self, bits: np.ndarray, kernel: np.ndarray) -> np.ndarray:
        """``[M, T, K]``: the SVM's predictions from the kernel block, and the forests'."""
        out = self._from_kernel(kernel)[..., None]
        if self.forests is None:
            return out
        forest = np.full(out.shape, np.nan)
        for t, model in enumerate(self.forests):
            if model is not None:
                forest[:, t, 0] = model.predict(bits)
        return np.concatenate([out, forest], axis=2)

    def predict(self, bits: np.ndarray) -> np.ndarray:
        """Each member's predictions from the stored arrays.

        Args:
            bits (numpy.ndarray): ``[M, 2048]`` 0/1 ECFP4 of the molecules.

        Returns:
            numpy.ndarray: ``[M, T, K]`` float64 (:attr:`members` in the last axis): the labels'
            units (regression) or the probability of class 1 (classification: the SVM's Platt
            probability, the forest's fraction of trees' class-1 leaves); NaN for a column
            without a model.
        """
        return self.predict_with_neighbours(bits)[0]

    def predict_with_neighbours(self, bits: np.ndarray
                                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`predict`, and each molecule's nearest training molecule, in blocks of 2048
        rows (memory ``2048 x N`` float64).

        Args:
            bits (numpy.ndarray): ``[M, 2048]`` 0/1 ECFP4.

        Returns:
            tuple: predictions ``[M, T, K]`` float64 (:meth:`predict`); the Tanimoto similarity
            to the nearest training molecule ``[M]`` float64; that molecule's CSV row ``[M]``
            int64.
        """
        pred = np.full((len(bits), len(self.tasks), len(self.members)), np.nan)
        similarity = np.zeros(len(bits))
        nearest = np.zeros(len(bits), dtype=np.int64)
        for start, kernel in self._blocks(bits):
            stop = start + len(kernel)
            pred[start:stop] = self._members(bits[start:stop], kernel)
            best = kernel.argmax(axis=1)
            similarity[start:stop] = kernel[np.arange(len(kernel)), best]
            nearest[start:stop] = self.train_rows[best]
        return pred, similarity, nearest

    def state_dict(self) -> dict[str, Any]:
        """The model as plain data for a checkpoint: tensors, numbers and strings (see
        :meth:`from_state`)."""
        return {
            "format": STATE_FORMAT, "task": self.task,
            "train_fingerprints": torch.from_numpy(np.ascontiguousarray(self.train_fingerprints)),
            "train_rows": torch.from_numpy(np.ascontiguousarray(self.train_rows)),
            "similarity_threshold": float(self.similarity_threshold),
            "tasks": [{key: torch.from_numpy(np.ascontiguousarray(e[key])) if key in (
                "support", "dual_coef") else float(e[key]) for key in TASK_KEYS}
                for e in self.tasks],
            **{key: torch.tensor(value, dtype=torch.float64) for key, value in (
                ("blend_weight", self.blend_weight),
                ("blend_calibration", self.blend_calibration)) if value is not None},
            **({} if self.forests is None else {"forests": [
                None if f is None else f.state_dict() for f in self.forests]}),
        }

    @classmethod
    def from_state(cls, state: Any, num_tasks: int | None = None) -> ClassicalModel:
        """A model from a received :meth:`state_dict`, checked before use.

        Args:
            state (Any): what a checkpoint holds.
            num_tasks (int, optional): the number of label columns it must have.
                (default: :obj:`None`, any)

        Returns:
            ClassicalModel: the model (arrays copied to NumPy).

        Raises:
            ValueError: one line naming the first entry that is not what this version writes
                (key, type, dtype, shape, a value out of range or not finite).
        """
        problem = state_problem(state, num_tasks)
        if problem:
            raise ValueError(f"the classical model's {problem}")
        tasks = [{k: (v.numpy().copy() if isinstance(v, torch.Tensor) else float(v))
                  for k, v in e.items()} for e in state["tasks"]]
        weight, calibration = state.get("blend_weight"), state.get("blend_calibration")
        forests = state.get("forests")
        return cls(state["task"], state["train_fingerprints"].numpy().copy(),
                   state["train_rows"].numpy().copy(), tasks,
                   float(state["similarity_threshold"]),
                   None if weight is None else upgrade_weight(weight.numpy()),
                   None if calibration is None else calibration.numpy().copy(),
                   None if forests is None else [None if f is None else Forest.from_state(f)
                                                 for f in forests])
