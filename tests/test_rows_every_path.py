"""Rows that cannot be used are errors by row, the same on every path that reads SMILES or writes
predictions: ``fit``'s CSV, ``predict`` (CSV and ``--smiles``), :class:`graph_urpe.Predictor`,
``fingerprint`` and ``explain``.

* A SMILES with whitespace inside: RDKit reads the text after it as a name, so ``"CC O"`` was
  predicted as ethane, ``"c1ccccc1 CCCCCCCCCCCC"`` as benzene and a quoted ``"CC\\nO"`` cell
  trained on as ``CC`` (:func:`graph_urpe.data.featurize.parse_smiles`, the one parse).
* Broken outputs: a checkpoint with NaN weights gave NaN predictions with an empty ``error``
  (``Predictor``) and "Explained 1 of 1 (0 failed)" (``explain``); one with broken calibration
  buffers a negative std or ``lower > upper``; labels of 3e38 ended ``fit`` with status 0 and NaN
  test metrics (:func:`graph_urpe.data.predictions.output_errors`,
  :func:`graph_urpe.cli.fit_report.check_test_outputs`).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from rdkit import Chem

from graph_urpe.cli import main
from graph_urpe.data.csv.dataset import SmilesCSVDataset
from graph_urpe.data.csv.row_errors import InvalidRowsError
from graph_urpe.data.featurize import MoleculeError, heavy_atom_count, parse_smiles
from graph_urpe.data.predictions import output_errors, prediction_table

SPACED = ["CC O", "c1ccccc1 CCCCCCCCCCCC", "CC\nO", "CC\tO"]
"""SMILES that RDKit would cut at the whitespace (to ethane, benzene, ethane, ethane)."""


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A tiny regression model fitted by the CLI (one epoch on 16 molecules), with a
    mean-variance head so that its rows have a per-molecule ``target_std``."""
    from tests.test_cli import write_config

    tmp = tmp_path_factory.mktemp("rows")
    config, runs = write_config(tmp, max_epochs=1)
    cfg = yaml.safe_load(Path(config).read_text())
    cfg["trainer"]["enable_checkpointing"] = True
    Path(config).write_text(yaml.safe_dump(cfg))
    main(["fit", "--config", config, "--test_after_fit", "false",
          "--model.init_args.objective.loss", "mve"])
    return str(runs / "version_0" / "checkpoints" / "last.ckpt")


def test_whitespace_inside_a_smiles_is_refused_and_around_it_ignored():
    for smiles in SPACED:
        # What RDKit alone makes of it: the text before the whitespace, the rest a name.
        assert Chem.MolToSmiles(Chem.MolFromSmiles(smiles)) in ("CC", "c1ccccc1")
        with pytest.raises(MoleculeError, match=r"whitespace inside the SMILES \(.+ at character "
                           rf"{len(smiles.split()[0])}\).*remove it"):
            parse_smiles(smiles)
        assert heavy_atom_count(smiles) is None  # refused before any atom is counted
    assert Chem.MolToSmiles(parse_smiles("  CCO\t\n")) == "CCO"  # as RDKit reads it
    assert heavy_atom_count(" CCO ") == 3


def test_fit_reports_a_quoted_line_break_by_row_and_trains_without_it(tmp_path):
    csv = tmp_path / "mols.csv"
    smiles = ["CCO", "CC\nO", "c1ccccc1", "CCN", "CC O", "CCCC", "OCCO"]
    pd.DataFrame({"smiles": smiles, "y": range(7)}).to_csv(csv, index=False)
    assert '"CC\nO"' in csv.read_text()  # one quoted cell over two lines
    with pytest.raises(InvalidRowsError) as refused:
        SmilesCSVDataset(str(tmp_path / "strict"), str(csv), "smiles", "y", log=False,
                         featurization="zinc", strict=True, min_train_labels=1)
    assert [e.row for e in refused.value.errors] == [1, 4]
    assert all("whitespace inside the SMILES" in e.reason for e in refused.value.errors)
    assert "row 1 (CSV line 3) 'CC\\nO': invalid SMILES: whitespace inside the SMILES ('\\n' at " \
        "character 2)" \
        in str(refused.value)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = SmilesCSVDataset(str(tmp_path / "root"), str(csv), "smiles", "y", log=False,
                              featurization="zinc", min_train_labels=1)
    assert sorted(int(g.row) for g in ds) == [0, 2, 3, 5, 6]
    assert sorted(float(g.y) for g in ds) == [0.0, 2.0, 3.0, 5.0, 6.0]


