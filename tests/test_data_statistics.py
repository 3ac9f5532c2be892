"""Registry (load_dataset by name, max_graph_nodes refusal) and the summary table, checked against
numbers computed directly from the graphs."""

import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from build_ogb import write_ogb_graphprop_folder
from build_pcqm4mv2 import write_pcqm4mv2_folder
from torch_geometric.data import Data

from graph_urpe.cli.summarize import main
from graph_urpe.data.csv.row_errors import InvalidRowsError
from graph_urpe.data.families import load_dataset
from graph_urpe.data.statistics import summarize

SMILES = ["CCO", "c1ccccc1", "CC(=O)O", "C", "CCN", "c1ccncc1C", "OCCO", "CCCCCCCCCC",
          "C1CCCCC1", "CC#N"]


def table(text, header):
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("split") and header in line)
    rows = []
    for line in lines[start + 1:]:
        if line.startswith("split"):
            break
        rows.append(line.split())
    return rows


def test_summarize_plain_dict():
    graphs = [Data(x=torch.zeros(n, 1, dtype=torch.long),
                   edge_index=torch.zeros(2, 2 * n, dtype=torch.long),
                   y=torch.tensor([[float(v), w]]))
              for n, v, w in [(3, 1.0, np.nan), (5, 3.0, 1.0), (4, 2.0, 0.0)]]
    text = summarize({"train": graphs[:2], "test": graphs[2:]})
    sizes = table(text, "graphs")
    assert sizes[0][:5] == ["train", "2", "66.7%", "4.00", "5"]
    assert sizes[1][:5] == ["test", "1", "33.3%", "4.00", "4"]
    labels = table(text, "labelled")
    # train, task 0: labels 1 and 3 -> mean 2, sample std sqrt(2).
    assert labels[0][:4] == ["train", "0", "2", "0"]
    assert float(labels[0][4]) == pytest.approx(2.0)
    assert float(labels[0][5]) == pytest.approx(2 ** 0.5, abs=1e-4)
    # train, task 1: one label, one missing.
    assert labels[1][:4] == ["train", "1", "1", "1"]


def test_registry_csv_and_summary_command(tmp_path, capsys):
    path = tmp_path / "m.csv"
    pd.DataFrame({"smiles": SMILES + ["bad("], "y": np.arange(11.0)}).to_csv(path, index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = load_dataset("csv", root=str(tmp_path), csv_path=str(path), target_columns="y",
                              split="scaffold")
    facts = loaded.facts
    assert facts.task == "regression" and facts.num_tasks == 1 and facts.metric == "mae"
    assert [e.row for e in loaded.invalid_rows] == [10]
    assert sum(len(d) for d in loaded.splits.values()) == 10
    main(["csv", "--root", str(tmp_path), "--csv-path", str(path), "--target-columns", "y",
          "--split", "scaffold"])
    out = capsys.readouterr().out
    assert "refused inputs: 1" in out
    counts = {row[0]: int(row[1]) for row in table(out, "graphs")}
    assert counts == {name: len(d) for name, d in loaded.splits.items()}
    labels = table(out, "labelled")
    for row in labels:
        y = torch.cat([g.y for g in loaded.splits[row[0]]]).view(-1)
        assert float(row[4]) == pytest.approx(y.mean().item(), abs=1e-4)


def test_registry_ogb_max_nodes(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        write_ogb_graphprop_folder(str(tmp_path), "ogbg-molhiv", SMILES,
                                   np.arange(10) % 2, num_workers=0)
    loaded = load_dataset("ogbg-molhiv", root=str(tmp_path))
    assert loaded.facts.task == "classification" and loaded.facts.metric == "rocauc"
    assert loaded.facts.featurization == "ogb"
    with pytest.warns(UserWarning, match="larger than max_graph_nodes=8"):
        small = load_dataset("ogbg-molhiv", root=str(tmp_path), max_graph_nodes=8)
    # Only decane (10 atoms) exceeds 8; it is reported with its dataset index and SMILES.
    assert [(e.row, e.smiles) for e in small.invalid_rows] == [(7, "CCCCCCCCCC")]
    assert all(g.num_nodes <= 8 for d in small.splits.values() for g in d)
    with pytest.raises(InvalidRowsError, match="nodes > max_graph_nodes=8"):
        load_dataset("ogbg-molhiv", root=str(tmp_path), max_graph_nodes=8, strict=True)


def test_registry_pcqm_standin_has_labelled_test(tmp_path):
    gaps = np.linspace(5.0, 9.0, len(SMILES * 2))
    write_pcqm4mv2_folder(str(tmp_path / "pcqm4mv2_qm9"), SMILES * 2, gaps, num_workers=0)
    loaded = load_dataset("pcqm4mv2-qm9", root=str(tmp_path))
    assert set(loaded.splits) == {"train", "valid", "test-dev", "test-challenge", "test"}
    assert all(torch.isnan(g.y).all() for g in loaded.splits["test-dev"])
    test = torch.cat([g.y for g in loaded.splits["test"]]).view(-1)
    rows = [int(g.row) for g in loaded.splits["test"]]
    assert test.tolist() == pytest.approx([gaps[r] for r in rows])
    labelled = table(summarize(loaded), "labelled")
    counts = {row[0]: (int(row[2]), int(row[3])) for row in labelled}
    assert counts["test"] == (len(rows), 0) and counts["test-dev"] == (0, len(rows))
