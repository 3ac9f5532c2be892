"""The test metric's bootstrap interval, against the normal approximation and hand-made cases."""

import math

import numpy as np
import pytest
import torch

from graph_urpe.models.uncertainty import bootstrap_interval


def test_mae_interval_matches_the_normal_approximation_of_a_mean():
    # MAE is the mean of |error|: for n = 400 its percentile bootstrap interval is close to
    # mean +- 1.96 * sd / sqrt(n) (central limit theorem), computed here with numpy alone.
    rng = np.random.default_rng(0)
    target = rng.normal(size=(400, 1))
    pred = target + rng.normal(scale=0.5, size=(400, 1))
    err = np.abs(pred - target).ravel()
    half = 1.96 * err.std(ddof=1) / math.sqrt(len(err))
    low, high = bootstrap_interval(torch.tensor(pred), torch.tensor(target), "regression", "mae")
    assert low < err.mean() < high
    assert low == pytest.approx(err.mean() - half, rel=0.03)
    assert high == pytest.approx(err.mean() + half, rel=0.03)


def test_interval_is_deterministic_and_masks_missing_labels():
    rng = np.random.default_rng(1)
    target = torch.tensor(rng.normal(size=(50, 2)))
    target[::3, 1] = float("nan")
    pred = target.nan_to_num(0.0) + 0.1
    first = bootstrap_interval(pred, target, "regression", "mae")
    assert first == bootstrap_interval(pred, target, "regression", "mae")
    # Every labelled error is 0.1 exactly: every resample's MAE is 0.1.
    assert first == pytest.approx((0.1, 0.1), abs=1e-6)


def test_rocauc_interval_brackets_the_value_and_perfect_scores_give_one():
    labels = torch.tensor([0.0, 1.0] * 30).view(-1, 1)
    low, high = bootstrap_interval(labels * 2 - 1, labels, "classification", "rocauc")
    assert low == high == pytest.approx(1.0)
    rng = np.random.default_rng(2)
    scores = labels + torch.tensor(rng.normal(size=(60, 1)))
    low, high = bootstrap_interval(scores, labels, "classification", "rocauc")
    assert 0.5 < low < high < 1.0


def test_undefined_cases_give_none():
    one_class = torch.ones(10, 1)
    assert bootstrap_interval(torch.rand(10, 1), one_class, "classification", "rocauc") is None
    assert bootstrap_interval(torch.rand(1, 1), torch.rand(1, 1), "regression", "mae") is None
    nan = torch.full((5, 1), float("nan"))
    assert bootstrap_interval(torch.rand(5, 1), nan, "regression", "mae") is None


def test_multiclass_accuracy_interval():
    target = torch.tensor([0, 1, 2, 1] * 10, dtype=torch.float32).view(-1, 1)
    logits = torch.nn.functional.one_hot(target.view(-1).long(), 3).float()
    assert bootstrap_interval(logits, target, "multiclass", "accuracy") == (1.0, 1.0)


def test_classification_resamples_are_stratified_so_one_negative_still_gives_an_interval():
    """One negative among 30 graphs: a plain bootstrap lacks it in about 37 % of the resamples
    (ROC-AUC undefined there); resampling positives and negatives separately keeps it in every
    one. The negative's score is above 9 of the 29 positives', so a resample's ROC-AUC is the
    fraction of 29 positives drawn with replacement that score above it: Binomial(29, 20/29) / 29,
    whose 2.5 % and 97.5 % quantiles (scipy) the interval matches within one step of 1/29."""
    from scipy.stats import binom

    from graph_urpe.models.uncertainty import bootstrap_strata

    target = torch.ones(30, 1)
    target[12] = 0.0
    pred = torch.linspace(0, 1, 30).unsqueeze(1)  # the negative is the 13th score of 30
    above = int((pred[target == 1] > pred[12]).sum())
    assert above == 17
    strata = bootstrap_strata(target, "classification")
    assert sorted(map(len, strata)) == [1, 29]
    low, high = bootstrap_interval(pred, target, "classification", "rocauc", n_resamples=4000)
    expected = binom.ppf([0.025, 0.975], 29, above / 29) / 29
    assert low == pytest.approx(expected[0], abs=1 / 29 + 1e-9)
    assert high == pytest.approx(expected[1], abs=1 / 29 + 1e-9)
    # Several tasks are resampled together; regression is one group.
    assert len(bootstrap_strata(torch.zeros(5, 2), "classification")) == 1
    assert len(bootstrap_strata(torch.rand(5, 1), "regression")) == 1
    classes = torch.tensor([0.0, 2.0, 1.0, 2.0, 2.0]).view(-1, 1)
    assert sorted(map(len, bootstrap_strata(classes, "multiclass"))) == [1, 1, 3]