def test_predict_predictor_fingerprint_and_explain_refuse_whitespace_by_row(
        checkpoint, tmp_path, capsys):
    from graph_urpe import Predictor

    inputs = [*SPACED, "CCO"]
    expected = ["invalid SMILES: whitespace inside the SMILES"] * len(SPACED) + [""]

    def errors(table):
        return [e[:44] for e in table["error"].tolist()]

    # predict, --smiles and CSV (the line break quoted in its cell)
    main(["predict", "--ckpt_path", checkpoint, "--smiles", *inputs,
          "--output", str(tmp_path / "a.csv")])
    assert errors(pd.read_csv(tmp_path / "a.csv", keep_default_na=False)) == expected
    csv = tmp_path / "in.csv"
    pd.DataFrame({"smiles": inputs}).to_csv(csv, index=False)
    main(["predict", "--ckpt_path", checkpoint, "--csv", str(csv),
          "--output", str(tmp_path / "b.csv")])
    table = pd.read_csv(tmp_path / "b.csv", keep_default_na=False)
    assert errors(table) == expected and table["smiles"].tolist() == inputs
    assert "4 failed" in capsys.readouterr().out
    # Predictor and fingerprint
    model = Predictor.from_checkpoint(checkpoint)
    assert errors(model.predict(inputs)) == expected
    assert errors(model.fingerprint(inputs)) == expected
    main(["fingerprint", "--ckpt_path", checkpoint, "--csv", str(csv),
          "--output", str(tmp_path / "fp.csv")])
    assert errors(pd.read_csv(tmp_path / "fp.csv", keep_default_na=False)) == expected
    # explain
    pytest.importorskip("captum")
    main(["explain", "--ckpt_path", checkpoint, "--smiles", *inputs, "--steps", "4",
          "--out", str(tmp_path / "why")])
    assert f"Explained 1 of {len(inputs)} molecules ({len(SPACED)} failed" in \
        capsys.readouterr().out
    why = pd.read_csv(tmp_path / "why" / "attributions.csv", keep_default_na=False)
    assert errors(why.drop_duplicates("row")) == expected


def test_broken_outputs_are_row_errors_with_their_values_blanked():
    nan = float("nan")
    pred = np.array([[1.0], [nan], [2.0], [3.0], [4.0]])
    uncertainty = {"std": np.array([[0.1], [0.1], [-0.2], [0.1], [np.inf]]),
                   "lower": np.array([[0.8], [0.8], [1.5], [3.5], [3.0]]),
                   "upper": np.array([[1.2], [1.2], [2.5], [2.5], [5.0]])}
    found = output_errors(pred, ["y"], uncertainty)
    assert sorted(found) == [1, 2, 3, 4]
    assert found[1].startswith("the model's prediction is not finite (NaN or infinite)")
    assert found[2].startswith("the model's y_std is negative (-0.2)")
    assert found[3].startswith("the model's interval is inverted (y_lower 3.5 > y_upper 2.5)")
    assert found[4].startswith("the model's y_std is not finite")
    assert output_errors(pred[:1], ["y"], {k: v[:1] for k, v in uncertainty.items()}) == {}
    # Rows 10..14 of a 6-row input (row 5 had no graph): the broken ones lose their values.
    frame = pd.DataFrame({"smiles": list("ABCDEF")})
    table = prediction_table(frame, np.array([4, 3, 2, 1, 0]), pred, {5: "invalid SMILES"},
                             ["y"], uncertainty=uncertainty)
    assert table["error"].str[:30].tolist() == [
        found[4][:30], found[3][:30], found[2][:30], found[1][:30], "", "invalid SMILES"]
    assert table["y_pred"].tolist()[4] == 1.0 and table["y_std"].tolist()[4] == 0.1
    assert table.loc[[0, 1, 2, 3, 5], ["y_pred", "y_std", "y_lower", "y_upper"]].isna().all().all()


def _broken(checkpoint, path, change):
    """A copy of ``checkpoint`` with its state dict changed by ``change(name, tensor)``."""
    ckpt = torch.load(checkpoint, weights_only=True, map_location="cpu")
    ckpt["state_dict"] = {k: change(k, v) for k, v in ckpt["state_dict"].items()}
    torch.save(ckpt, path)
    return str(path)


