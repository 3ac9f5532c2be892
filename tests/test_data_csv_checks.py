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


def _scaffold_load(tmp_path, smiles, caplog):
    path = tmp_path / "scaffold.csv"
    pd.DataFrame({"smiles": smiles, "y": [float(i % 7) for i in range(len(smiles))]}).to_csv(
        path, index=False)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="graph_urpe.data.csv.checks"):
        ds = SmilesCSVDataset(str(tmp_path / "root"), str(path), "smiles", ["y"], log=False,
                              split="scaffold", min_train_labels=1, force_reload=True)
    sizes = {name: len(ds._split_idx[name]) for name in ("train", "valid", "test")}
    return sizes, [r.getMessage() for r in caplog.records
                   if r.name == "graph_urpe.data.csv.checks"]


ACYCLIC = ["C" * k for k in range(1, 9)] + ["C" * k + "O" for k in range(1, 9)] + \
    ["C" * k + "N" for k in range(1, 9)] + ["C" * k + "Cl" for k in range(1, 9)] + \
    ["O" + "C" * k + "O" for k in range(1, 5)]  # 36 molecules, all of the empty scaffold


def test_a_scaffold_split_of_mostly_acyclic_molecules_warns_with_its_sizes(tmp_path, caplog):
    # 36 acyclic molecules (one group: the empty scaffold, 90 %) and 4 ring systems: OGB's rule
    # (train takes groups while within 80 %) sends the big group to valid: train 4, valid 36.
    rings = ["c1ccccc1", "C1CCCCC1", "c1ccncc1", "C1CCOC1"]
    sizes, messages = _scaffold_load(tmp_path, ACYCLIC + rings, caplog)
    assert sizes == {"train": 4, "valid": 36, "test": 0}
    assert len(messages) == 1 and "\n" not in messages[0]
    assert messages[0].startswith("lopsided scaffold split")
    assert "train 4 (10%), valid 36 (90%), test 0 (0%)" in messages[0]
    assert "0.8 / 0.1 / 0.1" in messages[0] and "--data.init_args.split random" in messages[0]


def test_a_balanced_scaffold_split_says_nothing(tmp_path, caplog):
    # 8 acyclic molecules (20 %) and 32 ring molecules of 16 scaffolds: train 32, valid 4, test 4
    rings = [f"{head}{ring}" for ring in ("c1ccccc1", "C1CCCCC1", "c1ccncc1", "C1CCOC1",
                                          "c1ccoc1", "c1ccsc1", "C1CCNC1", "C1CC1",
                                          "C1CCC1", "c1cnccn1", "c1ccc2ccccc2c1", "C1CCNCC1",
                                          "C1COCCN1", "c1cc[nH]c1", "c1ncncn1", "C1CCCCCC1")
             for head in ("C", "CC")]
    sizes, messages = _scaffold_load(tmp_path, ACYCLIC[:8] + rings, caplog)
    assert sizes["train"] >= 28 and sizes["valid"] > 0 and sizes["test"] > 0, sizes
    assert messages == []
