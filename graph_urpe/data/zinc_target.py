"""The ZINC benchmark's regression target: constrained solubility (penalised logP), with RDKit.

Definition (Gómez-Bombarelli et al. 2018; Kusner et al. 2017; normalised as in Jin et al.,
"Junction Tree Variational Autoencoder", ICML 2018, and used as ``logP_SA_cycle_normalized`` by the
ZINC data set of Dwivedi et al., "Benchmarking Graph Neural Networks")::

    y = (logP - mu_logP) / sd_logP + (-SA - mu_-SA) / sd_-SA + (-ring - mu_-ring) / sd_-ring

* ``logP``: Wildman-Crippen octanol/water partition coefficient, :func:`rdkit.Chem.Crippen.MolLogP`.
* ``SA``: synthetic accessibility score (Ertl & Schuffenhauer 2009), RDKit Contrib ``sascorer``.
* ``ring``: ring penalty ``max(0, size of the largest ring - 6)``, rings from RDKit's smallest set of
  smallest rings (``mol.GetRingInfo().AtomRings()``); 0 without rings.
* means and standard deviations: the ZINC250k statistics used by JT-VAE (:data:`NORMALIZATION`).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import os

from rdkit import Chem, RDConfig
from rdkit.Chem import Crippen

from graph_urpe.data.featurize import parse_smiles

NORMALIZATION = {
    "logp": (2.4570953396190123, 1.434324401111988),
    "neg_sa": (-3.0525811293166134, 0.8335207024513095),
    "neg_ring": (-0.0485696876403053, 0.2860212110245455),
}
"""``(mean, std)`` of logP, -SA and -ring penalty on ZINC250k (JT-VAE's constants)."""


@functools.lru_cache(maxsize=1)
def _sascorer():
    """RDKit's Contrib SA_Score module, loaded from ``RDConfig.RDContribDir`` (it is not a package)."""
    path = os.path.join(RDConfig.RDContribDir, "SA_Score", "sascorer.py")
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"RDKit's SA_Score contribution is missing ({path}); install an RDKit build that "
            "ships rdkit/Contrib (the PyPI 'rdkit' wheels do)"
        )
    spec = importlib.util.spec_from_file_location("sascorer", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclasses.dataclass(frozen=True)
class ConstrainedSolubility:
    r"""The target and its raw components for one molecule.

    Args:
        logp (float): Crippen logP.
        sa (float): synthetic accessibility score (1 = easy ... 10 = hard).
        ring_penalty (int): ``max(0, largest ring size - 6)``.
        value (float): the normalised sum (the ZINC target).
    """

    logp: float
    sa: float
    ring_penalty: int
    value: float


def ring_penalty(mol: Chem.Mol) -> int:
    r"""``max(0, largest ring size - 6)`` over RDKit's SSSR rings (0 for an acyclic molecule)."""
    rings = mol.GetRingInfo().AtomRings()
    largest = max((len(r) for r in rings), default=0)
    return max(0, largest - 6)


def constrained_solubility(smiles_or_mol: str | Chem.Mol) -> ConstrainedSolubility:
    r"""Computes the ZINC constrained-solubility target (see the module docstring).

    Args:
        smiles_or_mol (str or rdkit.Chem.Mol): a SMILES string or a sanitised molecule.

    Returns:
        ConstrainedSolubility: ``value`` is the dimensionless target; components are kept for
        inspection.

    Raises:
        MoleculeError: if the SMILES is invalid.
    """
    mol = parse_smiles(smiles_or_mol) if isinstance(smiles_or_mol, str) else smiles_or_mol
    logp = Crippen.MolLogP(mol)
    sa = _sascorer().calculateScore(mol)
    ring = ring_penalty(mol)
    (m_l, s_l), (m_s, s_s), (m_r, s_r) = (NORMALIZATION[k] for k in ("logp", "neg_sa", "neg_ring"))
    value = (logp - m_l) / s_l + (-sa - m_s) / s_s + (-ring - m_r) / s_r
    return ConstrainedSolubility(logp=logp, sa=sa, ring_penalty=ring, value=value)
