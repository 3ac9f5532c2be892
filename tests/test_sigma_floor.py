"""The floor of a raw standard deviation (``fit_sigma_floor``), fitted on the validation rows by
the Gaussian likelihood, and checkpoints written before it (issue 41: ``--ensemble_size 2``)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import norm

from graph_urpe.models.calibration import FLOOR_GRID, fit_calibration, fit_sigma_floor
from graph_urpe.models.graph import GraphPropertyModule
from tests.test_trust import checkpoint, hparams, state_dict


def _nll_by_hand(err, sd, tau):
    """The validation NLL (labels' units, scipy) under the z-scaled variance s^2 (sd^2 + tau^2),
    s at its maximum-likelihood value."""
    eff = np.sqrt(sd ** 2 + tau ** 2)
    s = math.sqrt(np.mean((err / eff) ** 2))
    return -np.mean(norm.logpdf(err, scale=s * eff))


def test_a_constant_sigma_keeps_no_floor():
    rng = np.random.default_rng(0)
    y = torch.tensor(rng.normal(size=(50, 2)))
    floor = fit_sigma_floor(torch.zeros(50, 2), torch.ones(50, 2), y)
    assert floor.tolist() == [0.0, 0.0]  # a plain network: its calibration as before


def test_two_members_agreeing_by_chance_get_the_floor_the_likelihood_picks():
    # Errors of spread 1; the "spread" of a 2-member ensemble is |a - b| / 2 of two draws: near 0
    # on some rows by chance, unrelated to the error there.
    rng = np.random.default_rng(1)
    n = 400
    err = rng.normal(size=n)
    sd = np.abs(rng.normal(size=n) - rng.normal(size=n)) / 2
    sd[0], err[0] = 1e-6, 2.0  # the row that blows up z-scaling
    mean, target = torch.zeros(n, 1), torch.tensor(err)[:, None]
    sigma = torch.tensor(sd)[:, None]
    tau = fit_sigma_floor(mean, sigma, target).item()
    # By hand: the grid's best NLL (scipy's log-density), 0 included.
    lower_median = np.sort(sd)[(n - 1) // 2]  # torch's median: the lower middle value
    grid = [0.0, *(lower_median * FLOOR_GRID.numpy()).tolist()]
    nlls = [_nll_by_hand(err, sd, t) for t in grid]
    assert tau == pytest.approx(grid[int(np.argmin(nlls))], rel=1e-6) and tau > 0
    # Without the floor, z-scaling is set by the one row; with it, s is near the truth's.
    raw_scale, _ = fit_calibration(mean, sigma, target)
    scale, q = fit_calibration(mean, (sigma.square() + tau ** 2).sqrt(), target)
    assert raw_scale.item() > 50 * scale.item()
    eff = np.sqrt(sd ** 2 + tau ** 2)
    z = np.sort(np.abs(err / eff))
    assert q.item() == pytest.approx(z[math.ceil((n + 1) * 0.95) - 1], rel=1e-6)


def test_a_checkpoint_written_before_the_floor_loads_with_none(tmp_path):
    old = {k: v for k, v in state_dict().items() if k != "sigma_floor"}
    module = GraphPropertyModule.load_from_checkpoint(checkpoint(tmp_path / "o.ckpt", hparams(),
                                                                 old))
    assert module.sigma_floor.tolist() == [0.0]
    older = {k: v for k, v in old.items() if k not in ("uncertainty_scale", "interval_factor")}
    module = GraphPropertyModule.load_from_checkpoint(checkpoint(tmp_path / "p.ckpt", hparams(),
                                                                 older))
    assert math.isnan(module.uncertainty_scale.item())  # uncalibrated, as it was written
    # With the floor in use: std and interval from sqrt(var + tau^2).
    module.sigma_floor.fill_(0.5)
    module.uncertainty_scale.fill_(2.0)
    module.interval_factor.fill_(3.0)
    std, lower, upper = module.calibrated(torch.zeros(1, 1), torch.full((1, 1), 0.75))
    assert std.item() == pytest.approx(2.0)  # 2 * sqrt(0.75 + 0.25)
    assert (lower.item(), upper.item()) == pytest.approx((-3.0, 3.0))


def test_the_summary_names_a_fitted_floor():
    from types import SimpleNamespace

    from graph_urpe.cli.summary_lines import sigma_floor_line

    def module(floor, per_molecule=True):
        return SimpleNamespace(sigma_floor=torch.tensor(floor), target_names=["logd", "pka"],
                               per_molecule_uncertainty=per_molecule)

    line = sigma_floor_line(module([1.65, 0.0]))
    assert line.startswith("Std floor fitted on the validation rows (labels' units): logd 1.65, "
                           "pka 0:")
    assert sigma_floor_line(module([0.0, 0.0])) is None  # no floor: nothing to say
    assert sigma_floor_line(module([1.0, 1.0], per_molecule=False)) is None  # no spread at all
