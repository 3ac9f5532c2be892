"""SmilesCSVDataset and the embedded ZINC-like dataset: labels (NaN kept), invalid rows, size
refusal, splits, caching, parallel processing."""

import os
import re
import warnings

import numpy as np
import pandas as pd
import pytest
import torch

from graph_urpe.data import processing
from graph_urpe.data.csv import dataset as smiles_dataset
from graph_urpe.data.csv import store_builder
from graph_urpe.data.csv.dataset import SmilesCSVDataset
from graph_urpe.data.csv.row_errors import InvalidRowsError
from graph_urpe.data.featurize import smiles_to_ogb_graph, smiles_to_zinc_graph
from graph_urpe.data.zinc import EMBEDDED_ZINC_LIKE, ZincLikeDataset
from graph_urpe.transforms import AddShortestPathDistance

ROWS = [  # smiles, a, b, fold
    ("CCO", 1.0, None, "train"),
    ("c1ccccc1", 2.5, 0, "valid"),
    ("not a smiles", 3.0, 1, "test"),
    ("[Na+].[Cl-]", 4.0, 1, "train"),
    ("C", 5.0, 0, "test"),
    ("CC(=O)O", None, 1, "train"),
    ("CCCCCCCCCCCC", 7.0, 0, "val"),
    ("C1CC", 8.0, 1, "train"),
]


@pytest.fixture
def csv(tmp_path):
    path = tmp_path / "mols.csv"
    pd.DataFrame(ROWS, columns=["smiles", "a", "b", "fold"]).to_csv(path, index=False)
    return str(path)


