"""The peer benchmark's molecule format (``benchmarks/peers/_protocol.py``), without transformers.

The conversion of a PyG molecule to the input format of ``transformers``' Graphormer is checked on
acetic acid worked by hand; the flat-array file format round-trips; bad input raises; the
Graphormer config the benchmark builds has table sizes worked out by hand from ``transformers``'
index shifts.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
import torch

from graph_urpe.data.featurize import smiles_to_zinc_graph

PEERS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks",
                     "peers")
sys.path.insert(0, PEERS)

from _protocol import pack, to_hf_item, unpack


def acetic_acid_by_hand() -> dict:
    """CC(=O)O: atoms C0 C1 O2 (carbonyl) O3 (hydroxyl), all ZINC types 'C' = 0 / 'O' = 1; bonds
    0-1 single (1), 1=2 double (2), 1-3 single (1), both directions, sorted by (source, target)."""
    return {
        "node_feat": np.array([[0], [0], [1], [1]]),
        "edge_index": np.array([[0, 1, 1, 1, 2, 3], [1, 0, 2, 3, 1, 1]]),
        "edge_attr": np.array([[1], [1], [2], [1], [2], [1]]),
        "num_nodes": 4,
        "y": [0.5],
    }


def test_to_hf_item_matches_acetic_acid_worked_by_hand():
    data = smiles_to_zinc_graph("CC(=O)O")
    item = to_hf_item(data.x, data.edge_index, data.edge_attr, torch.tensor([[0.5]]))
    expected = acetic_acid_by_hand()
    assert item["num_nodes"] == expected["num_nodes"]
    assert item["y"] == expected["y"]
    for key in ("node_feat", "edge_index", "edge_attr"):
        assert item[key].dtype == np.int64
        np.testing.assert_array_equal(item[key], expected[key])


def test_to_hf_item_accepts_one_dimensional_features():
    item = to_hf_item(np.array([0, 1]), np.array([[0, 1], [1, 0]]), np.array([3, 3]), [2.0])
    assert item["node_feat"].shape == (2, 1) and item["edge_attr"].shape == (2, 1)
    assert item["y"] == [2.0]


@pytest.mark.parametrize("kwargs, match", [
    ({"edge_index": np.array([0, 1])}, "edge_index must be"),
    ({"edge_attr": np.array([[1]])}, "1 rows for 2 edges"),
    ({"edge_index": np.array([[0, 2], [2, 0]])}, "outside 0..1"),
    ({"x": np.array([[-1], [0]])}, "non-negative"),
])
def test_to_hf_item_rejects_bad_input(kwargs, match):
    args = {"x": np.array([[0], [1]]), "edge_index": np.array([[0, 1], [1, 0]]),
            "edge_attr": np.array([[1], [1]]), "y": [0.0]}
    with pytest.raises(ValueError, match=match):
        to_hf_item(**{**args, **kwargs})


def test_pack_unpack_round_trip_through_npz(tmp_path):
    second = {"node_feat": np.array([[5], [3]]), "edge_index": np.array([[0, 1], [1, 0]]),
              "edge_attr": np.array([[3], [3]]), "num_nodes": 2, "y": [-1.25]}
    items = [acetic_acid_by_hand(), second]
    arrays = pack(items)
    # Hand-worked flat layout: 4 + 2 nodes, 6 + 2 edges, per-graph node ids kept.
    np.testing.assert_array_equal(arrays["num_nodes"], [4, 2])
    np.testing.assert_array_equal(arrays["num_edges"], [6, 2])
    np.testing.assert_array_equal(arrays["edge_index"][:, 6:], [[0, 1], [1, 0]])
    path = tmp_path / "m.npz"
    np.savez(path, **arrays)
    with np.load(path, allow_pickle=False) as z:
        back = unpack({k: z[k] for k in z.files})
    assert len(back) == 2
    for got, want in zip(back, items, strict=True):
        assert got["num_nodes"] == want["num_nodes"] and got["y"] == want["y"]
        for key in ("node_feat", "edge_index", "edge_attr"):
            np.testing.assert_array_equal(got[key], want[key])


def test_hf_config_tables_cover_the_zinc_ids_after_transformers_shifts():
    from hf_graphormer import hf_config

    cfg = hf_config()
    # transformers: atom id a -> a + 3 (offset 1, two padding shifts), table num_atoms + 1 rows:
    # the largest ZINC atom id 27 -> 30 needs num_atoms = 30. Bond id b on a path -> b + 3: the
    # largest, 3 (triple) -> 6 needs num_edges = 6. Degrees d -> d + 1 with graph-urpe's 64 rows.
    assert (cfg["num_atoms"], cfg["num_edges"], cfg["num_in_degree"]) == (30, 6, 64)
    # Same size as Graphormer.slim: 12 layers, width / FFN 80, 8 heads, 20 hops, 40 SPD rows.
    assert (cfg["num_hidden_layers"], cfg["embedding_dim"], cfg["ffn_embedding_dim"],
            cfg["num_attention_heads"], cfg["num_edge_dis"], cfg["num_spatial"]) == (
                12, 80, 80, 8, 20, 40)
    assert cfg["pre_layernorm"] and cfg["edge_type"] == "multi_hop"
