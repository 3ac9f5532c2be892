"""Rows that cannot be used are errors by row, the same on every path that reads SMILES or writes
predictions: ``fit``'s CSV, ``predict`` (CSV and ``--smiles``), :class:`graph_urpe.Predictor`,
``fingerprint`` and ``explain``.

* A SMILES with whitespace inside: RDKit reads the text after it as a name, so ``"CC O"`` was
  predicted as ethane, ``"c1ccccc1 CCCCCCCCCCCC"`` as benzene and a quoted ``"CC\\nO"`` cell
  trained on as ``CC`` (:func:`graph_urpe.data.featurize.parse_smiles`, the one parse).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd
import pytest
import yaml
from rdkit import Chem

from graph_urpe.cli import main
from graph_urpe.data.csv.dataset import SmilesCSVDataset
from graph_urpe.data.csv.row_errors import InvalidRowsError
from graph_urpe.data.featurize import MoleculeError, heavy_atom_count, parse_smiles

SPACED = ["CC O", "c1ccccc1 CCCCCCCCCCCC", "CC\nO", "CC\tO"]
"""SMILES that RDKit would cut at the whitespace (to ethane, benzene, ethane, ethane)."""


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A tiny regression model fitted by the CLI (one epoch on 16 molecules)."""
    from tests.test_cli import write_config

    tmp = tmp_path_factory.mktemp("rows")
    config, runs = write_config(tmp, max_epochs=1)
    cfg = yaml.safe_load(Path(config).read_text())
    cfg["trainer"]["enable_checkpointing"] = True
    Path(config).write_text(yaml.safe_dump(cfg))
    main(["fit", "--config", config, "--test_after_fit", "false"])
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
    assert "row 1 (CSV line 3) 'CC\\nO': whitespace inside the SMILES ('\\n' at character 2)" \
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
    expected = ["whitespace inside the SMILES"] * len(SPACED) + [""]

    def errors(table):
        return [e[:28] for e in table["error"].tolist()]

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
