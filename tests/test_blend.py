"""The blend of the network and the classical model (issue 41 item 2,
graph_urpe/models/blend.py): the weight chosen on validation rows as far as their resamples agree
by hand, the fit's blend scores and predict's ``<target>_pred`` (the blend) and its conformal
interval recomputed from the written predictions, a changed weight refused, and the
one-standard-error choice of C
(graph_urpe/models/classical.py)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
import torch
from test_classical import _fit

from graph_urpe import Predictor
from graph_urpe.cli import main
from graph_urpe.data.fingerprints import ecfp4
from graph_urpe.models.blend import (
    BOOTSTRAP_DRAWS,
    NO_EVIDENCE_WEIGHT,
    bagged_weight,
    blend,
    blend_weights,
    blended_outputs,
    fit_blend_calibration,
    validation_weight,
)
from graph_urpe.models.classical import ClassicalModel, one_standard_error_index

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_weight_follows_the_validation_rows_as_far_as_they_agree():
    assert (NO_EVIDENCE_WEIGHT, BOOTSTRAP_DRAWS) == (0.5, 200)
    empty = np.zeros(0)
    # no validation row: the network 0.5, the members share the rest
    np.testing.assert_array_equal(bagged_weight(empty, empty, empty, "regression"), [0.5, 0.5])
    np.testing.assert_array_equal(bagged_weight(empty, np.zeros((0, 2)), empty,
                                                "classification"), [0.5, 0.25, 0.25])
    # one-sided rows: the network exact, the classical model 2 off: every resample picks w = 1
    y = np.linspace(0.0, 1.0, 40)
    np.testing.assert_array_equal(bagged_weight(y, y + 2.0, y, "regression"), [1.0, 0.0])
    np.testing.assert_array_equal(bagged_weight(y + 2.0, y, y, "regression"), [0.0, 1.0])
    # two members, the second exact: all weight on it
    np.testing.assert_array_equal(bagged_weight(y + 2.0, np.stack([y - 1.0, y], 1), y,
                                                "regression"), [0.0, 0.0, 1.0])
    # split rows: each model exact on half of them, wrong by the same on the other half; the
    # minimiser is the share of rows where the network is right, so the resampled picks
    # scatter around 0.5 and their mean stays near it (w_val on all rows: exactly 0.5)
    net = np.where(np.arange(40) % 2 == 0, y, y + 1.0)
    svm = np.where(np.arange(40) % 2 == 0, y + 1.0, y)
    np.testing.assert_array_equal(validation_weight(net, svm, y, "regression"), [0.5, 0.5])
    assert 0.4 < bagged_weight(net, svm, y, "regression")[0] < 0.6
    target = np.linspace(0.0, 3.0, 8)
    # network errs +1, classical -3: the blend's error 4 w - 3 vanishes at w = 0.75
    assert validation_weight(target + 1, target - 3, target, "regression")[0] == 0.75
    assert validation_weight(target, target + 1, target, "regression")[0] == 1.0
    # network +2, SVM -2, forest +1 / -1 on alternate rows: the MSE (2 w0 - 2 w1)^2 + w2^2
    # vanishes only at (0.5, 0.5, 0)
    side = np.where(np.arange(8) % 2 == 0, 1.0, -1.0)
    np.testing.assert_array_equal(validation_weight(
        target + 2, np.stack([target - 2, target + side], 1), target, "regression"),
        [0.5, 0.5, 0.0])
    # log-loss -log(0.3 + 0.6 w) - log(0.8 - 0.4 w): derivative 0 at w = 0.75
    y, net, svm = np.array([1.0, 0.0]), np.array([0.9, 0.6]), np.array([0.3, 0.2])
    assert validation_weight(net, svm, y, "classification")[0] == 0.75
    # three columns: the one above (8 rows), one without a classical model, one unlabelled
    labels = np.stack([target, target, np.full(8, np.nan)], 1)
    network = np.stack([target + 1, target, target], 1)
    classical = np.stack([target - 3, np.full(8, np.nan), target], 1)[..., None]
    weight = blend_weights(network, classical, labels, "regression")
    by_hand = _by_hand_weight(target + 1, [target - 3], target, lambda t, q: np.mean((t - q) ** 2))
    np.testing.assert_allclose(weight, [[by_hand, 1 - by_hand], [1.0, 0.0], [0.5, 0.5]])
    empty = np.zeros((0, 2))  # no validation row: 0.5, or 1 without a classical model
    np.testing.assert_array_equal(blend_weights(empty, empty[..., None], empty, "regression",
                                                np.array([True, False])), [[0.5, 0.5], [1, 0]])
    mixed = blend(network, classical, weight)
    np.testing.assert_allclose(mixed[:, 0], weight[0, 0] * (target + 1) + weight[0, 1]
                               * (target - 3))
    np.testing.assert_array_equal(mixed[:, 1], target)  # w = 1: the network, NaN ignored
    np.testing.assert_allclose(mixed[:, 2], target)


def test_one_standard_error_rule_on_a_hand_made_cv_table():
    # 4 candidates (C increasing) x 5 folds of ROC-AUC; the best mean is candidate 2 (0.908),
    # its fold scores have sample std 0.01643 -> standard error 0.01643 / sqrt(5) = 0.00735
    folds = np.array([[0.85, 0.86, 0.87, 0.88, 0.87],    # mean 0.866
                      [0.89, 0.91, 0.90, 0.92, 0.90],    # mean 0.904 >= 0.908 - 0.00735
                      [0.89, 0.92, 0.90, 0.93, 0.90],    # mean 0.908, the best
                      [0.88, 0.91, 0.90, 0.93, 0.90]]).T  # mean 0.904
    table = {f"split{k}_test_score": folds[k] for k in range(5)}
    table["mean_test_score"] = folds.mean(0)
    best = folds[:, 2]
    error = np.sqrt(((best - best.mean()) ** 2).sum() / 4) / np.sqrt(5)
    assert error == pytest.approx(0.00735, abs=1e-5)
    assert one_standard_error_index(table) == 1  # the most regularised within one SE
    tight = {k: np.where(np.arange(4) == 2, v + 0.01, v) if k.startswith("split") else v
             for k, v in table.items()}  # candidate 2 (0.918) ahead by 0.014 > its SE: itself
    assert one_standard_error_index(tight) == 2
    with pytest.raises(ValueError, match="2 or more folds"):
        one_standard_error_index({"split0_test_score": folds[0]})


def _summary_weight(out: str, metric: str) -> tuple[float, float]:
    """The blend's value and network weight from the summary line ``Test MAE: 0.48 (prediction:
    blend, network weight 0.07) | 0.65 (network) | 0.47 (ECFP4 Tanimoto SVR)``."""
    line = next(x for x in out.splitlines() if x.startswith(f"Test {metric}:"))
    found = re.search(r": (\d\.\d{4}) \(prediction: blend, network weight (\d\.\d\d)\) \| \d\.\d{4} "
                      r"\(network\) \| \d\.\d{4} \(ECFP4 Tanimoto SVR\)$", line)
    assert found, line
    return float(found.group(1)), float(found.group(2))


def _summary_weights(out: str, metric: str) -> tuple[float, list[float]]:
    """The blend's value and its three weights from the summary line of a classification fit,
    ``Test ROC-AUC: 0.85 (prediction: blend of network 0.30, SVM 0.25, forest 0.45) | 0.81
    (network) | 0.83 (ECFP4 Tanimoto SVC) | 0.86 (ECFP4 random forest)``."""
    line = next(x for x in out.splitlines() if x.startswith(f"Test {metric}:"))
    found = re.search(r": (\d\.\d{4}) \(prediction: blend of network (\d\.\d\d), SVM (\d\.\d\d), "
                      r"forest (\d\.\d\d)\) \| \d\.\d{4} \(network\) \| \d\.\d{4} \(ECFP4 Tanimoto "
                      r"SVC\) \| \d\.\d{4} \(ECFP4 random forest\)$", line)
    assert found, line
    return float(found.group(1)), [float(found.group(k)) for k in (2, 3, 4)]


def _network_only(path, tmp_path) -> Predictor:
    """The checkpoint without its blend (a state written before the blend existed): predict
    writes the network's own prediction and interval as ``<target>_pred``, ``_lower``,
    ``_upper``."""
    ckpt = torch.load(path, weights_only=True)
    state = ckpt["callbacks"]["ClassicalBaseline"]
    for key in ("blend_weight", "blend_calibration"):
        state.pop(key, None)
    torch.save(ckpt, tmp_path / "network_only.ckpt")
    return Predictor.from_checkpoint(str(tmp_path / "network_only.ckpt"))


def _conformal_by_hand(residual: np.ndarray, half: np.ndarray) -> tuple[float, float]:
    """z-scaling factor and split-conformal factor of ``|residual| / half``, written out: the
    root mean square, and the ceil((n + 1) 0.95)-th smallest (1-based) of the n ratios."""
    z = sorted(abs(r) / h for r, h in zip(residual, half))
    n = len(z)
    k = min(-(-(n + 1) * 95 // 100), n)
    return float(np.sqrt(np.mean(np.square(z)))), float(z[k - 1])


def _by_hand_weight(network, members, target, loss):
    """The grid of weights in steps of 0.05 summing to 1 (the network's ascending, then the
    first member's), its minimiser on each of 200 bootstrap resamples of the rows (the seeded
    draws blend.py makes), and their mean, written out here as loops: the network's weight
    (one member) or the weights ``[network, SVM, forest]`` (two)."""
    steps = [i / 20 for i in range(21)]
    if len(members) == 1:
        grid = [(w, 1 - w) for w in steps]
    else:
        grid = [(a, b, 1 - a - b) for a in steps for b in steps if a + b <= 1 + 1e-12]
    n = len(target)
    draws = np.random.default_rng(0).integers(0, n, size=(200, n))
    picks = []
    for idx in draws:
        losses = [loss(target[idx], w[0] * network[idx] + sum(
            wk * m[idx] for wk, m in zip(w[1:], members))) for w in grid]
        picks.append(grid[int(np.argmin(losses))])
    mean = np.mean(picks, axis=0)
    return float(mean[0]) if len(members) == 1 else mean


def test_regression_blend_recomputed_from_the_written_predictions(tmp_path, capsys,
                                                                  monkeypatch):
    """The blend is predict's ``target_pred``: its weight and its conformal interval by hand
    from the checkpoint's own validation predictions (the network's, from the same checkpoint
    without the blend), its test MAE and coverage from ``test_predictions.csv``."""
    monkeypatch.chdir(tmp_path)
    run, frame = _fit(tmp_path, "regression", "--trainer.max_epochs", "2")
    out = capsys.readouterr().out
    metrics = pd.read_csv(run / "metrics.csv")
    blend_mae, shown_w = _summary_weight(out, "MAE")
    assert metrics["test/mae_blend"].dropna().tolist() == [pytest.approx(blend_mae, abs=5e-5)]
    assert metrics["val/rmse_blend"].notna().sum() == 1
    valid = frame[frame["split"] == "valid"]
    weights = {}
    for name in ("best", "last"):  # last: the second epoch's (best: whichever scored best)
        path = str(run / "checkpoints" / f"{name}.ckpt")
        ckpt = torch.load(path, weights_only=True)
        stored = ckpt["callbacks"]["ClassicalBaseline"]["blend_weight"]
        factors = ckpt["callbacks"]["ClassicalBaseline"]["blend_calibration"]
        assert stored.dtype == factors.dtype == torch.float64 and stored.shape == (1, 2)
        assert factors.shape == (2, 1) and name == "best" or ckpt["epoch"] == 1
        # the weight, by hand from the checkpoint's own validation predictions (predict's
        # columns: the network's and the classical model's)
        table = Predictor.from_checkpoint(path).predict(valid["smiles"].tolist())
        network = _network_only(path, tmp_path).predict(valid["smiles"].tolist())
        np.testing.assert_array_equal(table["target_network"], network["target_pred"])
        w = _by_hand_weight(table["target_network"].to_numpy(),
                            [table["target_ecfp_svm"].to_numpy()], valid["target"].to_numpy(),
                            lambda y, p: np.mean((y - p) ** 2))
        assert float(stored[0, 0]) == pytest.approx(w, abs=1e-9)
        assert float(stored[0, 1]) == pytest.approx(1 - w, abs=1e-9)
        mixed = w * table["target_network"] + (1 - w) * table["target_ecfp_svm"]
        np.testing.assert_allclose(table["target_pred"], mixed, rtol=1e-6)
        # its interval: the conformal factor of |y - blend| / (the network's half-width)
        half = (network["target_upper"] - network["target_lower"]).to_numpy() / 2
        scale, factor = _conformal_by_hand(valid["target"].to_numpy() - mixed.to_numpy(), half)
        np.testing.assert_allclose(factors[:, 0].numpy(), [scale, factor], rtol=1e-5)
        np.testing.assert_allclose(table["target_upper"] - table["target_pred"], factor * half,
                                   rtol=1e-5)
        np.testing.assert_allclose(table["target_pred"] - table["target_lower"], factor * half,
                                   rtol=1e-5)
        weights[name] = w
    w = weights["best"]  # the tested checkpoint's, in the summary
    assert shown_w == round(w, 2)
    state = torch.load(run / "checkpoints" / "best.ckpt",
                       weights_only=True)["callbacks"]["ClassicalBaseline"]
    # the test MAE and coverage of the blend from test_predictions.csv and the stored model
    test = pd.read_csv(run / "test_predictions.csv")
    model = ClassicalModel.from_state(state, num_tasks=1)
    assert model.members == ("svm",)  # regression: no forest
    svm = model.predict(ecfp4(test["smiles"].tolist()))[:, 0, 0]
    mae = np.abs(w * test["target_network"] + (1 - w) * svm - test["target"]).mean()
    assert metrics["test/mae_blend"].dropna().iloc[0] == pytest.approx(mae, rel=1e-5)
    inside = (test["target_lower"] <= test["target"]) & (test["target"] <= test["target_upper"])
    assert metrics["test/coverage95_blend"].dropna().iloc[0] == pytest.approx(inside.mean())
    assert f"{metrics['test/coverage95_blend'].dropna().iloc[0]:.4f} (prediction: blend" in out
    # test_predictions.csv carries predict's columns for the tested checkpoint: what
    # `graph-urpe predict` writes for the same molecules
    main(["predict", "--ckpt_path", str(run / "checkpoints" / "best.ckpt"), "--smiles",
          *test["smiles"], "--output", str(tmp_path / "test_smiles.csv")])
    predicted = pd.read_csv(tmp_path / "test_smiles.csv")
    assert list(test.columns) == ["row", "smiles", "target", "target_pred", "target_lower",
                                  "target_upper", "target_network", "target_ecfp_svm",
                                  "nearest_train_similarity", "nearest_train_row"]
    for column in ("target_ecfp_svm", "nearest_train_similarity", "nearest_train_row"):
        pd.testing.assert_series_equal(test[column], predicted[column])
    np.testing.assert_array_equal(test["target_ecfp_svm"], svm)
    # the same blend and interval (float32 network outputs: batches differ from predict's)
    for column in ("target_pred", "target_lower", "target_upper", "target_network"):
        np.testing.assert_allclose(test[column], predicted[column], rtol=1e-5)
    np.testing.assert_allclose(test["target_pred"],  # target_network: a float32, as written
                               w * test["target_network"] + (1 - w) * svm, rtol=1e-6)


def test_classification_pools_standardised_logits(tmp_path, capsys, monkeypatch):
    from sklearn.metrics import roc_auc_score

    from graph_urpe.models.logit_pool import fit_pool

    monkeypatch.chdir(tmp_path)
    run, frame = _fit(tmp_path, "classification", "--model.init_args.objective.platt_scaling",
                      "true", "--test_checkpoint", "soup", "--trainer.max_epochs", "3")
    out = capsys.readouterr().out
    _, shown = _summary_weights(out, "ROC-AUC")
    best = str(run / "checkpoints" / "soup.ckpt")  # the tested one
    state = torch.load(best, weights_only=True)["callbacks"]["ClassicalBaseline"]
    valid = frame[frame["split"] == "valid"]
    predictor = Predictor.from_checkpoint(best)
    table = predictor.predict(valid["smiles"].tolist())
    members = ("target_ecfp_svm", "target_ecfp_rf")
    # the stored pool is the one the checkpoint's own validation predictions give
    weight, factors = fit_pool(table[["target_network"]].to_numpy(),
                               table[list(members)].to_numpy()[:, None, :],
                               valid[["target"]].to_numpy(np.float64))
    assert state["blend_weight"].shape == (1, 3) and state["blend_calibration"].shape == (8, 1)
    np.testing.assert_allclose(state["blend_weight"].numpy(), weight, atol=1e-6)
    np.testing.assert_allclose(state["blend_calibration"].numpy()[:6], factors[:6], rtol=1e-4)
    # Platt's a, b: L-BFGS from predictions equal to float32 rounding, to its tolerance
    np.testing.assert_allclose(state["blend_calibration"].numpy()[6:], factors[6:], atol=2e-3)
    assert shown == [round(x, 2) for x in weight[0]]
    test = pd.read_csv(run / "test_predictions.csv")
    table = predictor.predict(test["smiles"].tolist())
    # the test scored the pool the checkpoint stored, as predict does: from the test rows' own
    # network and members exactly, and predict's within the network's float32 round-off (other
    # batches) through the pool (this short fit's network logits vary little: z magnifies it)
    f = state["blend_calibration"][:, 0].numpy()
    w = state["blend_weight"][0].numpy()

    def by_hand(frame):
        p = np.clip(frame[["target_network", *members]].to_numpy(), 1e-12, 1 - 1e-12)
        z = (np.log(p / (1 - p)) - f[:3]) / f[3:6]
        return 1 / (1 + np.exp(-(f[6] * z @ w + f[7])))

    np.testing.assert_allclose(test["target_pred"], by_hand(test), rtol=1e-12)
    np.testing.assert_allclose(table["target_network"], test["target_network"], atol=1e-7)
    np.testing.assert_allclose(table["target_pred"], test["target_pred"], atol=1e-4)
    # predict's probability by hand: Platt's sigmoid of the weighted standardised logits
    mixed = table["target_pred"].to_numpy()
    np.testing.assert_allclose(mixed, by_hand(table), rtol=1e-9)
    assert ((mixed >= 0) & (mixed <= 1)).all()
    rocauc = pd.read_csv(run / "metrics.csv")["test/rocauc_blend"].dropna()
    assert rocauc.tolist() == [pytest.approx(roc_auc_score(test["target"], mixed), rel=1e-5)]


def test_a_state_without_a_weight_still_predicts_without_the_blend(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run, _ = _fit(tmp_path, "regression", "--test_after_fit", "false")
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    state = ckpt["callbacks"]["ClassicalBaseline"]
    for key in ("blend_weight", "blend_calibration"):  # a state written before the blend
        del state[key]
    torch.save(ckpt, tmp_path / "old.ckpt")
    table = Predictor.from_checkpoint(str(tmp_path / "old.ckpt")).predict(["CCO", "CCCN"])
    assert "target_ecfp_svm" in table.columns and "target_network" not in table.columns
    # written with a weight but before the blend had its own interval: the network's
    # half-width around the blend
    state["blend_weight"] = torch.tensor([0.5], dtype=torch.float64)
    torch.save(ckpt, tmp_path / "weight_only.ckpt")
    mixed = Predictor.from_checkpoint(str(tmp_path / "weight_only.ckpt")).predict(["CCO", "CCCN"])
    np.testing.assert_allclose(mixed["target_pred"], 0.5 * (table["target_pred"]
                                                            + table["target_ecfp_svm"]))
    np.testing.assert_allclose(mixed["target_upper"] - mixed["target_lower"],
                               table["target_upper"] - table["target_lower"], rtol=1e-6)


def test_a_column_without_a_classical_model_keeps_the_network(tmp_path, capsys, monkeypatch,
                                                              caplog):
    import logging

    from test_classical import MOLECULES, RANK_ZERO
    from test_cli import write_config

    monkeypatch.chdir(tmp_path)
    caplog.set_level(logging.INFO, logger=RANK_ZERO)
    config, runs = write_config(tmp_path, max_epochs=1, task="classification")
    frame = pd.DataFrame({"smiles": MOLECULES})
    frame["a"] = [float(len(s) > 4) for s in frame["smiles"]]
    frame["b"] = np.where(np.arange(len(frame)) < 30, 0.0, frame["a"])  # one class in training
    frame["split"] = ["train"] * 30 + ["valid"] * 6 + ["test"] * (len(frame) - 36)
    frame.to_csv(tmp_path / "mols.csv", index=False)
    main(["fit", "--config", config, "--data.init_args.target_columns", "[a, b]"])
    out = capsys.readouterr().out
    best = str(runs / "version_0" / "checkpoints" / "best.ckpt")
    state = torch.load(best, weights_only=True)["callbacks"]["ClassicalBaseline"]
    assert state["tasks"][1]["C"] == 0.0 and state["blend_weight"][1].tolist() == [1, 0, 0]
    assert ("(C = 0.1, 0: 0 is no model, a column whose training labels are all alike)"
            in caplog.text)
    assert state["forests"][1] is None and state["forests"][0] is not None
    assert 0 < float(state["blend_weight"][0, 0]) < 1
    line = next(x for x in out.splitlines() if x.startswith("Test ROC-AUC:"))
    assert " in the first column; network weight of every column " in line
    assert ", 1.00) | " in line
    table = Predictor.from_checkpoint(best).predict(["CCO", "c1ccccc1", "CCCCN"])
    assert table["b_ecfp_svm"].isna().all() and table["b_ecfp_rf"].isna().all()
    np.testing.assert_array_equal(table["b_network"], table["b_pred"])


def test_weight_keeps_the_network_when_no_weight_has_a_finite_loss():
    # errors near float64's limit: every squared error overflows, so nothing can be chosen
    network = np.array([1e200, -1e200, 1e200])
    classical = np.array([-1e200, 1e200, 1.0])
    target = np.array([1e200, -1e200, -1e200])
    np.testing.assert_array_equal(validation_weight(network, classical, target, "regression"),
                                  [1.0, 0.0])
    # rows with a non-finite prediction are left out of the choice, not turned into NaN
    net = np.array([[1.0], [np.inf], [3.0]])
    svm = np.array([[1.0], [2.0], [3.0]])
    y = np.array([[1.0], [2.0], [3.0]])
    w = blend_weights(net, svm[..., None], y, "regression")
    assert w.shape == (1, 2) and 0.0 <= w[0, 0] <= 1.0
    # two finite rows where both models are exact: every weight ties, the smallest wins (0)
    assert w[0, 0] == 0.0


def test_blended_outputs_by_hand():
    """Two columns: one blended (w 0.25, factors s 2 / q 3 of the network's half-width 0.5),
    one without a classical model (w 1: every output the network's); NaN factors keep the
    network's width and std around the blend; a classifier's std scales with w."""
    network = {"prediction": np.array([[1.0, 5.0], [2.0, 6.0]]),
               "std": np.array([[0.2, 0.1], [0.4, 0.1]]),
               "lower": np.array([[0.5, 4.0], [1.5, 5.0]]),
               "upper": np.array([[1.5, 6.0], [2.5, 7.0]])}
    classical = np.array([[3.0, np.nan], [4.0, np.nan]])[..., None]
    weight = np.array([[0.25, 0.75], [1.0, 0.0]])
    out = blended_outputs(network, classical, weight, np.array([[2.0, 9.0], [3.0, 9.0]]))
    np.testing.assert_allclose(out["prediction"], [[2.5, 5.0], [3.5, 6.0]])
    np.testing.assert_allclose(out["lower"], [[1.0, 4.0], [2.0, 5.0]])   # 2.5 - 3 * 0.5
    np.testing.assert_allclose(out["upper"], [[4.0, 6.0], [5.0, 7.0]])
    np.testing.assert_allclose(out["std"], [[1.0, 0.1], [1.0, 0.1]])     # 2 * 0.5
    unknown = blended_outputs(network, classical, weight, np.full((2, 2), np.nan))
    np.testing.assert_allclose(unknown["lower"][:, 0], [2.0, 3.0])      # +- the network's 0.5
    np.testing.assert_allclose(unknown["std"][:, 0], [0.2, 0.4])
    old = blended_outputs(network, classical, weight, None)  # a checkpoint before the factors
    np.testing.assert_allclose(old["upper"], unknown["upper"])
    probability = blended_outputs({"prediction": np.array([[0.8]]), "std": np.array([[0.1]])},
                                  np.array([[[0.4]]]), np.array([[0.5, 0.5]]), None)
    np.testing.assert_allclose(probability["prediction"], [[0.6]])
    np.testing.assert_allclose(probability["std"], [[0.05]])
    factors = fit_blend_calibration(np.array([[1.0], [2.0], [3.0]]),
                                    {"lower": np.array([[0.0], [0.0], [0.0]]),
                                     "upper": np.array([[2.0], [2.0], [4.0]])},
                                    np.array([[1.5], [np.nan], [5.0]]))
    # |z| = 0.5 / 1 and 2 / 2 (the unlabelled row left out): rms sqrt(0.625), n = 2 -> the 2nd
    np.testing.assert_allclose(factors[:, 0], [np.sqrt(0.625), 1.0])
