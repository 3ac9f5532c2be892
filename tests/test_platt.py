"""Platt scaling of classification probabilities (``platt_scaling``), fitted on the validation
split: against scikit-learn's unpenalised logistic regression on a synthetic problem whose true
calibration is known, the validation log loss never worse, and the module's test outputs and
predictions calibrated with the fitted buffers."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss, roc_auc_score
from torch_geometric.data import Batch

from graph_urpe.data.featurize import smiles_to_graph
from graph_urpe.models.calibration import fit_platt, platt_targets
from graph_urpe.models.objective import Objective
from graph_urpe.transforms import AddShortestPathDistance
from tests.test_models_graph import SMILES, datamodule, module, trainer


def synthetic(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Overconfident logits: the labels follow sigmoid((z - 2) / 2), the model says sigmoid(z)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0.0, 3.0, size=n)
    y = (rng.random(n) < 1 / (1 + np.exp(-(0.5 * z - 1.0)))).astype(float)
    return torch.tensor(z)[:, None], torch.tensor(y)[:, None]


def test_platt_recovers_the_true_calibration_as_logistic_regression_does():
    z, y = synthetic(20_000, 0)
    scale, bias = fit_platt(z, y)
    # Platt's targets t, by hand; soft labels as scikit-learn's sample weights: each molecule
    # once as a positive (weight t) and once as a negative (weight 1 - t).
    positives = float(y.sum())
    t = np.where(y.numpy().ravel() == 1, (positives + 1) / (positives + 2),
                 1 / (len(y) - positives + 2))
    assert np.allclose(platt_targets(y).numpy().ravel(), t)
    reference = LogisticRegression(penalty=None, tol=1e-10, max_iter=1000).fit(
        np.concatenate([z.numpy(), z.numpy()]), np.r_[np.ones(len(t)), np.zeros(len(t))],
        sample_weight=np.r_[t, 1 - t])
    assert float(scale[0]) == pytest.approx(reference.coef_[0, 0], abs=1e-4)
    assert float(bias[0]) == pytest.approx(reference.intercept_[0], abs=1e-4)
    assert float(scale[0]) == pytest.approx(0.5, abs=0.03)  # the truth, within sampling error
    assert float(bias[0]) == pytest.approx(-1.0, abs=0.06)
    raw = torch.sigmoid(z).numpy().ravel()
    calibrated = torch.sigmoid(scale * z + bias).numpy().ravel()
    # On fresh molecules of the same kind (a "test split") the log loss drops too, and the
    # order of the probabilities (ROC-AUC) is the same.
    zt, yt = synthetic(20_000, 1)
    test_raw, test_cal = torch.sigmoid(zt).numpy().ravel(), \
        torch.sigmoid(scale * zt + bias).numpy().ravel()
    assert log_loss(y.ravel(), calibrated) < log_loss(y.ravel(), raw) - 0.1
    assert log_loss(yt.ravel(), test_cal) < log_loss(yt.ravel(), test_raw) - 0.1
    assert roc_auc_score(yt.ravel(), test_cal) == pytest.approx(roc_auc_score(yt.ravel(),
                                                                              test_raw))


def test_validation_log_loss_never_gets_worse_and_one_class_stays_uncalibrated():
    rng = np.random.default_rng(3)
    for seed in range(5):  # small, noisy validation splits, also anti-correlated logits
        z, y = synthetic(12, seed)
        if seed % 2:
            z = -z
        scale, bias = fit_platt(z, y)
        if y.min() == y.max():
            continue
        assert float(scale[0]) > 0  # the order is kept
        before = torch.nn.functional.binary_cross_entropy_with_logits(z, y)
        after = torch.nn.functional.binary_cross_entropy_with_logits(scale * z + bias, y)
        assert float(after) <= float(before) + 1e-12
    two = torch.tensor(rng.normal(size=(6, 2)))
    labels = torch.tensor([[0.0, 1.0], [1.0, 1.0], [0.0, float("nan")]] * 2)
    with torch.inference_mode():  # as at the end of a validation
        scale, bias = fit_platt(two, labels)
    assert torch.isfinite(scale[0]) and torch.isnan(scale[1]) and torch.isnan(bias[1])


def test_module_calibrates_on_validation_and_uses_it_for_test_and_predict(tmp_path, one_thread):
    torch.manual_seed(0)
    model = module("classification", objective=Objective(platt_scaling=True))
    dm = datamodule(tmp_path, task="classification")
    t = trainer(tmp_path, max_epochs=2)
    t.fit(model, dm)
    assert torch.isfinite(model.platt_scale).all() and float(model.platt_scale[0]) > 0
    t.test(model, dm, verbose=False)
    ids, pred, _ = model.test_outputs
    model.eval()
    with torch.no_grad():
        batches = list(dm.test_dataloader())
        raw = torch.cat([model(b).float() for b in batches])
        order = torch.cat([b.sample_id for b in batches]).argsort()
        expected = raw[order] * model.platt_scale + model.platt_bias
        torch.testing.assert_close(pred[ids.argsort()], expected)  # calibrated logits
        probabilities = torch.cat([model.predict_values(b) for b in batches])[order]
        torch.testing.assert_close(probabilities, torch.sigmoid(expected))
    # The validation log loss of the fitted buffers is not above the raw logits'.
    vbatch = Batch.from_data_list([AddShortestPathDistance()(smiles_to_graph(SMILES[i], "zinc"))
                                   for i in (10, 11, 12)])  # the validation rows
    labels = torch.tensor([[1.0], [0.0], [1.0]])  # len(smiles) > 5 (tests.test_models_graph)
    with torch.no_grad():
        logits = model(vbatch).float()
    bce = torch.nn.functional.binary_cross_entropy_with_logits
    assert float(bce(model.platt_logits(logits), labels)) <= float(bce(logits, labels)) + 1e-6

    # A validation split the logits separate: Platt's targets keep the fit finite.
    scale, bias = fit_platt(torch.tensor([[-3.0], [-1.0], [2.0], [4.0]]),
                            torch.tensor([[0.0], [0.0], [1.0], [1.0]]))
    assert 0 < float(scale[0]) < 10 and abs(float(bias[0])) < 10

    with pytest.raises(ValueError, match="platt_scaling calibrates the probabilities of binary"):
        module("regression", objective=Objective(platt_scaling=True))