def load(tmp_path, csv, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # Eight rows: fewer training labels than the default minimum (tested separately).
        return SmilesCSVDataset(str(tmp_path / "root"), csv, "smiles", ["a", "b"], log=False,
                                min_train_labels=1, **kwargs)


def test_graphs_labels_and_nan(tmp_path, csv):
    with pytest.warns(UserWarning, match=r"skipped 2 of 8 rows"):
        ds = SmilesCSVDataset(str(tmp_path / "root"), csv, "smiles", ["a", "b"], log=False,
                              min_train_labels=1)
    valid = [i for i, r in enumerate(ROWS) if r[0] not in ("not a smiles", "C1CC")]
    assert len(ds) == len(valid) and ds.num_tasks == 2
    for graph, i in zip(ds, valid):
        smiles, a, b, _ = ROWS[i]
        expected = smiles_to_ogb_graph(smiles)
        assert graph.smiles == smiles and int(graph.row) == i
        assert torch.equal(graph.x, expected.x) and torch.equal(graph.edge_index, expected.edge_index)
        assert torch.equal(graph.edge_attr, expected.edge_attr)
        assert graph.y.shape == (1, 2) and graph.y.dtype == torch.float32
        want = [np.nan if a is None else a, np.nan if b is None else b]
        np.testing.assert_array_equal(graph.y.view(-1).numpy(), np.array(want, dtype=np.float32))
    # The skipped rows are listed with row number, CSV line, text and reason.
    report = pd.read_csv(ds.invalid_rows_path, keep_default_na=False)
    assert report["row"].tolist() == [2, 7] and report["line"].tolist() == [4, 9]
    assert report["smiles"].tolist() == ["not a smiles", "C1CC"]
    assert all("invalid SMILES" in r for r in report["reason"])
    assert [e.row for e in ds.invalid_rows] == [2, 7]


def test_strict_refuses_every_bad_row(tmp_path, csv):
    with pytest.raises(InvalidRowsError) as info:
        SmilesCSVDataset(str(tmp_path / "root"), csv, "smiles", ["a", "b"], strict=True, log=False)
    assert [e.row for e in info.value.errors] == [2, 7]
    assert "row 2 (CSV line 4) 'not a smiles'" in str(info.value)


def test_max_nodes_refuses_with_row_and_size(tmp_path, csv):
    ds = load(tmp_path, csv, max_graph_nodes=6)
    sizes = {e.row: e.reason for e in ds.invalid_rows}
    assert "graph has 12 nodes > max_graph_nodes=6" in sizes[6]     # dodecane refused, reported
    assert all(g.num_nodes <= 6 for g in ds) and 6 not in [int(g.row) for g in ds]
    with pytest.raises(InvalidRowsError, match=re.escape("graph has 12 nodes > max_graph_nodes=6")):
        SmilesCSVDataset(str(tmp_path / "strict"), csv, "smiles", ["a", "b"], max_graph_nodes=6,
                         strict=True, log=False)


def test_splits(tmp_path, csv):
    by_column = load(tmp_path, csv, split="fold")
    idx = by_column.get_idx_split()
    folds = [ROWS[int(g.row)][3].replace("val", "valid").replace("validid", "valid")
             for g in by_column]
    for name in ("train", "valid", "test"):
        assert [folds[i] for i in idx[name].tolist()] == [name] * len(idx[name])
    for kind in ("random", "scaffold"):
        ds = load(tmp_path, csv, split=kind)
        parts = torch.cat(list(ds.get_idx_split().values())).sort().values
        assert parts.tolist() == list(range(len(ds)))


def test_label_errors(tmp_path):
    path = tmp_path / "bad.csv"
    pd.DataFrame({"smiles": ["C", "CC"], "y": ["1.5", "abc"], "c": [0, 2]}).to_csv(path, index=False)
    with pytest.raises(ValueError, match=r"1 non-numeric value \(row 1 \(CSV line 3\): 'abc'\)"):
        SmilesCSVDataset(str(tmp_path / "r1"), str(path), target_columns="y", log=False)
    with pytest.raises(ValueError, match=r"must hold 0, 1.*row 1 \(CSV line 3\): 2.0"):
        SmilesCSVDataset(str(tmp_path / "r2"), str(path), target_columns="c",
                         task="classification", log=False)
    with pytest.raises(ValueError, match=r"label columns \['nope'\] not found"):
        SmilesCSVDataset(str(tmp_path / "r3"), str(path), target_columns="nope", log=False)
    with pytest.raises(ValueError, match="SMILES column 'mol' not found"):
        SmilesCSVDataset(str(tmp_path / "r4"), str(path), smiles_column="mol", target_columns="y",
                         log=False)
    with pytest.raises(FileNotFoundError):
        SmilesCSVDataset(str(tmp_path / "r5"), str(tmp_path / "missing.csv"), log=False)
    # One column named twice would train two tasks on the same labels and write one (trial).
    with pytest.raises(ValueError, match="is a folder, not a CSV file"):
        SmilesCSVDataset(str(tmp_path / "r7"), str(tmp_path), log=False)
    with pytest.raises(ValueError, match="'y' more than once"):
        SmilesCSVDataset(str(tmp_path / "r6"), str(path), target_columns=["y", "y"], log=False)


def test_cached_second_run_does_no_graph_work(tmp_path, csv, monkeypatch):
    spd = AddShortestPathDistance()
    first = load(tmp_path, csv, pre_transform=spd)
    assert first[0].spd.dtype == torch.int16

    def forbidden(*args, **kwargs):
        raise AssertionError("processing ran again")

    monkeypatch.setattr(store_builder, "rows_to_columns", forbidden)
    again = load(tmp_path, csv, pre_transform=AddShortestPathDistance())
    assert torch.equal(again._data.spd, first._data.spd)
    # Another pre_transform is another cache entry, never the stale graphs.
    with pytest.raises(AssertionError, match="processing ran again"):
        load(tmp_path, csv, pre_transform=AddShortestPathDistance(max_distance=2))


def test_parallel_equals_serial():
    smiles = ["CCO", "c1ccccc1O", "bad(", "CC[NH3+]", "O"] * 3
    labels = np.arange(len(smiles), dtype=float)
    serial, err0 = processing.molecules_to_graphs(smiles, labels, "zinc", num_workers=0,
                                                  pre_transform=AddShortestPathDistance(),
                                                  progress=False)
    parallel, err2 = processing.molecules_to_graphs(smiles, labels, "zinc", num_workers=2,
                                                    chunksize=2, progress=False,
                                                    pre_transform=AddShortestPathDistance())
    assert [e.row for e in err0] == [e.row for e in err2] == [2, 7, 12]
    assert len(serial) == len(parallel) == 12
    for a, b in zip(serial, parallel):
        for key in ("x", "edge_index", "edge_attr", "y", "pair_index", "spd", "spd_pred_index"):
            assert torch.equal(a[key], b[key])


def test_zinc_like_dataset(tmp_path):
    frame = pd.read_csv(EMBEDDED_ZINC_LIKE).groupby("split").head(5)  # 15 molecules
    small = tmp_path / "small.csv.gz"
    frame.to_csv(small, index=False)
    train = ZincLikeDataset(str(tmp_path / "zl"), split="train", csv_path=str(small), log=False)
    val = ZincLikeDataset(str(tmp_path / "zl"), split="val", csv_path=str(small), log=False)
    assert len(train) == 5 and len(val) == 5
    rows = frame.reset_index(drop=True)
    for graph in val:
        row = rows.iloc[int(graph.row)]
        assert row["split"] == "valid"
        expected = smiles_to_zinc_graph(row["smiles"])
        assert torch.equal(graph.x, expected.x) and torch.equal(graph.edge_attr, expected.edge_attr)
        assert graph.y.item() == pytest.approx(row["target"], abs=1e-6)
    with pytest.raises(ValueError, match="split must be"):
        ZincLikeDataset(str(tmp_path / "zl"), split="dev", csv_path=str(small))
    assert os.path.getsize(EMBEDDED_ZINC_LIKE) < 1_000_000


def test_infinite_labels_refused_by_row_and_large_labels_warned(tmp_path):
    path = tmp_path / "inf.csv"
    pd.DataFrame({"smiles": ["C", "CC", "CCC"], "y": ["1.5", "inf", "-inf"],
                  "big": [1.0, 2e12, 3.0]}).to_csv(path, index=False)
    with pytest.raises(ValueError, match=r"'y'.*2 infinite values \(row 1 \(CSV line 3\): inf, row 2 \(CSV line 4\): -inf\)"
                                         r".*leave the cells empty"):
        SmilesCSVDataset(str(tmp_path / "r1"), str(path), target_columns="y", log=False)
    with pytest.warns(UserWarning, match=r"column 'big'.*1 values of magnitude above 1e\+06.*row 1"):
        ds = SmilesCSVDataset(str(tmp_path / "r2"), str(path), target_columns="big", log=False,
                              min_train_labels=1)
    assert ds[1].y.item() == pytest.approx(2e12)


def test_strict_refuses_a_cache_made_without_strict(tmp_path, csv):
    lenient = load(tmp_path, csv)
    assert len(lenient.invalid_rows) == 2
    with pytest.raises(InvalidRowsError, match="2 of 8 rows") as info:
        load(tmp_path, csv, strict=True)
    assert [e.row for e in info.value.errors] == [2, 7]


def test_progress_bar_default_follows_input_size(capsys, monkeypatch):
    processing.molecules_to_graphs(["C", "CC"], num_workers=0, desc="small input")
    assert "small input" not in capsys.readouterr().err
    monkeypatch.setattr(processing, "PROGRESS_MIN_ITEMS", 2)
    processing.molecules_to_graphs(["C", "CC"], num_workers=0, desc="large input")
    assert "large input" in capsys.readouterr().err


@pytest.mark.parametrize(("cpus", "items", "expected"), [
    (1, 100_000, 0), (2, 100_000, 0),  # a worker would compete with the calling process
    (3, 100_000, 2), (4, 4_999, 0), (4, 5_000, 3), (64, 10**6, 8),
])
def test_automatic_worker_count(monkeypatch, cpus, items, expected):
    monkeypatch.setattr(processing, "available_cpus", lambda: cpus)
    assert processing.resolve_num_workers(None, items) == expected
    assert processing.resolve_num_workers(1, items) == 1


def test_split_membership_of_every_source_row(tmp_path, csv):
    ds = load(tmp_path, csv, split="fold")
    table = ds.split_membership()
    assert list(table.columns) == ["row", "smiles", "split", "reason"]
    # By hand from ROWS: the fold column, "val" read as valid, rows 2 and 7 invalid SMILES.
    assert table["row"].tolist() == list(range(8))
    assert table["smiles"].tolist() == [r[0] for r in ROWS]
    assert table["split"].tolist() == ["train", "valid", "skipped", "train", "test", "train",
                                       "valid", "skipped"]
    assert table["reason"][[0, 1, 3, 4, 5, 6]].eq("").all()
    assert table["reason"][[2, 7]].str.contains("invalid SMILES").all()
    # Each graph's row is the source row the user sees; its split agrees with the table.
    split = ds.get_idx_split()
    for name, idx in split.items():
        for i in idx.tolist():
            assert table["split"][int(ds[i].row)] == name


def test_too_few_training_labels_and_empty_columns_refused(tmp_path):
    path = tmp_path / "few.csv"
    y = [1.0, 2.0, None, None, None, 3.0, 4.0, 5.0, None, 6.0]
    pd.DataFrame({"smiles": ["C" * (i + 1) for i in range(10)], "y": y, "empty": [None] * 10,
                  "fold": ["train"] * 6 + ["valid"] * 2 + ["test"] * 2}).to_csv(path, index=False)
    # Training rows 0-5 hold 3 labels (three empty); 6 in all 10 rows.
    with pytest.raises(ValueError, match=r"'y'.*3 labels in the training split \(6 molecules; "
                                         r"6 labels in all 10 usable molecules\).*minimum 5"):
        SmilesCSVDataset(str(tmp_path / "r"), str(path), target_columns="y", split="fold",
                         log=False)
    assert smiles_dataset.MIN_TRAIN_LABELS == 5
    ds = SmilesCSVDataset(str(tmp_path / "r"), str(path), target_columns="y", split="fold",
                          log=False, min_train_labels=3)  # same cache, checked again on load
    assert len(ds) == 10
    with pytest.raises(ValueError, match=r"'empty'.*no value in any of its 10 rows \(0 labels\)"):
        SmilesCSVDataset(str(tmp_path / "r2"), str(path), target_columns=["y", "empty"],
                         split="fold", log=False)


def test_empty_and_header_only_files_and_missing_columns(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match=r"empty\.csv is empty \(0 bytes\).*header line"):
        SmilesCSVDataset(str(tmp_path / "r1"), str(empty), log=False)
    header = tmp_path / "header.csv"
    header.write_text("smiles,target\n")
    with pytest.raises(ValueError, match=r"header\.csv has a header.*but no data rows"):
        SmilesCSVDataset(str(tmp_path / "r2"), str(header), log=False)
    other = tmp_path / "other.csv"
    other.write_text("mol,target\nCC,1.0\n")
    with pytest.raises(ValueError, match=r"SMILES column 'smiles' not found.*\['mol', 'target'\]"
                                         r".*--data\.init_args\.smiles_column"):
        SmilesCSVDataset(str(tmp_path / "r3"), str(other), log=False)
    with pytest.raises(ValueError, match=r"\['logS'\] not found.*--data\.init_args\.target_columns"):
        SmilesCSVDataset(str(tmp_path / "r4"), str(other), smiles_column="mol",
                         target_columns="logS", log=False)


def test_blank_lines_and_empty_smiles_keep_row_numbers_equal_to_csv_lines(tmp_path, csv):
    # A blank line (line 5) and an empty SMILES cell (line 8), written by hand: row r is line
    # r + 2 of the file for every row after them too, and both are listed as skipped.
    with open(csv) as f:
        lines = f.read().splitlines()
    lines.insert(4, "")
    lines[7] = "," + lines[7].split(",", 1)[1]
    path = tmp_path / "blank.csv"
    path.write_text("\n".join(lines) + "\n")
    ds = load(tmp_path, str(path), split="fold")
    table = ds.split_membership()
    for row, smiles in zip(table["row"], table["smiles"]):
        line = lines[row + 1]  # lines[0] is the header (CSV line 1)
        assert line.split(",")[0] == smiles
    skipped = table[table["split"] == "skipped"].set_index("row")["reason"]
    assert skipped[3] == "empty SMILES cell" and skipped[6] == "empty SMILES cell"
    assert table.loc[table["row"] == 7, "smiles"].item() == "CCCCCCCCCCCC"


@pytest.mark.parametrize("bad", [0, -3, 1.5, True, "12", "many"])
def test_one_node_limit_check_for_every_reader(tmp_path, csv, bad):
    """Issue 40: the CSV dataset, the data modules and the featurizer share one check."""
    from graph_urpe.data.modules.molecule import CSVDataModule
    from graph_urpe.data.processing import check_max_graph_nodes, molecules_to_graphs

    assert check_max_graph_nodes(None) is None and check_max_graph_nodes(7.0) == 7
    message = rf"max_graph_nodes must be a positive integer or None, got {bad!r}"
    for build in (lambda: check_max_graph_nodes(bad),
                  lambda: molecules_to_graphs(["CCO"], max_graph_nodes=bad, num_workers=0),
                  lambda: SmilesCSVDataset(str(tmp_path), csv, "smiles", ["a"],
                                           max_graph_nodes=bad),
                  lambda: CSVDataModule(path=csv, target_columns=["a"], max_graph_nodes=bad)):
        with pytest.raises(ValueError, match=re.escape(message)):
            build()