def test_summary_names_the_stratified_interval_and_says_when_there_is_none():
    from types import SimpleNamespace

    from graph_urpe.cli.summary_lines import metric_interval_line

    target = torch.ones(30, 1)
    target[0] = 0.0
    pred = torch.linspace(0, 1, 30).unsqueeze(1)
    model = SimpleNamespace(test_outputs=(torch.arange(30), pred, target), level="graph",
                            metric_name="rocauc", record=SimpleNamespace(task="classification"),
                            target_names=["active"])
    line = metric_interval_line(model, "graph-urpe seeds --seeds 3")
    assert line.startswith("Test ROC-AUC 95% interval over the 30 labelled test graphs "
                           "(bootstrap, stratified by class): 1.0000 to 1.0000. Few of a class "
                           "in the test split (active: 29 positive, 1 negative)")
    assert line.endswith("graph-urpe seeds --seeds 3")
    balanced = torch.tensor([0.0, 1.0]).repeat(15).unsqueeze(1)
    model.test_outputs = (torch.arange(30), pred, balanced)
    assert "Few of a class" not in metric_interval_line(model)  # 15 of each
    # Two tasks are resampled together: task 0 has one negative, task 1 one class only, so the
    # resamples without row 0 have no task with both classes (ROC-AUC undefined): no interval.
    target = torch.ones(30, 2)
    target[0, 0] = 0.0
    model = SimpleNamespace(test_outputs=(torch.arange(30), pred.repeat(1, 2), target),
                            level="graph", metric_name="rocauc",
                            record=SimpleNamespace(task="classification"),
                            target_names=["a", "b"])
    assert metric_interval_line(model).startswith(
        "Test ROC-AUC: no bootstrap interval over the 30 labelled test graphs")


@pytest.mark.parametrize("task,metric", [("regression", "mae"), ("regression", "rmse"),
                                         ("regression", "r2"), ("classification", "rocauc"),
                                         ("classification", "ap"),
                                         ("classification", "rocauc/1")])
def test_interval_equals_the_loop_over_all_metrics_of_each_resample(task, metric):
    # The bootstrap computes only the metric it needs (epoch_metrics(names=...)); the interval must
    # be exactly the one of the former loop, which computed every metric of each resample.
    from graph_urpe.models.metrics import epoch_metrics
    from graph_urpe.models.uncertainty import bootstrap_strata

    g = torch.Generator().manual_seed(3)
    pred = torch.randn(70, 2, generator=g)
    target = torch.randn(70, 2, generator=g)
    if task == "classification":
        target = (target > 0).float()
    target[::7, 1] = float("nan")
    rng = np.random.default_rng(0)
    strata = bootstrap_strata(target, task)
    values = []
    for _ in range(1000):
        idx = torch.as_tensor(np.concatenate([s[rng.integers(0, s.size, s.size)] for s in strata]))
        full = epoch_metrics(pred[idx], target[idx], task)
        assert epoch_metrics(pred[idx], target[idx], task, names=(metric,)) \
            == {k: v for k, v in full.items() if k.split("/")[0] == metric.split("/")[0]}
        values.append(full[metric])
    tail = (1.0 - 0.95) / 2.0  # as bootstrap_interval writes it (0.025 + 2e-17)
    expected = tuple(float(q) for q in np.quantile(np.array(values), [tail, 1.0 - tail]))
    assert bootstrap_interval(pred, target, task, metric) == expected
