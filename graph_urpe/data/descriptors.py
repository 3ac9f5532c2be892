"""Molecule-level RDKit 2D descriptors: the labels of the pretraining set of the shipped encoder.

Chemprop's foundation model is pretrained to predict Mordred descriptors computed for a million
molecules; the encoder in :mod:`graph_urpe.pretrained` is pretrained the same way, on the
:data:`DESCRIPTORS` below (42 cheap, informative RDKit 2D descriptors: size, shape, polarity,
lipophilicity, charge, rings, topological indices). Counts and areas with heavy right tails
(:data:`LOG_DESCRIPTORS`) are taken as ``log1p``; the builder
(``datasets/build_pretrain_descriptors.py``) then standardises every column with the training
split's mean and standard deviation. Descriptors left out: those constant on lead-like molecules
(radical electrons, most ``fr_*`` counts), exact duplicates (``ExactMolWt``, ``HeavyAtomMolWt``)
and unbounded ones (``Ipc``).
"""

from __future__ import annotations

import math

from rdkit import Chem, RDLogger
from rdkit.Chem import Descriptors

__all__ = ["DESCRIPTORS", "LOG_DESCRIPTORS", "descriptor_vector"]

DESCRIPTORS: tuple[str, ...] = (
    "MolWt", "HeavyAtomCount", "NumValenceElectrons", "MolLogP", "MolMR", "TPSA", "LabuteASA",
    "FractionCSP3", "NumHDonors", "NumHAcceptors", "NHOHCount", "NOCount", "NumHeteroatoms",
    "NumRotatableBonds", "RingCount", "NumAromaticRings", "NumAliphaticRings",
    "NumSaturatedRings", "NumAromaticHeterocycles", "NumAromaticCarbocycles",
    "NumAtomStereoCenters", "NumAmideBonds", "MaxPartialCharge", "MinPartialCharge",
    "MaxEStateIndex", "MinEStateIndex", "qed", "BalabanJ", "BertzCT", "Chi0v", "Chi1v", "Chi2v",
    "Chi3v", "Chi4v", "Kappa1", "Kappa2", "Kappa3", "HallKierAlpha", "Phi",
    "FpDensityMorgan2", "BCUT2D_LOGPHI", "BCUT2D_CHGHI",
)
"""Names of the RDKit descriptors (functions of :data:`rdkit.Chem.Descriptors._descList`), in
column order."""

LOG_DESCRIPTORS: frozenset[str] = frozenset({
    "NumHDonors", "NHOHCount", "NumRotatableBonds", "NumAromaticHeterocycles",
    "NumAliphaticRings", "NumSaturatedRings", "NumAtomStereoCenters", "NumAmideBonds", "BertzCT",
})
"""Descriptors with heavy right tails on drug-like molecules, used as ``log1p(value)``."""

_FUNCTIONS = dict(Descriptors._descList)


def descriptor_vector(smiles: str) -> list[float]:
    r"""The :data:`DESCRIPTORS` of one molecule, :data:`LOG_DESCRIPTORS` as ``log1p``.

    Args:
        smiles (str): the molecule.

    Returns:
        list[float]: ``len(DESCRIPTORS)`` values (units: RDKit's; dimensionless counts, g/mol for
        ``MolWt``, Å² for ``TPSA`` / ``LabuteASA``); a descriptor RDKit cannot compute for this
        molecule (e.g. Gasteiger charges of some metals) is ``nan``.

    Raises:
        ValueError: if RDKit cannot parse :obj:`smiles` (the message names it).
    """
    RDLogger.DisableLog("rdApp.*")
    mol = Chem.MolFromSmiles(smiles)
    if mol is None:
        raise ValueError(f"RDKit cannot parse SMILES {smiles!r}")
    values = []
    for name in DESCRIPTORS:
        try:
            value = float(_FUNCTIONS[name](mol))
        except (ValueError, RuntimeError, ZeroDivisionError):
            value = math.nan
        if not math.isfinite(value):
            value = math.nan
        elif name in LOG_DESCRIPTORS:
            value = math.log1p(max(value, 0.0))
        values.append(value)
    return values
