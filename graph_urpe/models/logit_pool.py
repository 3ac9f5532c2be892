r"""The classification blend (issue 41): a pool of standardised logits, its weights chosen by
the validation ROC-AUC as far as the validation rows' effective size supports.

The network's and each classical member's probability of class 1, :math:`p_k`, become logits
:math:`\ell_k = \log(p_k / (1 - p_k))` (probabilities clipped to :math:`[\epsilon, 1 -
\epsilon]`, :data:`EPS`), standardised with the mean :math:`\mu_k` and standard deviation
:math:`\sigma_k` of that predictor's logits on the validation rows, :math:`z_k = (\ell_k - \mu_k)
/ \sigma_k` (:math:`\sigma_k` at least :data:`SCALE_FLOOR`), and pooled, :math:`s = \sum_k w_k
z_k` with :math:`w \ge 0` summing to 1 (the network's first, as in
:mod:`graph_urpe.models.blend`); the probability is Platt's sigmoid of
the pooled score, :math:`p = \sigma(a s + b)`, with :math:`a > 0, b` fitted on the same validation
rows (:func:`~graph_urpe.models.calibration.fit_platt`). Standardising puts every predictor on one
scale: a fine-tuned network's probabilities span 1e-28 to 0.99 where a Platt-scaled SVM's span
0.01 to 0.9, so a linear average of probabilities is ranked by the network alone wherever it is
confident, right or wrong (ClinTox, ``benchmarks/README.md`` section 31).

The weights (:func:`pool_weight`): the point of the simplex grid
(:func:`~graph_urpe.models.blend.simplex_grid`) with the highest validation ROC-AUC of :math:`s`
(the metric a classification fit monitors; ties go to the point nearest the prior), found again on
:data:`~graph_urpe.models.blend.BOOTSTRAP_DRAWS` bootstrap resamples of the validation rows
(seeded) and averaged; then shrunk towards the prior :math:`w^0` (the network 0.5, the members
sharing the rest, :data:`~graph_urpe.models.blend.NO_EVIDENCE_WEIGHT`) by what the rows are
worth: :math:`w = (m\,w_\text{bagged} + n_0 w^0) / (m + n_0)`, :math:`n_0 =`
:data:`PRIOR_ROWS` pseudo-rows, :math:`m = 2 n_1 n_0' / n` the harmonic mean of the two classes'
counts (:func:`effective_rows`): 148 ClinTox validation rows with 6 toxic molecules are worth
about 11, and there a network chosen on those rows looks far better than it is (validation
ROC-AUC 0.98, test 0.81-0.86).

A checkpoint stores the weights as ``blend_weight`` ``[T, 1 + K]`` and the pool's factors as
``blend_calibration`` ``[2 (1 + K) + 2, T]`` (:func:`fit_pool`: the centres :math:`\mu_k`,
the scales :math:`\sigma_k`, then :math:`a, b`); checkpoints written before the pool keep the
linear average of probabilities (:func:`~graph_urpe.models.blend.blend`).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from graph_urpe.models.blend import (
    BOOTSTRAP_DRAWS,
    NO_EVIDENCE_WEIGHT,
    blend,
    blended_outputs,
    column_rows,
    simplex_grid,
)

__all__ = ["EPS", "PRIOR_ROWS", "SCALE_FLOOR", "checkpoint_outputs", "effective_rows",
           "factor_rows", "fit_pool", "logits", "pool_weight", "pooled", "pooled_std",
           "prior_weight", "roc_auc_draws"]

EPS = 1e-12
"""Probabilities are clipped to ``[EPS, 1 - EPS]`` before their logits (``|logit| <= 27.6``)."""

PRIOR_ROWS = 20.0
""":math:`n_0`: the prior's worth in validation rows (10 and 40 measured the same on the three
public classification sets, ``benchmarks/README.md`` section 31)."""

_PAIR_BUDGET = 1 << 22
"""Grid points x (positive, negative) pairs held at once by :func:`roc_auc_draws` (32 MiB)."""

_PAIRS_PER_ROW = 200
"""Above this many (positive, negative) pairs per validation row :func:`roc_auc_draws` ranks
instead of pairing (measured: a pair costs about 1/190 of a row's share of the ranking)."""

SCALE_FLOOR = 1e-2
"""The least scale of a predictor's validation logits: one that varies less (a network that has
not learnt, in a short fit) is near constant, and dividing by its spread would blow its float32
round-off up into ranks."""


def prior_weight(members: int) -> np.ndarray:
    """The pool's prior weights: the network :data:`~graph_urpe.models.blend.NO_EVIDENCE_WEIGHT`,
    the members sharing the rest equally.

    Args:
        members (int): ``K >= 1``, the classical members.

    Returns:
        numpy.ndarray: ``[1 + K]`` float64 summing to 1 (the network's first).
    """
    return np.array([NO_EVIDENCE_WEIGHT] + [(1 - NO_EVIDENCE_WEIGHT) / members] * members)


def factor_rows(members: int) -> int:
    """The rows of a column's pool factors (``blend_calibration`` of a classification
    checkpoint): a centre and a scale for the network and each member, then Platt's :math:`a, b`.

    Args:
        members (int): ``K``, the classical members.

    Returns:
        int: ``2 (1 + K) + 2``.
    """
    return 2 * (1 + members) + 2


def logits(p: np.ndarray) -> np.ndarray:
    """The log-odds of probabilities clipped to ``[EPS, 1 - EPS]``.

    Args:
        p (numpy.ndarray): probabilities of class 1, any shape.

    Returns:
        numpy.ndarray: ``log(p / (1 - p))``, the shape of ``p``, float64 in ``[-27.7, 27.7]``;
        NaN stays NaN.
    """
    p = np.clip(np.asarray(p, np.float64), EPS, 1.0 - EPS)
    return np.log(p) - np.log1p(-p)


def effective_rows(target: np.ndarray) -> float:
    """What ``n`` labelled validation rows of a binary column are worth: the harmonic mean of
    the class counts, ``2 n_1 n_0 / n`` (``n / 2`` when balanced, about twice the minority count
    when it is rare; 0 when a class is absent).

    Args:
        target (numpy.ndarray): ``[n]`` labels 0 / 1.

    Returns:
        float: ``m`` in rows (``>= 0``).
    """
    target = np.asarray(target, np.float64)
    n = len(target)
    ones = float(np.sum(target == 1))
    return 0.0 if n == 0 else 2.0 * ones * (n - ones) / n


def roc_auc_draws(scores: np.ndarray, target: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """ROC-AUC of each row of ``scores`` under each row of ``counts`` (rows weighted by how often
    a bootstrap resample drew them), ties counted half (the Mann-Whitney statistic, as
    scikit-learn's :func:`~sklearn.metrics.roc_auc_score` with ``sample_weight``): for each
    positive row ``i`` its weight times the weight of the negatives scored below it plus half of
    those scored equal, summed and divided by the product of the classes' weights.

    Two evaluations of the same sums, the cheaper for the classes' counts ``n_1``, ``n_0``: where
    the smaller class is small (``n_1 n_0 <=`` :data:`_PAIRS_PER_ROW` ``x n``), a matrix product
    over the (positive, negative) pairs per grid point (``D x G x n_1 x n_0``; 0.04 CPU s for
    150 validation rows, 3.5 s for 140 positives among 4,100, :func:`pool_weight`'s 200 x 231); else ranks: each grid
    point's scores sorted once, tied scores grouped, the negatives' weight below each group a
    cumulative sum for all draws at once (``G`` sorts, ``O(G x D x n)``; 3.0 s for a balanced
    2,500, where the pairs take 10.7 s). With integer weights (resample counts) every sum is exact
    in float64, so both give the same values to the bit.

    Args:
        scores (numpy.ndarray): ``[G, n]`` float64 scores (one row per grid point).
        target (numpy.ndarray): ``[n]`` labels 0 / 1.
        counts (numpy.ndarray): ``[D, n]`` row weights (non-negative).

    Returns:
        numpy.ndarray: ``[D, G]`` float64; NaN for a draw without both classes.
    """
    scores, counts = np.asarray(scores, np.float64), np.asarray(counts, np.float64)
    positive = np.asarray(target) == 1
    n1 = int(positive.sum())
    n0 = positive.size - n1
    ranks = n1 * n0 > _PAIRS_PER_ROW * positive.size
    wins = (_wins_by_ranks if ranks else _wins_by_pairs)(scores, positive, counts)
    total = (counts[:, positive].sum(1) * counts[:, ~positive].sum(1))[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, wins / np.where(total > 0, total, 1.0), np.nan)


def _wins_by_pairs(scores: np.ndarray, positive: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``[D, G]`` weighted wins: a product over (positive, negative) pairs, in chunks of grid
    points of :data:`_PAIR_BUDGET` pairs."""
    cp, cn = counts[:, positive], counts[:, ~positive]
    step = max(1, _PAIR_BUDGET // max(cp.shape[1] * cn.shape[1], 1))
    wins = np.empty((counts.shape[0], scores.shape[0]))
    for c in range(0, scores.shape[0], step):
        sp, sn = scores[c:c + step, positive][:, :, None], scores[c:c + step, ~positive][:, None]
        pairs = (sp > sn) + 0.5 * (sp == sn)  # [g, n_1, n_0]
        wins[:, c:c + step] = (np.tensordot(cp, pairs, axes=(1, 1)) * cn[:, None]).sum(-1)
    return wins


def _wins_by_ranks(scores: np.ndarray, positive: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``[D, G]`` weighted wins from each grid point's sorted scores (tie groups)."""
    wins = np.empty((counts.shape[0], scores.shape[0]))
    for g, row in enumerate(scores):
        order = np.argsort(row, kind="stable")
        ranked = row[order]
        starts = np.flatnonzero(np.r_[True, ranked[1:] != ranked[:-1]])  # tie groups
        weight = counts[:, order]
        is_positive = positive[order]
        pos = np.add.reduceat(np.where(is_positive, weight, 0.0), starts, axis=1)  # [D, groups]
        neg = np.add.reduceat(np.where(is_positive, 0.0, weight), starts, axis=1)
        below = np.cumsum(neg, axis=1) - neg  # negatives' weight strictly below each group
        wins[:, g] = (pos * (below + 0.5 * neg)).sum(1)
    return wins


def pool_weight(z: np.ndarray, target: np.ndarray, draws: int = BOOTSTRAP_DRAWS,
                seed: int = 0, prior_rows: float = PRIOR_ROWS) -> np.ndarray:
    """The pool's weights of one column (module docstring): bagged validation ROC-AUC choices
    on the simplex grid, shrunk towards :func:`prior_weight` by :func:`effective_rows`.

    Args:
        z (numpy.ndarray): ``[n, 1 + K]`` standardised logits of the labelled validation rows
            (the network's first).
        target (numpy.ndarray): ``[n]`` their labels 0 / 1.
        draws (int, optional): bootstrap resamples. (default:
            :data:`~graph_urpe.models.blend.BOOTSTRAP_DRAWS`)
        seed (int, optional): the resampling seed. (default: :obj:`0`)
        prior_rows (float, optional): :math:`n_0`. (default: :data:`PRIOR_ROWS`)

    Returns:
        numpy.ndarray: ``[1 + K]`` float64 weights summing to 1; the prior when the rows do not
        hold both classes.
    """
    n, k = z.shape[0], z.shape[1] - 1
    prior = prior_weight(k)
    m = effective_rows(target)
    if m == 0:
        return prior
    grid = simplex_grid(k)
    counts = np.zeros((draws, n))
    idx = np.random.default_rng(seed).integers(0, n, size=(draws, n))
    np.add.at(counts, (np.arange(draws)[:, None], idx), 1.0)
    auc = roc_auc_draws(grid @ z.T, target, counts)  # [D, G]
    valid = ~np.isnan(auc).any(1)
    if not valid.any():
        return prior
    auc = auc[valid]
    distance = np.abs(grid - prior).sum(1)
    best = auc >= auc.max(1, keepdims=True) - 1e-12
    picks = grid[np.argmin(np.where(best, distance[None], math.inf), axis=1)]
    bagged = picks.mean(0)
    return (m * bagged + prior_rows * prior) / (m + prior_rows)


def fit_pool(network: np.ndarray, classical: np.ndarray, target: np.ndarray,
             modelled: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The pool of every column from validation rows (the rows where the label, the network's
    and every member's probabilities are finite): its weights (:func:`pool_weight`) and factors:
    the centres and scales of the network's and the members' validation logits, then Platt's
    :math:`a, b` of the pooled score under those weights
    (:func:`~graph_urpe.models.calibration.fit_platt`). A column without a classical model keeps
    the network alone (weights ``(1, 0, ...)``); one without validation rows of both classes the
    prior's weights; the factors of both are NaN.

    Args:
        network (numpy.ndarray): ``[N, T]`` the network's validation probabilities.
        classical (numpy.ndarray): ``[N, T, K]`` the members', NaN = no model.
        target (numpy.ndarray): ``[N, T]`` labels 0 / 1, NaN = missing.
        modelled (numpy.ndarray, optional): ``[T]`` bool, the columns with a classical model.
            (default: :obj:`None`: those with a prediction that is not NaN)

    Returns:
        tuple[numpy.ndarray, numpy.ndarray]: ``weight [T, 1 + K]`` and ``factors
        [2 (1 + K) + 2, T]`` (:func:`factor_rows`), float64.
    """
    from graph_urpe.models.calibration import fit_platt

    t_count, k = np.shape(target)[1], np.shape(classical)[2]
    weight = np.tile(np.eye(1, 1 + k).ravel(), (t_count, 1))
    factors = np.full((factor_rows(k), t_count), math.nan)
    for t, net, members, y in column_rows(network, classical, target, modelled):
        if effective_rows(y) == 0:
            weight[t] = prior_weight(k)
            continue
        raw = logits(np.column_stack([net, members]))
        centre, scale = raw.mean(0), np.maximum(raw.std(0), SCALE_FLOOR)
        z = (raw - centre) / scale
        weight[t] = pool_weight(z, y)
        a, b = fit_platt(torch.from_numpy(z @ weight[t])[:, None], torch.from_numpy(y)[:, None])
        factors[:, t] = np.concatenate([centre, scale, [float(a[0]), float(b[0])]])
    return weight, factors


def pooled(network: np.ndarray, classical: np.ndarray, weight: np.ndarray,
           factors: np.ndarray) -> np.ndarray:
    """The pool's probabilities ``[N, T]``: :math:`\\sigma(a \\sum_k w_k z_k + b)` per column; a
    column with ``w_0 = 1`` is the network's; one whose factors are NaN (no validation rows of
    both classes) the linear average ``w_0 p_0 + sum_k w_k p_k``.

    Args:
        network (numpy.ndarray): ``[N, T]`` the network's probabilities.
        classical (numpy.ndarray): ``[N, T, K]`` the members', NaN = no model.
        weight (numpy.ndarray): ``[T, 1 + K]``.
        factors (numpy.ndarray): ``[2 (1 + K) + 2, T]`` (:func:`fit_pool`).

    Returns:
        numpy.ndarray: ``[N, T]`` float64 probabilities of class 1.
    """
    network = np.asarray(network, np.float64)
    classical, weight = np.asarray(classical, np.float64), np.asarray(weight, np.float64)
    k = classical.shape[2]
    centre, scale, (a, b) = factors[:1 + k].T, factors[1 + k:2 + 2 * k].T, factors[2 + 2 * k:]
    z = (logits(np.concatenate([network[..., None], classical], -1)) - centre) / scale
    with np.errstate(invalid="ignore", over="ignore"):
        pool = 1.0 / (1.0 + np.exp(-(a * (z * weight).sum(-1) + b)))
    return np.where(np.isnan(a), blend(network, classical, weight), np.where(
        weight[:, 0] == 1.0, network, pool))


def pooled_std(network: dict[str, np.ndarray], pool: np.ndarray, weight: np.ndarray,
               factors: np.ndarray) -> np.ndarray:
    """``[N, T]`` the pool's std from an ensemble's std of the network's probability by the
    delta method: :math:`|\\partial p / \\partial p_0|\\,\\text{std}_0 = p (1 - p)\\,a\\,w_0 /
    (\\sigma_0\\,p_0 (1 - p_0))\\,\\text{std}_0` (the members' probabilities are single numbers);
    ``w_0 std_0`` where the factors are NaN, ``std_0`` where ``w_0 = 1``.

    Args:
        network (dict[str, numpy.ndarray]): ``prediction`` and ``std`` ``[N, T]``.
        pool (numpy.ndarray): ``[N, T]`` :func:`pooled`.
        weight (numpy.ndarray): ``[T, 1 + K]``.
        factors (numpy.ndarray): ``[2 (1 + K) + 2, T]``.

    Returns:
        numpy.ndarray: ``[N, T]`` float64, in probability units.
    """
    k = weight.shape[1] - 1
    p0 = np.clip(np.asarray(network["prediction"], np.float64), EPS, 1.0 - EPS)
    std = np.asarray(network["std"], np.float64)
    a, scale = factors[2 + 2 * k], factors[1 + k]
    slope = pool * (1.0 - pool) * a * weight[:, 0] / (scale * p0 * (1.0 - p0))
    return np.where(weight[:, 0] == 1.0, std, np.where(np.isnan(a), weight[:, 0] * std,
                                                       np.abs(slope) * std))


def checkpoint_outputs(task: str, network: dict[str, np.ndarray], classical: np.ndarray,
                       weight: np.ndarray, calibration: np.ndarray | None
                       ) -> dict[str, np.ndarray]:
    """What ``predict`` and ``test`` write for a checkpoint's blend: for classification with the
    pool's factors :func:`pooled` (and with an ensemble's ``std`` :func:`pooled_std`); otherwise
    (regression, or a classification checkpoint written before the pool)
    :func:`~graph_urpe.models.blend.blended_outputs`.

    Args:
        task (str): ``"regression"`` or ``"classification"``.
        network (dict[str, numpy.ndarray]): the network's outputs ``[N, T]`` (``prediction``,
            optionally ``std``, ``lower``, ``upper``).
        classical (numpy.ndarray): ``[N, T, K]`` the members' predictions, NaN = none.
        weight (numpy.ndarray): ``[T, 1 + K]``.
        calibration (numpy.ndarray, optional): the checkpoint's ``blend_calibration``.

    Returns:
        dict[str, numpy.ndarray]: the same keys as :obj:`network`, ``[N, T]`` float64.
    """
    if task != "classification" or calibration is None:
        return blended_outputs(network, classical, weight, calibration)
    weight = np.asarray(weight, np.float64)
    out = {"prediction": pooled(network["prediction"], classical, weight, calibration)}
    if "std" in network:
        out["std"] = pooled_std(network, out["prediction"], weight, calibration)
    return out
