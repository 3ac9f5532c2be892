"""SMILES featurization: ZINC atom/bond types and OGB features, checked against hand-worked
molecules and direct RDKit queries."""

import os.path as osp
import re

import networkx as nx
import pytest
import torch
from rdkit import Chem

from graph_urpe.data.featurize import (
    ZINC_ATOM_TYPES,
    MoleculeError,
    parse_smiles,
    smiles_parse_error,
    smiles_to_graph,
    smiles_to_ogb_graph,
    smiles_to_zinc_graph,
)

# The 28 types as published with the ZINC data set (benchmarking-gnns issue 42), in id order.
PUBLISHED = ['C', 'O', 'N', 'F', 'C H1', 'S', 'Cl', 'O -', 'N H1 +', 'Br', 'N H3 +', 'N H2 +',
             'N +', 'N -', 'S -', 'I', 'P', 'O H1 +', 'N H1 -', 'O +', 'S +', 'P H1', 'P H2',
             'C H2 -', 'P +', 'S H1 +', 'C H1 -', 'P H1 +']


def test_zinc_dictionary_is_the_published_one():
    assert list(ZINC_ATOM_TYPES) == PUBLISHED
    assert list(ZINC_ATOM_TYPES.values()) == list(range(28))


@pytest.mark.parametrize("smiles, types", [
    ("C", ["C"]),                                   # single atom
    ("C[NH3+]", ["C", "N H3 +"]),                   # charged, explicit H
    ("C[NH+](C)C", ["C", "N H1 +", "C", "C"]),
    ("C[NH2+]C", ["C", "N H2 +", "C"]),
    ("C[C@@H](N)O", ["C", "C H1", "N", "O"]),       # stereocentre keeps its bracket H
    ("c1cc[nH]c1", ["C", "C", "C", "N", "C"]),      # pyrrole N is "N" in Kekule SMILES
    ("O=[N+]([O-])C", ["O", "N +", "O -", "C"]),    # nitro
    ("CC[PH](=O)O", ["C", "C", "P H1", "O", "O"]),
    ("[CH2-]C", ["C H2 -", "C"]),
    ("C[S+](C)C", ["C", "S +", "C", "C"]),
    ("[13CH3]CCl", ["C", "C", "Cl"]),               # isotope ignored for typing
    ("CCO.Br", ["C", "C", "O", "Br"]),              # disconnected
])
def test_zinc_atom_types(smiles, types):
    data = smiles_to_zinc_graph(smiles)
    assert data.x.dtype == torch.long and data.x.shape == (len(types), 1)
    assert data.x.view(-1).tolist() == [ZINC_ATOM_TYPES[t] for t in types]


def test_zinc_bonds_are_kekule_orders_in_both_directions():
    # Benzene: a Kekule structure has 3 single and 3 double ring bonds.
    data = smiles_to_zinc_graph("c1ccccc1")
    assert data.edge_attr.shape == (12, 1)
    assert sorted(data.edge_attr.view(-1).tolist()) == [1] * 6 + [2] * 6
    # Each undirected bond appears once per direction with the same type.
    edges, kinds = data.edge_index.t().tolist(), data.edge_attr.view(-1).tolist()
    pairs = {(i, j): t for (i, j), t in zip(edges, kinds)}
    assert all(pairs[(j, i)] == t for (i, j), t in pairs.items())
    # Row-major order, as PyG's ZINC loader produces from the adjacency matrix.
    keys = [i * 6 + j for i, j in data.edge_index.t().tolist()]
    assert keys == sorted(keys)
    # Triple bond and single-atom graphs.
    assert smiles_to_zinc_graph("CC#N").edge_attr.view(-1).tolist() == [1, 1, 3, 3]
    single = smiles_to_zinc_graph("O")
    assert single.num_nodes == 1 and single.edge_index.shape == (2, 0)


def test_zinc_graph_matches_rdkit_connectivity():
    smiles = "CC(=O)Nc1ccc(O)cc1C1CCCCC1"
    data = smiles_to_zinc_graph(smiles)
    mol = Chem.MolFromSmiles(smiles)
    expected = nx.Graph([(b.GetBeginAtomIdx(), b.GetEndAtomIdx()) for b in mol.GetBonds()])
    got = nx.Graph([tuple(e) for e in data.edge_index.t().tolist()])
    assert nx.utils.graphs_equal(expected, got)


@pytest.mark.parametrize("smiles, fragment", [
    ("[Na+].[Cl-]", "'Na +'"),
    ("CB(O)O", "'B'"),
    ("[2H]C", "'H'"),
])
def test_zinc_refuses_atoms_outside_the_dictionary(smiles, fragment):
    with pytest.raises(MoleculeError, match=re.escape(fragment)):
        smiles_to_zinc_graph(smiles)


def test_ogb_features_match_rdkit():
    smiles = "[NH3+]CC(=O)[O-].[Na+]"  # charges and a salt
    data = smiles_to_ogb_graph(smiles)
    mol = Chem.MolFromSmiles(smiles)
    assert data.x.shape == (mol.GetNumAtoms(), 9) and data.x.dtype == torch.long
    assert data.edge_attr.shape == (2 * mol.GetNumBonds(), 3)
    for atom, row in zip(mol.GetAtoms(), data.x.tolist()):
        assert row[0] == atom.GetAtomicNum() - 1       # OGB: atomic numbers 1..119 -> 0..118
        assert row[3] == atom.GetFormalCharge() + 5    # OGB: charges -5..5 -> 0..10
        assert row[4] == atom.GetTotalNumHs()
    # Bond by bond, (i, j) then (j, i).
    for k, bond in enumerate(mol.GetBonds()):
        i, j = bond.GetBeginAtomIdx(), bond.GetEndAtomIdx()
        assert data.edge_index[:, 2 * k].tolist() == [i, j]
        assert data.edge_index[:, 2 * k + 1].tolist() == [j, i]


