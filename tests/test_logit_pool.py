"""The classification blend: a pool of standardised logits (graph_urpe/models/logit_pool.py),
each piece against an independent computation: scikit-learn's weighted ROC-AUC, a naive loop over
the bootstrap draws and the simplex grid, SciPy's minimiser of Platt's objective, a
finite-difference derivative, and a received state's checks."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.optimize import minimize
from sklearn.metrics import roc_auc_score

from graph_urpe.models import logit_pool as pool
from graph_urpe.models.blend import blend, simplex_grid
from graph_urpe.models.classical_state import stored_blend_problem


def test_effective_rows_is_the_harmonic_mean_of_the_class_counts():
    clintox = np.r_[np.ones(6), np.zeros(142)]  # ClinTox's validation rows
    assert pool.effective_rows(clintox) == pytest.approx(2 * 6 * 142 / 148)  # 11.51
    assert pool.effective_rows(np.r_[np.ones(50), np.zeros(50)]) == 50.0
    assert pool.effective_rows(np.zeros(9)) == 0.0 and pool.effective_rows(np.zeros(0)) == 0.0


def test_weighted_roc_auc_with_ties_equals_scikit_learn():
    rng = np.random.default_rng(1)
    y = (rng.random(40) < 0.3).astype(float)
    scores = np.round(rng.normal(size=(5, 40)), 1)  # many ties
    scores[4] = 0.5  # all tied: 0.5
    counts = rng.integers(0, 3, size=(7, 40)).astype(float)
    counts[:, np.flatnonzero(y)[0]] += 1  # both classes in every draw
    got = pool.roc_auc_draws(scores, y, counts)
    want = [[roc_auc_score(y, s, sample_weight=c) for s in scores] for c in counts]
    np.testing.assert_allclose(got, want, atol=1e-12)
    no_positive = pool.roc_auc_draws(scores[:1], y, (1.0 - y)[None])
    assert np.isnan(no_positive).all()


def test_ranks_and_pairs_give_the_same_wins_to_the_bit():
    rng = np.random.default_rng(2)
    y = (rng.random(300) < 0.5)
    scores = np.round(rng.normal(size=(6, 300)), 1)  # many ties
    scores[5] = 1.0
    counts = rng.integers(0, 4, size=(9, 300)).astype(float)
    assert np.array_equal(pool._wins_by_ranks(scores, y, counts),
                          pool._wins_by_pairs(scores, y, counts))


def test_a_large_balanced_split_is_ranked_and_equals_scikit_learn(monkeypatch):
    rng = np.random.default_rng(3)
    y = np.r_[np.ones(500), np.zeros(500)]  # 250,000 pairs > 200 x 1,000 rows: ranks
    scores = np.round(rng.normal(size=(3, 1000)) + y, 2)
    counts = rng.integers(0, 3, size=(4, 1000)).astype(float)
    used = []
    monkeypatch.setattr(pool, "_wins_by_pairs", lambda *a: used.append("pairs"))
    got = pool.roc_auc_draws(scores, y, counts)
    assert not used
    want = [[roc_auc_score(y, s, sample_weight=c) for s in scores] for c in counts]
    np.testing.assert_allclose(got, want, atol=1e-12)


def _naive_weight(z, y, draws, prior_rows):
    """The rule as the module docstring states it, one draw and one grid point at a time."""
    grid, n = simplex_grid(z.shape[1] - 1), len(y)
    prior = np.array([0.5] + [0.5 / (z.shape[1] - 1)] * (z.shape[1] - 1))
    idx = np.random.default_rng(0).integers(0, n, size=(draws, n))
    picks = []
    for row in idx:
        counts = np.bincount(row, minlength=n).astype(float)
        if counts[y == 1].sum() == 0 or counts[y == 0].sum() == 0:
            continue
        auc = np.array([roc_auc_score(y, z @ w, sample_weight=counts) for w in grid])
        tied = np.flatnonzero(auc >= auc.max() - 1e-12)
        picks.append(grid[tied[np.argmin(np.abs(grid[tied] - prior).sum(1))]])
    m = 2 * y.sum() * (n - y.sum()) / n
    return (m * np.mean(picks, 0) + prior_rows * prior) / (m + prior_rows)


def test_pool_weight_is_the_bagged_roc_auc_choice_shrunk_by_the_effective_size():
    rng = np.random.default_rng(3)
    y = np.r_[np.ones(8), np.zeros(52)]
    z = np.stack([y + rng.normal(0, 0.8, 60), y + rng.normal(0, 1.5, 60),
                  rng.normal(0, 1, 60)], 1)
    for prior_rows in (0.0, pool.PRIOR_ROWS):
        got = pool.pool_weight(z, y, draws=12, prior_rows=prior_rows)
        np.testing.assert_allclose(got, _naive_weight(z, y, 12, prior_rows), atol=1e-12)
        assert got.sum() == pytest.approx(1.0)
    # no rows of both classes: the prior
    np.testing.assert_array_equal(pool.pool_weight(z, np.zeros(60)), [0.5, 0.25, 0.25])
    # the network right on every row, the one member wrong on every row: the ROC-AUC of
    # (2 w - 1) y is 1 for every w > 0.5, so each resample picks the tied point nearest the
    # prior, w = 0.55; 11.5 effective rows against 20 of the prior leave
    # (11.5 x 0.55 + 20 x 0.5) / 31.5
    y = np.r_[np.ones(6), np.zeros(142)]
    m = 2 * 6 * 142 / 148
    w = (m * 0.55 + 20 * 0.5) / (m + 20)
    np.testing.assert_allclose(pool.pool_weight(np.stack([y, -y], 1), y), [w, 1 - w])


def _platt_loss(a, b, s, y):
    """Platt's objective: cross-entropy against his smoothed targets."""
    t = np.where(y == 1, (y.sum() + 1) / (y.sum() + 2), 1 / ((1 - y).sum() + 2))
    p = 1 / (1 + np.exp(-(a * s + b)))
    return -np.mean(t * np.log(p) + (1 - t) * np.log(1 - p))


