"""Ensembles, mean-variance heads and calibrated uncertainty, against independent computations."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.stats import norm
from torch_geometric.data import Batch

from graph_urpe.cli import main
from graph_urpe.data.featurize import smiles_to_graph
from graph_urpe.models.calibration import calibration_metrics, fit_calibration, masked_gaussian_nll
from graph_urpe.models.ensemble import combine_members, member_copies
from graph_urpe.models.graph import GraphPropertyModule
from graph_urpe.models.objective import Objective
from graph_urpe.models.record import ModelRecord
from graph_urpe.nn import Graphormer
from graph_urpe.transforms import AddShortestPathDistance

TINY = {"num_layers": 1, "embed_dim": 16, "num_heads": 2, "ffn_dim": 16, "max_hops": 4,
        "max_distance": 8, "max_degree": 6}
SMILES = ["CCO", "c1ccccc1", "CC(=O)O", "NCCN", "CCCl"]


def _batch():
    spd = AddShortestPathDistance()
    graphs = [spd(smiles_to_graph(s, "zinc")) for s in SMILES]
    for i, graph in enumerate(graphs):
        graph.sample_id = i
    return Batch.from_data_list(graphs)


def _net(**kw):
    return Graphormer(num_tasks=2, atom_categories=[28], bond_categories=[4], **TINY, **kw)


# ------------------------------------------------------------------------- calibration (by hand)
def test_coverage_on_a_synthetic_gaussian_problem_by_hand():
    """sigma under-states the noise 2x: z-scaling finds 2, the conformal interval covers 95 %."""
    rng = np.random.default_rng(0)
    n = 4000
    mu, sigma = rng.normal(size=(2, n, 1)), rng.uniform(0.5, 2.0, size=(2, n, 1))
    y = mu + 2.0 * sigma * rng.normal(size=(2, n, 1))
    val, test = 0, 1
    t = {k: torch.tensor(v[val]) for k, v in (("mu", mu), ("sigma", sigma), ("y", y))}
    scale, q = fit_calibration(t["mu"], t["sigma"], t["y"])
    z = np.sort(np.abs((y[val] - mu[val]) / sigma[val])[:, 0])
    assert scale.item() == pytest.approx(math.sqrt(np.mean(z ** 2)), rel=1e-6)
    assert scale.item() == pytest.approx(2.0, rel=0.05)
    assert q.item() == pytest.approx(z[math.ceil((n + 1) * 0.95) - 1], rel=1e-6)  # order statistic
    assert q.item() == pytest.approx(2.0 * 1.959964, rel=0.06)
    # On the test half: coverage, NLL and Spearman counted by hand.
    m, s, yt = mu[test][:, 0], sigma[test][:, 0], y[test][:, 0]
    lo, hi, sd = m - q.item() * s, m + q.item() * s, scale.item() * s
    inside = sum(1 for i in range(n) if lo[i] <= yt[i] <= hi[i]) / n
    nll = -np.mean(norm.logpdf(yt, loc=m, scale=sd))
    err_rank = pd.Series(np.abs(yt - m)).rank().to_numpy()
    sd_rank = pd.Series(sd).rank().to_numpy()
    spearman = np.corrcoef(err_rank, sd_rank)[0, 1]
    got = calibration_metrics(*(torch.tensor(v)[:, None] for v in (m, sd, lo, hi, yt)))
    assert got["coverage"] == pytest.approx(inside, abs=1e-12)
    assert abs(inside - 0.95) < 3 * math.sqrt(0.95 * 0.05 / n)
    assert got["nll"] == pytest.approx(nll, rel=1e-9)
    assert got["spearman"] == pytest.approx(spearman, rel=1e-9)


def test_calibration_skips_missing_labels():
    mean = torch.zeros(4, 2)
    sigma = torch.ones(4, 2)
    target = torch.tensor([[1.0, float("nan")], [-1.0, float("nan")], [3.0, float("nan")],
                           [float("nan"), float("nan")]])
    scale, q = fit_calibration(mean, sigma, target)
    assert scale[0].item() == pytest.approx(math.sqrt((1 + 1 + 9) / 3))
    assert q[0].item() == 3.0  # ceil(4 * 0.95) = 4 > 3 labels: the largest |z|
    assert math.isnan(scale[1]) and math.isnan(q[1])


def test_gaussian_nll_equals_the_log_density():
    mean, var = torch.tensor([[0.5, 1.0]]), torch.tensor([[2.0, 0.25]])
    target = torch.tensor([[1.5, float("nan")]])
    expected = -norm.logpdf(1.5, loc=0.5, scale=math.sqrt(2.0))
    assert masked_gaussian_nll(mean, var, target).item() == pytest.approx(expected, rel=1e-6)


# ---------------------------------------------------------------------------------- ensembles
def test_ensemble_prediction_is_the_members_mean():
    torch.manual_seed(0)
    module = GraphPropertyModule(_net(), record=ModelRecord(target_names=["a", "b"]), ensemble_size=3)
    module.target_mean.copy_(torch.tensor([1.0, -2.0]))
    module.target_std.copy_(torch.tensor([3.0, 0.5]))
    module.eval()
    batch = _batch()
    with torch.no_grad():
        out = module.predict_step(batch, 0)
        members = [net(batch) * module.target_std + module.target_mean for net in module.members]
    stacked = torch.stack(members)
    assert len(module.members) == 3 and not torch.allclose(members[0], members[1])
    torch.testing.assert_close(out["prediction"], stacked.mean(0))
    # uncalibrated: the members' population std and the Gaussian's 1.96 std
    torch.testing.assert_close(out["std"], stacked.std(0, unbiased=False))
    torch.testing.assert_close(out["upper"] - out["prediction"], 1.959964 * out["std"])


def test_ensemble_classifier_averages_probabilities():
    outputs = torch.randn(4, 6, 2)
    combined = combine_members(outputs, "classification")
    torch.testing.assert_close(torch.sigmoid(combined), torch.sigmoid(outputs).mean(0))
    multi = combine_members(outputs, "multiclass")
    torch.testing.assert_close(multi.exp(), torch.softmax(outputs, -1).mean(0))
    assert combine_members(outputs[:1], "classification") is not None
    torch.testing.assert_close(combine_members(outputs[:1], "regression"), outputs[0])


def test_mve_mixture_moments():
    means, variances = torch.randn(3, 5, 1), torch.rand(3, 5, 1) + 0.1
    mixed = combine_members(torch.cat([means, variances], -1), "regression", mve=True)
    # E[y] and E[y^2] - E[y]^2 of the equal-weight mixture, written out
    m = (means[0] + means[1] + means[2]) / 3
    second = sum(variances[i] + means[i] ** 2 for i in range(3)) / 3
    torch.testing.assert_close(mixed, torch.cat([m, second - m ** 2], -1))


def test_member_copies_are_seeded_and_distinct():
    net = _net()
    torch.manual_seed(1)
    a = member_copies(net, 2)
    torch.manual_seed(1)
    b = member_copies(net, 2)
    for x, y in zip(a, b):
        for p, r in zip(x.parameters(), y.parameters()):
            assert torch.equal(p, r)
    assert not torch.equal(a[0].head.linear.weight, a[1].head.linear.weight)
    with pytest.raises(ValueError, match="reset_parameters"):
        member_copies(torch.nn.Sequential(torch.nn.ReLU()), 1)


def test_mve_needs_two_outputs_per_task():
    with pytest.raises(ValueError, match="outputs_per_task"):
        GraphPropertyModule(_net(), objective=Objective(loss="mve"))
    module = GraphPropertyModule(_net(outputs_per_task=2), objective=Objective(loss="mve"))
    assert module.num_labels == 2 and module.num_outputs == 4
    mean, var = module.mean_and_variance(_batch())
    assert mean.shape == var.shape == (len(SMILES), 2) and bool((var > 0).all())


# -------------------------------------------------------------------------------- command line
def test_fit_ensemble_mve_then_predict_with_intervals(tmp_path, capsys):
    from tests.test_cli import write_config

    config, runs = write_config(tmp_path, max_epochs=2)
    main(["fit", "--config", config, "--ensemble_size", "2", "--model.init_args.objective.loss", "mve"])
    out = capsys.readouterr().out
    assert "Test coverage of the 95% intervals" in out and "Test NLL (Gaussian" in out
    run = runs / "version_0"
    table = pd.read_csv(run / "test_predictions.csv")
    assert {"target_std", "target_lower", "target_upper"} <= set(table.columns)
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    assert ckpt["hyper_parameters"]["ensemble_size"] == 2
    assert ckpt["hyper_parameters"]["model"]["init_args"]["outputs_per_task"] == 2
    assert torch.isfinite(ckpt["state_dict"]["interval_factor"]).all()  # calibrated
    output = tmp_path / "pred.csv"
    main(["predict", "--ckpt_path", str(run / "checkpoints" / "last.ckpt"),
          "--smiles", "CCO", "xx", "CCN",
          "--output", str(output)])
    pred = pd.read_csv(output)
    assert pred.columns.tolist()[:6] == ["row", "smiles", "target_pred", "target_std",
                                         "target_lower", "target_upper"]
    ok = pred["error"].isna()
    assert ok.tolist() == [True, False, True]
    assert (pred.loc[ok, "target_lower"] < pred.loc[ok, "target_pred"]).all()
    assert (pred.loc[ok, "target_pred"] < pred.loc[ok, "target_upper"]).all()
    # the test report's rows agree with predicting the same molecules
    module = GraphPropertyModule.load_from_checkpoint(str(run / "checkpoints" / "last.ckpt"))
    assert len(module.members) == 2


def test_a_single_network_writes_no_per_molecule_std(tmp_path, capsys):
    """One plain network has no per-molecule uncertainty (its calibrated std would be the
    validation RMSE on every row): no ``target_std`` column, no Spearman line, a line saying what
    to pass for one; its conformal interval is kept, of one half-width ``q * target_std``."""
    from tests.test_cli import write_config

    config, runs = write_config(tmp_path, max_epochs=2)
    main(["fit", "--config", config])
    out = capsys.readouterr().out
    assert "Spearman" not in out and "n/a" not in out
    assert ("Test per-molecule uncertainty: none (a single network" in out
            and "--ensemble_size 5" in out and "--model.init_args.objective.loss mve" in out)
    assert "Test coverage of the 95% intervals" in out
    run = runs / "version_0"
    best = run / "checkpoints" / "best.ckpt"  # the one tested (--test_checkpoint best)
    ckpt = torch.load(best, weights_only=True)
    state = ckpt["state_dict"]
    half = float(state["interval_factor"][0] * state["target_std"][0])  # sigma = 1 std. unit
    # the prediction is the blend with the classical model: its interval is its own conformal
    # factor times the network's half-width (tests/test_blend.py)
    half *= float(ckpt["callbacks"]["ClassicalBaseline"]["blend_calibration"][1, 0])
    tested = pd.read_csv(run / "test_predictions.csv")
    assert "target_std" not in tested.columns
    np.testing.assert_allclose(tested["target_upper"] - tested["target_pred"], half, rtol=1e-4)
    np.testing.assert_allclose(tested["target_pred"] - tested["target_lower"], half, rtol=1e-4)
    output = tmp_path / "pred.csv"
    main(["predict", "--ckpt_path", str(best), "--smiles", "CCO", "CCN", "--output", str(output)])
    pred = pd.read_csv(output)
    assert pred.columns.tolist()[:5] == ["row", "smiles", "target_pred", "target_lower",
                                         "target_upper"]
    assert "target_std" not in pred.columns
    np.testing.assert_allclose(pred["target_upper"] - pred["target_pred"], half, rtol=1e-4)
    module = GraphPropertyModule.load_from_checkpoint(str(best))
    assert not module.per_molecule_uncertainty


def test_ensemble_gradients_are_clipped_per_member():
    from types import SimpleNamespace

    from graph_urpe.models.optim import configure_gradient_clipping

    torch.manual_seed(0)
    big, small = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    for p in big.parameters():
        p.grad = torch.randn_like(p) * 10
    for p in small.parameters():
        p.grad = torch.randn_like(p) * 0.01
    before = {id(p): p.grad.clone() for m in (big, small) for p in m.parameters()}
    norm_big = math.sqrt(sum(float((p.grad ** 2).sum()) for p in big.parameters()))
    module = SimpleNamespace(trainer=SimpleNamespace(precision_plugin=None))
    optimizer = torch.optim.SGD([*big.parameters(), *small.parameters()], lr=0.1)
    configure_gradient_clipping(module, optimizer, 1.0, "norm",
                                [list(big.parameters()), list(small.parameters())])
    for p in big.parameters():  # scaled to norm 1 on its own
        torch.testing.assert_close(p.grad, before[id(p)] / norm_big, rtol=1e-5, atol=1e-7)
    for p in small.parameters():  # under the threshold alone: untouched (a total norm would not)
        torch.testing.assert_close(p.grad, before[id(p)])


def test_ensemble_classifier_collects_probability_spread():
    torch.manual_seed(0)
    module = GraphPropertyModule(_net(), record=ModelRecord(task="classification"), ensemble_size=3)
    module.eval()
    batch = _batch()
    with torch.no_grad():
        rows = module._eval_rows(batch)
        probs = torch.stack([torch.sigmoid(net(batch)) for net in module.members])
        out = module.predict_step(batch, 0)
    mean = probs.mean(0)
    torch.testing.assert_close(torch.sigmoid(rows[:, :2]), mean)
    torch.testing.assert_close(rows[:, 2:], ((probs - mean) ** 2).mean(0))
    torch.testing.assert_close(out["prediction"], mean)
    torch.testing.assert_close(out["std"], ((probs - mean) ** 2).mean(0).sqrt())
