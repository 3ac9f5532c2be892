"""The classical model of every CSV fit (issue 41): ECFP4 and the Tanimoto kernel against RDKit,
predictions from the stored arrays against scikit-learn's, its scores in the fit summary and
metrics.csv, a changed classical state refused in one line, and predict's columns
(graph_urpe/data/fingerprints.py, graph_urpe/models/classical.py, classical_baseline.py)."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest
import torch
from test_cli import SMILES, write_config

from graph_urpe.cli import main
from graph_urpe.data.fingerprints import ecfp4, pack_bits, tanimoto_kernel, unpack_bits
from graph_urpe.models.applicability import similarity_threshold
from graph_urpe.models.classical import ClassicalModel, fit_task

pytestmark = pytest.mark.usefixtures("one_thread")

RANK_ZERO = "lightning.pytorch.utilities.rank_zero"

MOLECULES = SMILES + ["CCCCO", "c1ccc(O)cc1", "CC(N)C(=O)O", "c1ccc2ccccc2c1", "CCOCC",
                      "OC(=O)c1ccccc1", "CCCCCC", "Clc1ccccc1", "CC(C)(C)O", "NC(=O)N",
                      "c1ccoc1", "c1ccsc1", "CCC(=O)C", "OCC(O)CO", "CN(C)C", "C1CCNCC1",
                      "CCCCN", "c1ccc(N)cc1", "CC(=O)N", "C1CCOC1", "CCCC(=O)O", "c1cnccn1",
                      "CC(C)C", "FC(F)F", "c1ccc(C)cc1C", "OC1CCCCC1"]


def test_tanimoto_kernel_equals_rdkit_bulk_tanimoto():
    from rdkit import Chem, DataStructs
    from rdkit.Chem import rdFingerprintGenerator

    generator = rdFingerprintGenerator.GetMorganGenerator(radius=2, fpSize=2048)
    fps = [generator.GetFingerprint(Chem.MolFromSmiles(s)) for s in MOLECULES]
    bits = ecfp4(MOLECULES)
    assert bits.dtype == np.uint8 and bits.shape == (len(MOLECULES), 2048)
    assert [int(b.sum()) for b in bits] == [f.GetNumOnBits() for f in fps]
    kernel = tanimoto_kernel(bits[:7], bits)
    for i in range(7):
        np.testing.assert_allclose(kernel[i], DataStructs.BulkTanimotoSimilarity(fps[i], fps),
                                   rtol=0, atol=1e-15)
    assert np.array_equal(unpack_bits(pack_bits(bits)), bits)
    assert pack_bits(bits).shape == (len(MOLECULES), 256)
    with pytest.raises(ValueError, match=r"SMILES 1 \('C1CC'\) does not parse"):
        ecfp4(["CCO", "C1CC"])


def _data(task, n=32, seed=0):
    bits = ecfp4(MOLECULES[:n])
    rng = np.random.default_rng(seed)
    size = bits.sum(1).astype(float)
    y = size / 10 + rng.normal(0, 0.1, n) if task == "regression" else \
        (size > np.median(size)).astype(float)
    return bits, y


def test_svr_from_stored_arrays_equals_sklearn_predict():
    from sklearn.svm import SVR

    bits, y = _data("regression")
    labels = np.stack([y, np.where(np.arange(len(y)) % 3 == 0, np.nan, -y)], axis=1)
    model = ClassicalModel.fit(bits, labels, np.arange(len(y)) + 100, "regression")
    stored = ClassicalModel.from_state(model.state_dict(), num_tasks=2)
    query = ecfp4(["CCCO", "c1ccccc1O", "CCN(C)C"])
    got = stored.predict(query)
    assert got.shape == (3, 2, 1) and stored.members == ("svm",)
    got = got[..., 0]
    for t in range(2):
        keep = ~np.isnan(labels[:, t])
        x, target = bits[keep], labels[keep, t]
        mean, std = target.mean(), target.std()
        entry = stored.tasks[t]
        assert entry["C"] in (0.1, 1.0, 10.0, 100.0) and entry["mean"] == pytest.approx(mean)
        svr = SVR(kernel="precomputed", C=entry["C"]).fit(tanimoto_kernel(x, x),
                                                          (target - mean) / std)
        expected = svr.predict(tanimoto_kernel(query, x)) * std + mean
        np.testing.assert_allclose(got[:, t], expected, rtol=1e-10, atol=1e-12)


def test_svc_from_stored_arrays_equals_sklearn_predict_proba():
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.model_selection import StratifiedKFold
    from sklearn.svm import SVC

    bits, y = _data("classification")
    model = ClassicalModel.fit(bits, y[:, None], np.arange(len(y)), "classification", seed=3)
    entry = ClassicalModel.from_state(model.state_dict()).tasks[0]
    query = ecfp4(["CCCO", "c1ccccc1O", "CCN(C)C", "CCCCCCCC"])
    calibrated = CalibratedClassifierCV(
        SVC(kernel="precomputed", C=entry["C"]), method="sigmoid", ensemble=False,
        cv=StratifiedKFold(5, shuffle=True, random_state=3)).fit(tanimoto_kernel(bits, bits), y)
    expected = calibrated.predict_proba(tanimoto_kernel(query, bits))[:, 1]
    np.testing.assert_allclose(model.predict(query)[:, 0, 0], expected, rtol=1e-10, atol=1e-12)
    one_class = fit_task(tanimoto_kernel(bits, bits), np.zeros(len(y)), "classification")
    assert one_class["C"] == 0 and len(one_class["support"]) == 0


def test_threshold_is_where_the_validation_error_rises():
    similarity = np.linspace(0.1, 1.0, 20)
    error = np.where(similarity < 0.35, 3.0, 1.0)  # the 6 least similar rows err 3 times more
    # candidates: the 10th..50th percentiles 0.19, 0.28, 0.37, 0.46, 0.55; mean error below /
    # above: 3 / (26 / 18), 3 / (20 / 16), 3 / 1, (20 / 8) / 1, (22 / 10) / 1: largest at 0.37
    assert similarity_threshold(similarity, error) == pytest.approx(np.percentile(similarity, 30))
    flat = similarity_threshold(similarity, np.ones(20))  # no rise: the smallest similarity
    assert flat == pytest.approx(0.1)
    assert np.isnan(similarity_threshold(similarity[:9], error[:9]))


def _fit(tmp_path, task="regression", *extra):
    config, runs = write_config(tmp_path, max_epochs=1, task=task)
    csv = tmp_path / "mols.csv"
    frame = pd.read_csv(csv)  # a few dozen molecules: 30 train, 6 valid, 6 test
    more = pd.DataFrame({"smiles": MOLECULES[16:]})
    more["target"] = [len(s) / 4.0 if task == "regression" else float(len(s) > 4)
                      for s in more["smiles"]]
    more["split"] = ["train"] * 20 + ["valid"] * 3 + ["test"] * 3
    pd.concat([frame, more]).to_csv(csv, index=False)
    main(["fit", "--config", config, *extra])
    return runs / "version_0", pd.read_csv(csv)


def test_csv_fit_scores_the_classical_model_and_predict_writes_its_columns(
        tmp_path, capsys, caplog, monkeypatch):
    monkeypatch.chdir(tmp_path)
    caplog.set_level(logging.INFO, logger=RANK_ZERO)  # a predict before sets it to WARNING
    run, frame = _fit(tmp_path)
    out = capsys.readouterr().out
    assert "Classical model (ECFP4 Tanimoto SVR) fitted on 30 training molecules" in caplog.text
    metrics = pd.read_csv(run / "metrics.csv")
    value = metrics["test/mae_classical"].dropna()
    assert len(value) == 1 and metrics["val/mae_classical"].notna().sum() == 1
    line = next(x for x in out.splitlines() if x.startswith("Test MAE:"))
    assert line.endswith(f"(network) | {value.iloc[0]:.4f} (ECFP4 Tanimoto SVR)")
    assert line.startswith("Test MAE: ") and "(prediction: blend, network weight " in line
    # independently: the stored model's test predictions against the labels
    state = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    model = ClassicalModel.from_state(state["callbacks"]["ClassicalBaseline"], num_tasks=1)
    test = frame[frame["split"] == "test"]
    mae = np.abs(model.predict(ecfp4(test["smiles"].tolist()))[:, 0, 0] - test["target"]).mean()
    assert value.iloc[0] == pytest.approx(mae, rel=1e-5)
    train = frame[frame["split"] == "train"]
    assert sorted(model.train_rows) == train.index.tolist()

    query = ["CCO", "CCCCCCCCO", "C1CC", "c1ccc2ccccc2c1N"]
    output = tmp_path / "pred.csv"
    main(["predict", "--ckpt_path", str(run / "checkpoints" / "last.ckpt"), "--smiles", *query,
          "--output", str(output)])
    table = pd.read_csv(output)
    columns = list(table.columns)
    assert columns.index("target_ecfp_svm") < columns.index("nearest_train_similarity") < \
        columns.index("nearest_train_row") < columns.index("error")
    assert table["target_ecfp_svm"].isna().tolist() == [False, False, True, False]
    kernel = tanimoto_kernel(ecfp4([query[i] for i in (0, 1, 3)]),
                             ecfp4(train["smiles"].tolist()))
    ok = table.drop(index=2)
    np.testing.assert_allclose(ok["nearest_train_similarity"], kernel.max(1), atol=1e-6)
    assert ok["nearest_train_row"].tolist() == train.index[kernel.argmax(1)].tolist()
    np.testing.assert_allclose(ok["target_ecfp_svm"],
                               model.predict(ecfp4([query[i] for i in (0, 1, 3)]))[:, 0, 0],
                               rtol=1e-6)
    from graph_urpe import Predictor  # the Python API gives the same columns

    api = Predictor.from_checkpoint(str(run / "checkpoints" / "last.ckpt")).predict(query)
    assert columns.index("target_network") < columns.index("target_ecfp_svm") < columns.index(
        "nearest_train_similarity")  # target_pred is the blend: tests/test_blend.py
    for column in ("target_pred", "target_network", "target_ecfp_svm", "nearest_train_similarity",
                   "nearest_train_row"):
        np.testing.assert_allclose(api[column].astype(float), table[column], rtol=1e-6)
    # the applicability warning: a threshold of 0.5 put into the checkpoint (6 validation rows
    # are too few to choose one), one line counting the molecules below it
    assert np.isnan(model.similarity_threshold)
    state["callbacks"]["ClassicalBaseline"]["similarity_threshold"] = 0.5
    torch.save(state, tmp_path / "threshold.ckpt")
    capsys.readouterr()
    main(["predict", "--ckpt_path", str(tmp_path / "threshold.ckpt"), "--smiles", *query,
          "--output", str(tmp_path / "pred2.csv")])
    below = int((kernel.max(1) < 0.5).sum())
    assert 0 < below < 3
    (line,) = [x for x in capsys.readouterr().err.splitlines() if "applicability" in x]
    assert line.startswith(f"Warning: {below} molecule(s) have an ECFP4 Tanimoto similarity "
                           "below 0.50 to every training molecule")
    # and each of them says so in its own warning column, naming its nearest training molecule
    flagged = pd.read_csv(tmp_path / "pred2.csv", keep_default_na=False)
    noted = flagged["warning"].str.contains("outside the applicability domain")
    best = dict(zip((0, 1, 3), kernel.max(1)))  # query 2 is invalid: no prediction, no note
    assert noted.tolist() == [i in best and best[i] < 0.5 for i in range(4)]
    for i in np.flatnonzero(noted):
        s, r = flagged.loc[i, ["nearest_train_similarity", "nearest_train_row"]]
        assert f"ECFP4 similarity {float(s):.2f} to the nearest training molecule (row {r}), " \
            "below 0.50" in flagged.loc[i, "warning"]


def test_classification_summary_and_switching_it_off(tmp_path, capsys, caplog):
    caplog.set_level(logging.INFO, logger=RANK_ZERO)
    run, _ = _fit(tmp_path, "classification")
    out = capsys.readouterr().out
    assert "Classical model (ECFP4 Tanimoto SVC and a random forest of 500 trees) fitted on " \
        "30" in caplog.text
    line = next(x for x in out.splitlines() if x.startswith("Test ROC-AUC:"))
    metrics = pd.read_csv(run / "metrics.csv")
    assert line.endswith(f"(network) | {metrics['test/rocauc_classical'].dropna().iloc[0]:.4f} "
                         f"(ECFP4 Tanimoto SVC) | {metrics['test/rocauc_forest'].dropna().iloc[0]:.4f}"
                         " (ECFP4 random forest)")
    for member in ("classical", "forest"):
        assert metrics[f"test/rocauc_{member}"].notna().sum() == 1
        assert metrics[f"val/rocauc_{member}"].notna().sum() == 1
    (tmp_path / "runs").rename(tmp_path / "first")
    caplog.clear()
    run, _ = _fit(tmp_path, "classification", "--classical_baseline", "false")
    out = capsys.readouterr().out
    assert "Classical model" not in caplog.text and "(network)" not in out
    assert not [c for c in pd.read_csv(run / "metrics.csv").columns if c.endswith(
        ("classical", "forest", "blend"))]
    state = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    assert "ClassicalBaseline" not in state["callbacks"]


def _nan_coefficient(state):
    state["tasks"][0]["dual_coef"][0] = float("nan")


def _short_fingerprints(state):
    state["train_fingerprints"] = state["train_fingerprints"][:, :100]


def _support_out_of_range(state):
    state["tasks"][0]["support"][0] = 10**6


def _weight_above_one(state):
    state["blend_weight"][0] = 1.5


def _two_weights(state):
    state["blend_weight"] = torch.tensor([[0.5, 0.5], [0.5, 0.5]], dtype=torch.float64)


def _three_weights(state):
    state["blend_weight"] = torch.tensor([[0.5, 0.25, 0.25]], dtype=torch.float64)


def _weights_not_summing_to_one(state):
    state["blend_weight"][0, 1] = 0.9


def _forest_for_regression(state):
    state["forests"] = [None]


def _negative_interval(state):
    state["blend_calibration"][1, 0] = -1.0


def _calibration_without_weight(state):
    del state["blend_weight"]


@pytest.mark.parametrize(("edit", "named"), [
    (_nan_coefficient, "tasks[0].dual_coef holds values that are not finite"),
    (_weight_above_one, "blend_weight holds values that are not finite numbers in [0, 1]"),
    (_two_weights, "blend_weight has 2 rows for 1 label columns"),
    (_three_weights, "blend_weight has 3 weights a column for the network and 1 member(s)"),
    (_weights_not_summing_to_one, "blend_weight has a column whose weights do not sum to 1"),
    (_forest_for_regression, "forests is not a list of 1 classification columns' forests"),
    (_negative_interval, "blend_calibration holds values that are not NaN or finite numbers >= 0"),
    (_calibration_without_weight, "blend_calibration without blend_weight"),
    (_short_fingerprints, "train_fingerprints [30, 100] / train_rows [30] are not [N, 256]"),
    (_support_out_of_range, "tasks[0].support / dual_coef are not as many distinct indices"),
])
def test_a_changed_classical_state_is_refused_in_one_line(tmp_path, capsys, monkeypatch, edit,
                                                          named):
    monkeypatch.chdir(tmp_path)
    run, _ = _fit(tmp_path, "regression", "--test_after_fit", "false")
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    edit(ckpt["callbacks"]["ClassicalBaseline"])
    changed = tmp_path / "changed.ckpt"
    torch.save(ckpt, changed)
    capsys.readouterr()
    commands = [["predict", "--ckpt_path", str(changed), "--smiles", "CCO"],
                ["fit", "--config", str(tmp_path / "tiny.yaml"), "--ckpt_path", str(changed),
                 "--trainer.max_epochs", "2", "--name", "resumed"]]
    for command in commands:
        with pytest.raises(SystemExit) as exit_info:
            main(command)
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err
        (line,) = [x for x in err.splitlines() if f"refusing {changed}: " in x]
        assert named in line


def test_above_the_cap_the_classical_model_is_skipped_with_one_line(caplog):
    from types import SimpleNamespace

    from graph_urpe.models.classical_baseline import ClassicalBaseline

    caplog.set_level(logging.INFO, logger=RANK_ZERO)
    splits = {"train": list(range(6)), "valid": [], "test": []}
    data = SimpleNamespace(load=lambda: SimpleNamespace(splits=splits), splits=None)
    module = SimpleNamespace(record=SimpleNamespace(task="regression"), num_labels=1)
    callback = ClassicalBaseline(max_train_molecules=5)
    callback.on_fit_start(SimpleNamespace(datamodule=data), module)
    assert callback.model is None and callback.state_dict() == {}
    (line,) = [r.getMessage() for r in caplog.records if "Classical model" in r.getMessage()]
    assert line == ("Classical model skipped: 6 training molecules, above its cap of 5 (its "
                    "kernel grows as N^2); --classical_baseline false turns it off.")


def test_the_domain_note_tells_the_similarity_from_the_threshold():
    from graph_urpe.models.applicability import domain_warning

    assert domain_warning("", 0.40, 7, 0.5) == ("outside the applicability domain: ECFP4 "
                                                "similarity 0.40 to the nearest training molecule "
                                                "(row 7), below 0.50")
    # 0.157 and 0.161 both print 0.16 with two decimals: three are used
    assert domain_warning("few atoms", 0.157, 3, 0.161).endswith("similarity 0.157 to the nearest "
                                                                 "training molecule (row 3), "
                                                                 "below 0.161")
    assert domain_warning("", 0.6, 3, 0.5) == "" and domain_warning("x", float("nan"), 3, 0.5) == "x"
