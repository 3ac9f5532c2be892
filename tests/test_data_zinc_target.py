"""ZINC constrained-solubility target against explicit RDKit calls (independent of the package's
code path: SA score imported the documented way via sys.path, rings from networkx)."""

import os
import sys

import networkx as nx
import pandas as pd
import pytest
from rdkit import Chem, RDConfig
from rdkit.Chem import Crippen

from graph_urpe.data.zinc import EMBEDDED_ZINC_LIKE
from graph_urpe.data.zinc_target import constrained_solubility

sys.path.append(os.path.join(RDConfig.RDContribDir, "SA_Score"))
import sascorer


def expected_target(smiles: str) -> float:
    mol = Chem.MolFromSmiles(smiles)
    logp = Crippen.MolLogP(mol)
    sa = sascorer.calculateScore(mol)
    graph = nx.Graph([(b.GetBeginAtomIdx(), b.GetEndAtomIdx()) for b in mol.GetBonds()])
    cycles = nx.minimum_cycle_basis(graph) if graph.number_of_edges() else []
    largest = max((len(c) for c in cycles), default=0)
    ring = max(0, largest - 6)
    return ((logp - 2.4570953396190123) / 1.434324401111988
            + (-sa - -3.0525811293166134) / 0.8335207024513095
            + (-ring - -0.0485696876403053) / 0.2860212110245455)


@pytest.mark.parametrize("smiles", [
    "CCO",
    "c1ccccc1",
    "CC(=O)Nc1ccc(O)cc1",
    "C1CCCCCCCC1",                      # 9-ring: penalty 3
    "O=C1CCCCCCCCCCC1",                 # 12-ring: penalty 6
    "Cc1ccc2[nH]ccc2c1",
    "C[NH3+].[Cl-]",
])
def test_matches_rdkit(smiles):
    assert constrained_solubility(smiles).value == pytest.approx(expected_target(smiles), abs=1e-9)


def test_ring_penalty_by_hand():
    assert constrained_solubility("C1CCCCCCCC1").ring_penalty == 3
    assert constrained_solubility("C1CCCCC1").ring_penalty == 0
    assert constrained_solubility("CCCC").ring_penalty == 0
    # Cyclohexane: logP, SA known from RDKit; the target is their normalised sum.
    r = constrained_solubility("C1CCCCC1")
    assert r.logp == pytest.approx(Crippen.MolLogP(Chem.MolFromSmiles("C1CCCCC1")))


def test_embedded_targets_recompute():
    frame = pd.read_csv(EMBEDDED_ZINC_LIKE)
    assert list(frame.columns[:3]) == ["smiles", "target", "split"]
    assert len(frame) == 12000
    assert frame["split"].value_counts().to_dict() == {"train": 10000, "valid": 1000, "test": 1000}
    assert frame["smiles"].is_unique
    for _, row in frame.sample(8, random_state=0).iterrows():
        assert row["target"] == pytest.approx(expected_target(row["smiles"]), abs=1e-8)