def test_fit_pool_standardises_the_logits_and_fits_platt_on_the_pooled_score():
    rng = np.random.default_rng(5)
    n = 90
    y = (rng.random(n) < 0.2).astype(float)
    y[:2] = [1.0, 0.0]
    network = 1 / (1 + np.exp(-(6 * y - 3 + rng.normal(0, 3, n))))  # confident, spread
    svm = 1 / (1 + np.exp(-(y - 0.5 + rng.normal(0, 0.7, n))))
    forest = np.round(rng.random(n) * 0.4 + 0.4 * y, 3)
    forest[:3] = 0.0  # a forest's unanimous vote: clipped, not infinite
    target = np.stack([y, y, np.full(n, np.nan)], 1)
    net = np.stack([network] * 3, 1)
    members = np.stack([np.stack([svm, forest], 1), np.full((n, 2), np.nan),
                        np.stack([svm, forest], 1)], 1)
    weight, factors = pool.fit_pool(net, members, target)
    assert factors.shape == (pool.factor_rows(2), 3) == (8, 3)
    raw = np.log(np.clip(np.stack([network, svm, forest], 1), 1e-12, 1 - 1e-12))
    raw = raw - np.log1p(-np.clip(np.stack([network, svm, forest], 1), 1e-12, 1 - 1e-12))
    np.testing.assert_allclose(factors[:3, 0], raw.mean(0))
    np.testing.assert_allclose(factors[3:6, 0], raw.std(0))
    z = (raw - raw.mean(0)) / raw.std(0)
    np.testing.assert_allclose(weight[0], pool.pool_weight(z, y))
    a, b = factors[6:, 0]
    s = z @ weight[0]
    best = minimize(lambda v: _platt_loss(v[0], v[1], s, y), [1.0, 0.0], method="Nelder-Mead",
                    options={"xatol": 1e-8, "fatol": 1e-12}).x
    np.testing.assert_allclose([a, b], best, atol=2e-3)
    # no classical model: the network alone; no labels: the prior, no factors
    np.testing.assert_array_equal(weight[1], [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(weight[2], [0.5, 0.25, 0.25])
    assert np.isnan(factors[:, 1:]).all()
    # the pooled probabilities by hand; a column without factors is the linear average
    p = pool.pooled(net, members, weight, factors)
    np.testing.assert_allclose(p[:, 0], 1 / (1 + np.exp(-(a * s + b))), rtol=1e-12)
    np.testing.assert_array_equal(p[:, 1], network)
    np.testing.assert_allclose(p[:, 2], blend(net, members, weight)[:, 2])
    # the ROC-AUC of the pool is that of its score: Platt's sigmoid is increasing
    assert roc_auc_score(y, p[:, 0]) == pytest.approx(roc_auc_score(y, s))


def test_pooled_std_is_the_delta_method():
    rng = np.random.default_rng(2)
    net = rng.uniform(0.05, 0.95, size=(6, 1))
    members = rng.uniform(0.1, 0.9, size=(6, 1, 2))
    weight = np.array([[0.6, 0.3, 0.1]])
    factors = np.array([[0.2], [-0.1], [0.3], [1.7], [0.9], [1.2], [1.4], [-0.3]])
    std = rng.uniform(0.01, 0.05, size=(6, 1))
    p = pool.pooled(net, members, weight, factors)
    h = 1e-6
    slope = (pool.pooled(net + h, members, weight, factors)
             - pool.pooled(net - h, members, weight, factors)) / (2 * h)
    got = pool.checkpoint_outputs("classification", {"prediction": net, "std": std}, members,
                                  weight, factors)
    np.testing.assert_allclose(got["prediction"], p)
    np.testing.assert_allclose(got["std"], np.abs(slope) * std, rtol=1e-6)


def test_a_received_pool_is_checked():
    weight = torch.tensor([[0.6, 0.3, 0.1]], dtype=torch.float64)
    factors = torch.tensor([[0.2], [-0.1], [0.3], [1.7], [0.9], [1.2], [1.4], [-0.3]],
                           dtype=torch.float64)
    state = {"task": "classification", "blend_weight": weight, "blend_calibration": factors}
    assert stored_blend_problem(state, 1, 2) is None
    assert stored_blend_problem({**state, "blend_calibration": factors[:6]}, 1, 2) == (
        "blend_calibration has shape [6, 1], not [8, 1]")
    for row, value in ((4, 0.0), (6, -1.0), (0, math.inf)):
        bad = factors.clone()
        bad[row, 0] = value
        assert "blend_calibration" in stored_blend_problem({**state, "blend_calibration": bad},
                                                           1, 2)
    nan = torch.full((8, 1), math.nan, dtype=torch.float64)
    assert stored_blend_problem({**state, "blend_calibration": nan}, 1, 2) is None


def test_a_classification_checkpoint_written_before_the_pool_predicts_as_it_did():
    rng = np.random.default_rng(4)
    net, members = rng.uniform(size=(5, 1)), rng.uniform(size=(5, 1, 2))
    weight = np.array([[0.2, 0.3, 0.5]])
    got = pool.checkpoint_outputs("classification", {"prediction": net, "std": net / 10},
                                  members, weight, None)
    np.testing.assert_allclose(got["prediction"][:, 0],
                               0.2 * net[:, 0] + members[:, 0] @ [0.3, 0.5])
    np.testing.assert_allclose(got["std"], 0.2 * net / 10)  # the network's weight times its std