def test_ogb_isotopes_and_single_atoms():
    heavy = smiles_to_ogb_graph("[2H]OC")  # deuterium stays an atom
    assert heavy.num_nodes == 3 and heavy.x[0, 0].item() == 0
    single = smiles_to_graph("[Cl-]", "ogb")
    assert single.num_nodes == 1 and single.edge_attr.shape == (0, 3)


@pytest.mark.parametrize("smiles, message", [
    ("C1CC", "invalid SMILES: unclosed ring"),  # RDKit's reason, not a generic "syntax error"
    ("CC1CC2", "invalid SMILES: unclosed ring"),
    ("xyz", "invalid SMILES: syntax error around position 1"),  # RDKit's position, 1-based
    ("C==C", "invalid SMILES: syntax error around position 3"),  # the second '='
    ("C(C", "invalid SMILES: extra open parentheses around position 2"),
])
def test_smiles_syntax_errors_give_rdkits_reason(smiles, message):
    with pytest.raises(MoleculeError) as refused:
        parse_smiles(smiles)
    assert str(refused.value) == message


def test_an_empty_parser_log_gives_the_generic_reason():
    assert smiles_parse_error("") == "syntax error"
    log = "[02:19:58] SMILES Parse Error: unclosed ring for input: 'C1CC'\n"
    assert smiles_parse_error(log) == "unclosed ring"


@pytest.mark.parametrize("smiles, reason", [
    ("CC(C)(C)(C)C", "valence"),
    ("c1cccc1", "kekulize"),
    ("", "empty"),
    (float("nan"), "empty"),
])
def test_invalid_smiles_say_why(smiles, reason):
    with pytest.raises(MoleculeError, match=f"(?i){reason}"):
        parse_smiles(smiles)


def test_unknown_featurization():
    with pytest.raises(ValueError, match="featurization"):
        smiles_to_graph("C", "graphormer")


def test_feature_dims_bound_every_feature_id():
    from ogb.utils.features import get_atom_feature_dims, get_bond_feature_dims

    from graph_urpe.data.featurize import feature_dims

    assert feature_dims("zinc") == ([28], [4])
    assert feature_dims("ogb") == (get_atom_feature_dims(), get_bond_feature_dims())
    assert len(feature_dims("ogb")[0]) == 9 and len(feature_dims("ogb")[1]) == 3
    for featurization in ("zinc", "ogb"):
        atoms, bonds = feature_dims(featurization)
        for smiles in ("C[NH3+]", "CC(=O)[O-]", "c1ccccc1C#N", "C[C@@H](O)CS"):
            graph = smiles_to_graph(smiles, featurization)
            assert (graph.x < torch.tensor(atoms)).all() and (graph.x >= 0).all()
            assert (graph.edge_attr < torch.tensor(bonds)).all()
    with pytest.raises(ValueError, match="featurization"):
        feature_dims("morgan")


def test_indexed_dataset_adds_sample_id_without_touching_the_data():
    from graph_urpe.data.indexed import IndexedDataset

    graphs = [smiles_to_graph(s, "zinc") for s in ("C", "CC", "CCO")]
    view = IndexedDataset(graphs)
    assert len(view) == 3
    assert [view[i].sample_id for i in range(3)] == [0, 1, 2]
    assert torch.equal(view[2].x, graphs[2].x)
    assert "sample_id" not in graphs[2]


def test_ogb_features_equal_smiles2graph():
    """The one-parse featurizer gives OGB's smiles2graph ids, edge order and dtypes exactly."""
    import gzip

    from ogb.utils import smiles2graph
    from rdkit import rdBase

    import graph_urpe

    path = osp.join(osp.dirname(graph_urpe.__file__), "data", "embedded", "zinc_like_12k.csv.gz")
    with gzip.open(path, "rt") as handle:
        zinc = [line.split(",")[0] for line in handle.read().splitlines()[1:400]]
    odd = ["[NH3+]CC(=O)[O-].[Na+]", "[2H]OC", "[Cl-]", "C/C=C/C", "F/C=C\\F", "[CH2]C", "[Fe+3]",
           "C[C@H](N)O", "C[C@@H](F)Cl", "[U]", "C#N", "[O-][N+](=O)c1ccccc1", "[C]", "[SiH4]",
           "C1=CC=CC=C1", "[Co-6]", "[CH3+]", "c1cc[nH]c1", "F[P-](F)(F)(F)(F)F", "[He]"]
    for smiles in zinc + odd:
        with rdBase.BlockLogs():
            ref = smiles2graph(smiles)
        data = smiles_to_ogb_graph(smiles)
        assert data.x.tolist() == ref["node_feat"].tolist(), smiles
        assert data.edge_index.tolist() == ref["edge_index"].tolist(), smiles
        assert data.edge_attr.tolist() == ref["edge_feat"].tolist(), smiles
        assert data.edge_attr.shape == ref["edge_feat"].shape and data.num_nodes == ref["num_nodes"]
        assert data.x.dtype == data.edge_index.dtype == data.edge_attr.dtype == torch.long


def test_canonical_key_equal_for_the_same_molecule():
    from graph_urpe.data.processing import canonical_key

    same = [canonical_key(parse_smiles(s)) for s in ("CCO", "OCC", "C(O)C")]
    assert len(set(same)) == 1
    assert canonical_key(parse_smiles("CCN")) != same[0]
    assert canonical_key(parse_smiles("C[C@H](N)O")) != canonical_key(parse_smiles("C[C@@H](N)O"))
