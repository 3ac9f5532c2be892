"""Prediction from SMILES: the training vocabulary, the warning column and the row column."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from torch_geometric.data import Data, InMemoryDataset

from graph_urpe.data.featurize import smiles_to_graph
from graph_urpe.data.predict_inputs import (
    read_predict_inputs,
    training_vocabulary,
    vocabulary_warnings,
)
from graph_urpe.data.predictions import prediction_table


class _Collated(InMemoryDataset):
    def __init__(self, graphs):
        super().__init__(None)
        self.data, self.slices = self.collate(graphs)


def _naive(graphs):
    """Per feature column, the sorted set of values over the graphs (the independent check)."""
    return {"atom": [sorted({int(v) for g in graphs for v in g.x[:, c]})
                     for c in range(graphs[0].x.size(1))],
            "bond": [sorted({int(v) for g in graphs for v in g.edge_attr[:, c]})
                     for c in range(graphs[0].edge_attr.size(1))],
            "max_atoms": max(g.x.size(0) for g in graphs)}


def test_training_vocabulary_reads_only_the_split_from_collated_storage(monkeypatch):
    from graph_urpe.data import predict_inputs
    from graph_urpe.data.collated import collated_rows

    smiles = ["CCO", "c1ccccc1", "C[N+](C)(C)C", "CC#N", "OC(=O)c1ccccc1Br"]
    graphs = [smiles_to_graph(s, "ogb") for s in smiles]
    dataset = _Collated(graphs)
    for rows in ([0, 3], [1, 2, 4], [4]):
        assert training_vocabulary(dataset[rows]) == _naive([graphs[i] for i in rows])
    assert training_vocabulary(dataset) == _naive(graphs)
    # A large split is read a few graphs at a time (bounded index memory): the same sets,
    # including a range whose graphs have no bond at all (a single atom)
    graphs.append(smiles_to_graph("C", "ogb"))
    dataset = _Collated(graphs)
    monkeypatch.setattr(predict_inputs, "VOCABULARY_GRAPHS", 2)
    for rows in ([5, 0, 3], [5, 5, 0], [1, 2, 4, 5, 0]):  # [5, 5]: a range without bonds
        assert training_vocabulary(dataset[rows]) == _naive([graphs[i] for i in rows])
        x = collated_rows(dataset[rows], "x", 1, 3)
        assert torch.equal(x, torch.cat([graphs[i].x for i in rows[1:3]]))
    # Graph by graph for any other dataset (a list).
    assert training_vocabulary([graphs[0], graphs[2]]) == _naive([graphs[0], graphs[2]])
    assert training_vocabulary([Data(x=torch.randn(3, 2))]) is None  # not categorical features


def test_vocabulary_warnings_name_what_training_never_saw():
    train = [smiles_to_graph(s, "ogb") for s in ("CCO", "CCN", "c1ccccc1", "CC(=O)O")]
    vocabulary = _naive(train)
    inputs = ["OCC", "CC[Cu]", "[Na+].[Cl-]", "CC#C"]
    graphs = [smiles_to_graph(s, "ogb") for s in inputs]
    for row, graph in enumerate(graphs):
        graph.sample_id = row
    warnings = vocabulary_warnings(graphs, vocabulary, "ogb")
    assert 0 not in warnings  # ethanol again: all seen
    assert "element Cu" in warnings[1]
    assert "element Na" in warnings[2] and "element Cl" in warnings[2]
    # the values, not OGB's list positions: Na+ and Cl- are the only charged atoms
    assert "formal charge +1" in warnings[2] and "formal charge -1" in warnings[2]
    assert "bond type TRIPLE" in warnings[3]  # a triple bond, never seen
    assert all(w.startswith("outside the training vocabulary: ") for w in warnings.values())
    assert vocabulary_warnings(graphs, None, "ogb") == {}  # an older checkpoint: no word


def test_molecules_larger_than_every_training_molecule_are_flagged():
    train = [smiles_to_graph(s, "ogb") for s in ("CCO", "CCCCCC", "c1ccccc1O")]  # at most 7 atoms
    vocabulary = _naive(train)
    assert vocabulary["max_atoms"] == 7
    inputs = ["CCCCCCO", "CCCCCCCO", "C" * 40 + "[Cu]"]  # 7, 8 and 41 atoms
    graphs = [smiles_to_graph(s, "ogb") for s in inputs]
    for row, graph in enumerate(graphs):
        graph.sample_id = row
    warnings = vocabulary_warnings(graphs, vocabulary, "ogb")
    assert 0 not in warnings  # as large as the largest training molecule: not flagged
    assert warnings[1] == "larger than every training molecule: 8 atoms (training: at most 7)"
    # both reasons, vocabulary first
    assert warnings[2].startswith("outside the training vocabulary: element Cu")
    assert warnings[2].endswith("; larger than every training molecule: 41 atoms (training: at "
                                "most 7)")
    # a checkpoint from before sizes were stored flags only the vocabulary
    old = {k: v for k, v in vocabulary.items() if k != "max_atoms"}
    older = vocabulary_warnings(graphs, old, "ogb")
    assert list(older) == [2] and "larger" not in older[2]


def test_prediction_table_has_row_error_and_warning_in_input_order():
    frame = pd.DataFrame({"smiles": ["CCO", "x", "CC[Cu]"]})
    table = prediction_table(frame, np.array([2, 0]), np.array([[2.5], [1.5]]),
                             {1: "invalid SMILES"}, ["logP"], {2: "outside: element Cu"})
    assert table.columns.tolist() == ["row", "smiles", "logP_pred", "error", "warning"]
    assert table["row"].tolist() == [0, 1, 2]
    assert table["logP_pred"].tolist()[::2] == [1.5, 2.5] and np.isnan(table["logP_pred"][1])
    assert table["warning"].tolist() == ["", "", "outside: element Cu"]


def test_predict_inputs_keep_blank_lines_as_rows(tmp_path):
    # Row r of the table is CSV line r + 2, blank lines included (the writer reports them).
    path = tmp_path / "new.csv"
    path.write_text("smiles,name\nCCO,a\n\nc1ccccc1,b\n")
    frame = read_predict_inputs(str(path), None, "smiles")
    assert frame["smiles"].fillna("").tolist() == ["CCO", "", "c1ccccc1"]
    assert frame["name"].fillna("").tolist() == ["a", "", "b"]


def test_predict_report_names_the_absolute_output_and_each_failed_rows_line(tmp_path,
                                                                             monkeypatch, capsys):
    """The summary gives the output's absolute path, "1 input row" in the singular, and each
    failed row as fit does: its CSV line (row + 2: one header line) or its --smiles position."""
    from pathlib import Path

    from graph_urpe.cli import main
    from tests.test_trust import checkpoint

    monkeypatch.chdir(tmp_path)
    ckpt = str(checkpoint(tmp_path / "m.ckpt"))
    Path("in.csv").write_text("smiles\nCCO\nC1CC\nxyz\n")
    main(["predict", "--ckpt_path", ckpt, "--csv", "in.csv", "--output", "out.csv"])
    main(["predict", "--ckpt_path", ckpt, "--smiles", "CCO", "C(C", "--output", "two.csv"])
    main(["predict", "--ckpt_path", ckpt, "--smiles", "CCO", "--output", "one.csv"])
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    here, why = tmp_path.resolve(), "(reason in the 'error' column)."
    assert lines == [
        f"Wrote predictions for 3 input rows to {here / 'out.csv'}: 1 predicted, 2 failed {why}",
        "  row 1 (CSV line 3): invalid SMILES: unclosed ring",
        "  row 2 (CSV line 4): invalid SMILES: syntax error around position 1",
        f"Wrote predictions for 2 input rows to {here / 'two.csv'}: 1 predicted, 1 failed {why}",
        "  row 1 (--smiles value 2): invalid SMILES: extra open parentheses around position 2",
        f"Wrote predictions for 1 input row to {here / 'one.csv'}: 1 predicted, 0 failed.",
    ]
