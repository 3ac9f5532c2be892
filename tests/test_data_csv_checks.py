"""Warnings for a CSV that trains but says little: a constant label column and duplicate SMILES
within a split; one line each through the logger (no UserWarning with a source path)."""

from __future__ import annotations

import logging
import warnings

import pandas as pd

from graph_urpe.data.csv.dataset import SmilesCSVDataset

SMILES = ["CCO", "CCN", "CCCC", "c1ccccc1", "CC(=O)O", "CCOC", "c1ccncc1", "CC(C)O"]


def _load(tmp_path, frame, caplog):
    path = tmp_path / "mols.csv"
    frame.to_csv(path, index=False)
    caplog.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing as a Python warning
        with caplog.at_level(logging.WARNING, logger="graph_urpe.data.csv.checks"):
            SmilesCSVDataset(str(tmp_path / "root"), str(path), "smiles", ["y", "z"], log=False,
                             split="fold", min_train_labels=1, force_reload=True)
    return [r for r in caplog.records if r.name == "graph_urpe.data.csv.checks"]


def test_constant_target_and_duplicate_smiles_warn_in_one_line(tmp_path, caplog):
    # y is 2.0 in every training row (varies elsewhere); z varies. "OCC" is CCO written another
    # way: duplicates are found on the canonical SMILES.
    frame = pd.DataFrame({
        "smiles": ["CCO", "OCC", "CCCC", "c1ccccc1", "CC(=O)O", "CCOC", "c1ccncc1", "CC(C)O"],
        "y": [2.0, 2.0, 2.0, 2.0, 5.0, 1.0, 3.0, 4.0],
        "z": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8],
        "fold": ["train"] * 4 + ["valid", "valid", "test", "test"],
    })
    records = _load(tmp_path, frame, caplog)
    messages = [r.getMessage() for r in records]
    assert len(messages) == 2 and all("\n" not in m for m in messages)
    constant = next(m for m in messages if m.startswith("constant target"))
    assert "'y'" in constant and "(2)" in constant and "all 4" in constant and "'z'" not in constant
    duplicate = next(m for m in messages if m.startswith("duplicate SMILES"))
    assert "1 of the 4 rows of the train split" in duplicate and "CCO 2 times" in duplicate


def test_all_duplicate_file_warns_for_every_split(tmp_path, caplog):
    frame = pd.DataFrame({"smiles": ["CCO"] * 6, "y": [1.0, 2, 3, 4, 5, 6],
                          "z": [6.0, 5, 4, 3, 2, 1], "fold": ["train", "train", "valid", "valid",
                                                              "test", "test"]})
    messages = [r.getMessage() for r in _load(tmp_path, frame, caplog)]
    assert sorted(m.split(" split")[0].split()[-1] for m in messages) == ["test", "train", "valid"]


def test_a_clean_file_says_nothing(tmp_path, caplog):
    frame = pd.DataFrame({"smiles": SMILES, "y": [float(i) for i in range(8)],
                          "z": [float(-i) for i in range(8)],
                          "fold": ["train"] * 4 + ["valid", "valid", "test", "test"]})
    assert _load(tmp_path, frame, caplog) == []
