"""Featurization reads each SMILES once (issue 32): the node limit is checked on the text only when
it is longer than the limit, the scaffold of a scaffold split comes from the same parse as the
features, and pair_index hands out a fresh tensor per graph."""

from __future__ import annotations

import gzip
import os.path as osp

import pandas as pd
import pytest
import torch
from rdkit import Chem

import graph_urpe
from graph_urpe.data.csv.dataset import SmilesCSVDataset
from graph_urpe.data.csv.splits import mol_scaffold, murcko_scaffold, scaffold_split
from graph_urpe.data.featurize import parse_smiles
from graph_urpe.data.processing import molecules_to_graphs
from graph_urpe.transforms import pair_index

ODD = ["[NH3+]CC(=O)[O-].[Na+]", "[2H]OC", "[Cl-]", "C/C=C/C", "C[C@H](N)O", "C[C@@H](F)Cl",
       "O=C1CC[C@H](N1)C(=O)O", "c1ccc2c(c1)[C@@H]1CC[C@H]2C1", "C1CC1.c1ccncc1", "CCO", "[U]",
       "c1cc[nH]c1", "C1=CC=CC=C1", "F[P-](F)(F)(F)(F)F"]


def _zinc(n: int) -> list[str]:
    path = osp.join(osp.dirname(graph_urpe.__file__), "data", "embedded", "zinc_like_12k.csv.gz")
    with gzip.open(path, "rt") as handle:
        return [line.split(",")[0] for line in handle.read().splitlines()[1:n + 1]]


def test_scaffold_of_the_parsed_molecule_equals_the_smiles_scaffold():
    for smiles in _zinc(300) + ODD:
        mol = parse_smiles(smiles)
        for chirality in (True, False):
            assert mol_scaffold(mol, chirality) == murcko_scaffold(smiles, chirality), smiles


@pytest.fixture
def parses(monkeypatch):
    """Counts RDKit's SMILES parses (sanitised or not)."""
    calls = []
    real = Chem.MolFromSmiles

    def counted(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(Chem, "MolFromSmiles", counted)
    return calls


def test_each_smiles_parsed_once_with_limit_keys_and_scaffold(parses):
    smiles = _zinc(50)
    graphs, errors = molecules_to_graphs(smiles, max_graph_nodes=128, canonical=True,
                                         scaffold=True, num_workers=0, progress=False)
    assert not errors and len(graphs) == 50
    assert sorted(parses) == sorted(smiles)  # one parse each: no count, no scaffold re-parse
    assert [g.scaffold for g in graphs] == [murcko_scaffold(s) for s in smiles]


def test_a_text_longer_than_the_limit_is_counted_before_sanitising(parses):
    # 6 atoms in 6 characters: refused from the unsanitised count, never sanitised.
    graphs, errors = molecules_to_graphs(["CCCCCC", "C(C)C"], max_graph_nodes=5, num_workers=0,
                                         progress=False)
    assert [e.row for e in errors] == [0] and errors[0].reason == (
        "graph has 6 nodes > max_graph_nodes=5")
    assert parses.count("CCCCCC") == 1 and parses.count("C(C)C") == 1  # within the limit: once
    assert graphs[0].num_nodes == 3
    # Bracket atoms are atoms too: 4 atoms in 16 characters, counted, then parsed.
    graphs, errors = molecules_to_graphs(["[13CH3][13CH2]OC"], max_graph_nodes=4,
                                         num_workers=0, progress=False)
    assert not errors and graphs[0].num_nodes == 4


def test_scaffold_split_of_the_dataset_equals_scaffold_split_of_its_smiles(tmp_path):
    smiles = _zinc(120) + ["not a smiles"]
    csv = tmp_path / "mols.csv"
    pd.DataFrame({"smiles": smiles, "y": range(len(smiles))}).to_csv(csv, index=False)
    ds = SmilesCSVDataset(str(tmp_path / "root"), str(csv), target_columns="y",
                          split="scaffold", log=False)
    expected = scaffold_split([g.smiles for g in ds])  # computed from the SMILES here
    got = ds.get_idx_split()
    assert all(torch.equal(got[k], expected[k]) for k in ("train", "valid", "test"))
    assert "scaffold" not in ds[0] and "canonical_key" not in ds[0]


def test_pair_index_is_a_fresh_tensor_each_call():
    first = pair_index(4)
    assert first.tolist() == [[0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3],
                              [0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3]]
    first += 7  # a caller's in-place change does not reach the next graph
    assert pair_index(4).tolist()[1][:4] == [0, 1, 2, 3]
    for n in (1, 128, 129):
        idx = pair_index(n)
        assert idx.dtype == torch.int32 and idx.shape == (2, n * n)
        assert torch.equal(idx[0].long() * n + idx[1].long(), torch.arange(n * n))