def test_nan_weights_fail_every_row_of_predict_predictor_fingerprint_and_explain(
        checkpoint, tmp_path, capsys):
    from graph_urpe import Predictor

    ckpt = _broken(checkpoint, tmp_path / "nan.ckpt", lambda k, v: torch.full_like(
        v, float("nan")) if v.is_floating_point() else v)
    smiles = ["CCO", "c1ccccc1"]
    with pytest.raises(SystemExit) as stop:  # nothing predicted: the rows, then status 2
        main(["predict", "--ckpt_path", ckpt, "--smiles", *smiles,
              "--output", str(tmp_path / "p.csv")])
    assert stop.value.code == 2 and "0 predicted, 2 failed" in capsys.readouterr().out
    written = pd.read_csv(tmp_path / "p.csv", keep_default_na=False)
    model = Predictor.from_checkpoint(ckpt)
    for table in (written, model.predict(smiles), model.fingerprint(smiles)):
        assert table["error"].str.contains("is not finite (NaN or infinite)", regex=False).all()
    assert model.predict(smiles)["target_pred"].isna().all()
    assert np.isnan(model.fingerprint(smiles).filter(like="fp_").to_numpy()).all()
    with pytest.raises(SystemExit) as stop:
        main(["fingerprint", "--ckpt_path", ckpt, "--smiles", *smiles,
              "--output", str(tmp_path / "fp.csv")])
    assert stop.value.code == 2 and "0 embedded, 2 failed" in capsys.readouterr().out
    pytest.importorskip("captum")
    with pytest.raises(SystemExit) as stop:
        main(["explain", "--ckpt_path", ckpt, "--smiles", *smiles, "--steps", "4",
              "--out", str(tmp_path / "why")])
    assert stop.value.code == 2
    assert "Explained 0 of 2 molecules (2 failed" in capsys.readouterr().out
    why = pd.read_csv(tmp_path / "why" / "attributions.csv", keep_default_na=False)
    assert len(why) == 2 and why["error"].str.contains("is not finite").all()
    assert not list((tmp_path / "why").glob("*.png"))


@pytest.mark.parametrize("buffer, reason", [
    ("uncertainty_scale", "the model's target_std is negative"),
    ("interval_factor", "the model's interval is inverted (target_lower"),
])
def test_a_negative_std_or_inverted_interval_is_a_row_error(checkpoint, tmp_path, capsys,
                                                            buffer, reason):
    from graph_urpe import Predictor

    ckpt = _broken(checkpoint, tmp_path / "bad.ckpt",
                   lambda k, v: -v.abs() - 1 if k.endswith(buffer) else v)
    good = Predictor.from_checkpoint(checkpoint).predict(["CCO"])
    assert good["error"][0] == "" and good["target_lower"][0] < good["target_upper"][0]
    with pytest.raises(SystemExit):
        main(["predict", "--ckpt_path", ckpt, "--smiles", "CCO",
              "--output", str(tmp_path / "p.csv")])
    assert "0 predicted, 1 failed" in capsys.readouterr().out
    for table in (pd.read_csv(tmp_path / "p.csv", keep_default_na=False),
                  Predictor.from_checkpoint(ckpt).predict(["CCO"])):
        assert table["error"][0].startswith(reason)
        assert table[["target_pred", "target_std", "target_lower", "target_upper"]].replace(
            "", np.nan).isna().all().all()


def test_fit_with_labels_near_float32s_limit_exits_2_naming_the_test_metrics(tmp_path, capsys):
    from tests.test_cli import write_config

    config, runs = write_config(tmp_path, max_epochs=1)
    csv = tmp_path / "mols.csv"
    frame = pd.read_csv(csv)
    frame["target"] = [3e38 if i % 2 else -3e38 for i in range(len(frame))]
    frame.to_csv(csv, index=False)
    with pytest.raises(SystemExit) as stop:
        main(["fit", "--config", config])
    assert stop.value.code == 2
    captured = capsys.readouterr()
    assert "Run folder:" in captured.out  # the summary first
    # one error line (warnings of the run, e.g. the undefined correlation, may come before it)
    err = [line for line in captured.err.splitlines() if line.startswith("graph-urpe: error:")]
    assert len(err) == 1 and err[0].startswith("graph-urpe: error: the test metrics are not "
                                               "finite (")
    assert "Traceback" not in captured.err
    assert "3 of 3 test rows have predictions that are not finite" in err[0]
    assert "the largest |label| is 3e+38" in err[0]
    assert (runs / "version_0" / "test_predictions.csv").is_file()
