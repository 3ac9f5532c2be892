"""The sharded pretraining-set builder (datasets/build_pretrain_rdkit.py): column filters checked on
hand-made columns, shards resumed (not recomputed) and the table standardised on the train rows."""

import importlib.util
import os
import sys

import numpy as np
import pandas as pd
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location(
    "build_pretrain_rdkit", os.path.join(ROOT, "datasets", "build_pretrain_rdkit.py"))
builder = importlib.util.module_from_spec(_spec)
sys.modules["build_pretrain_rdkit"] = builder  # worker processes pickle its functions by name
_spec.loader.exec_module(builder)


def test_families():
    assert builder.family("d_Chi3v") == "topological"
    assert builder.family("d_BalabanJ") == "topological"
    assert builder.family("d_fr_ester") == "counts"
    assert builder.family("d_NumHDonors") == "counts"
    assert builder.family("m_1750") == "counts"
    assert builder.family("d_MolLogP") == "physchem"
    assert builder.family("d_TPSA") == "physchem"


def test_kept_descriptors_drop_constant_duplicate_unbounded_and_missing():
    rng = np.random.default_rng(0)
    a = rng.normal(size=2000)
    x = np.stack([
        a,                                   # kept
        np.ones(2000),                       # constant
        2 * a + 1,                           # duplicate of column 0 (r = 1)
        rng.normal(size=2000) * 1e7,         # unbounded
        np.where(np.arange(2000) < 100, np.nan, rng.normal(size=2000)),  # 5 % missing
        rng.normal(size=2000),               # kept
        np.where(np.arange(2000) == 0, 1.0, 0.0),  # one row in 2000 differs (< 0.1 %)
    ], axis=1)
    assert builder._kept_descriptors(x) == [0, 5]


def test_shards_resume_and_table_is_standardised(tmp_path):
    smiles = pd.Series(["CCO", "c1ccccc1O", "CC(=O)Nc1ccccc1", "bad(", "CCN(CC)CC", "OCC(O)CO",
                        "c1ccncc1", "CC(C)Cc1ccc(C(C)C(=O)O)cc1", "C1CCCCC1N", "O=C(O)c1ccccc1"])
    order = np.arange(len(smiles))
    folder = str(tmp_path / "shards")
    paths = builder.build_shards(smiles, order, 3, 4, folder, workers=1, part=(1, 2))
    assert [os.path.isfile(p) for p in paths] == [False, True, False]   # only k % 2 == 1
    paths = builder.build_shards(smiles, order, 3, 4, folder, workers=1)
    stamp = os.path.getmtime(paths[1])
    assert builder.build_shards(smiles, order, 3, 4, folder, workers=1) == paths
    assert os.path.getmtime(paths[1]) == stamp                          # not recomputed
    assert len(np.load(paths[0])["moses_row"]) == 3                      # "bad(" left out
    frame, stats = builder.build_table(smiles, paths, 9, valid=1, test=2, morgan_bits=5)
    assert frame["split"].tolist() == ["valid"] + ["test"] * 2 + ["train"] * 6
    assert frame["moses_row"].tolist() == [0, 1, 2, 4, 5, 6, 7, 8, 9]
    assert frame["smiles"].tolist() == smiles.drop(3).tolist()
    train = frame[frame["split"] == "train"][stats["columns"]].to_numpy(np.float64)
    assert np.nanmean(train, 0) == pytest.approx(np.zeros(train.shape[1]), abs=1e-5)
    assert sum(c.startswith("m_") for c in stats["columns"]) == 5
    assert np.abs(frame[stats["columns"]].to_numpy()).max() <= builder.CLIP
    mw = np.load(paths[0])["descriptors"][:, builder.NAMES.index("MolWt")]
    assert mw[0] == pytest.approx(46.069, abs=1e-3)                      # ethanol
