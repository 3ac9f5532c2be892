"""SMILES -> PyG :class:`~torch_geometric.data.Data`: the two molecular graph featurizations used by
the datasets of this package.

* ``"ogb"``: Open Graph Benchmark features, the ids of :func:`ogb.utils.smiles2graph` (Hu et al.,
  NeurIPS 2020; computed here from the one RDKit parse, :func:`mol_to_ogb_graph`): 9 integer atom columns (atomic number, chirality, degree, formal
  charge, #H, #radical electrons, hybridisation, aromatic, in ring) and 3 integer bond columns (bond
  type, stereo, conjugated); aromatic bonds stay aromatic. Decode/encode with
  :func:`ogb.utils.features.get_atom_feature_dims` and ``get_bond_feature_dims``.
* ``"zinc"``: the ZINC benchmark's features (Dwivedi et al., "Benchmarking Graph Neural Networks",
  JMLR 2023; PyG's :class:`~torch_geometric.datasets.ZINC`): one atom column with one of 28 atom
  types (:data:`ZINC_ATOM_TYPES`) and one bond column with the bond type of the Kekulé structure,
  1 = single, 2 = double, 3 = triple (:data:`ZINC_BOND_TYPES`).

How a ZINC atom type is read from an RDKit atom. The 28 type names (published with the data set:
benchmarking-gnns issue 42 and the TU Dortmund ZINC description) are ``symbol [H<n>] [+|-]``: the
element, the hydrogen count written inside a bracket atom, and the charge. They come from Kekulé
SMILES, where a bracket atom carries its hydrogens explicitly (``[C@@H]`` -> ``C H1``, ``[NH3+]`` ->
``N H3 +``) and an atom written without brackets carries none in its name (pyrrole's ``[nH]`` is
written ``N`` in Kekulé form, which is why the dictionary has no ``N H1``). This module reproduces
that: it kekulises a copy of the molecule, clears isotopes (a ``[13C]`` is typed as ``C``), asks
RDKit how each atom is written in SMILES (:meth:`rdkit.Chem.Atom.GetSmarts`), and uses the
atom's hydrogen count only when it is written in brackets. An atom whose type is not one of the 28
(e.g. ``Na +``, ``B``, a deuterium atom ``H``) makes the molecule unusable for this featurization,
with an error naming the atom.

Both featurizations store every bond in both directions, ``edge_index`` ``[2, 2 * num_bonds]``.
"""

from __future__ import annotations

import re
from typing import Literal, get_args

import numpy as np
import torch
from ogb.utils.features import allowable_features, get_atom_feature_dims, get_bond_feature_dims
from rdkit import Chem, rdBase
from torch_geometric.data import Data

from graph_urpe.choices import check_choice

Featurization = Literal["ogb", "zinc"]
"""Names accepted by :func:`smiles_to_graph`."""
FEATURIZATIONS = get_args(Featurization)

ZINC_ATOM_TYPES: dict[str, int] = {
    "C": 0, "O": 1, "N": 2, "F": 3, "C H1": 4, "S": 5, "Cl": 6, "O -": 7, "N H1 +": 8, "Br": 9,
    "N H3 +": 10, "N H2 +": 11, "N +": 12, "N -": 13, "S -": 14, "I": 15, "P": 16, "O H1 +": 17,
    "N H1 -": 18, "O +": 19, "S +": 20, "P H1": 21, "P H2": 22, "C H2 -": 23, "P +": 24,
    "S H1 +": 25, "C H1 -": 26, "P H1 +": 27,
}
"""The 28 ZINC atom types of the benchmarking-gnns ZINC data set (its ``atom_dict``), name -> id."""

ZINC_BOND_TYPES: dict[Chem.BondType, int] = {
    Chem.BondType.SINGLE: 1, Chem.BondType.DOUBLE: 2, Chem.BondType.TRIPLE: 3,
}
"""ZINC bond type ids of the Kekulé bond orders (0 is "no bond" in the original adjacency form)."""


ZINC_ATOM_CATEGORIES: int = len(ZINC_ATOM_TYPES)
"""Vocabulary size of the ZINC atom column: the 28 ids of :data:`ZINC_ATOM_TYPES`."""

ZINC_BOND_CATEGORIES: int = max(ZINC_BOND_TYPES.values()) + 1
"""Vocabulary size of the ZINC bond column: ids 0-3 (1 single, 2 double, 3 triple; 0 is "no bond"
in the adjacency form and never appears on an edge)."""


def feature_dims(featurization: Featurization) -> tuple[list[int], list[int]]:
    r"""Vocabulary sizes of the atom and bond feature columns of a featurization, for the embedding
    tables of a model (e.g. ``Graphormer(num_tasks, *feature_dims("zinc"))``).

    Returns:
        ``(atom_dims, bond_dims)``: ``"zinc"``: ``([28], [4])`` (:data:`ZINC_ATOM_CATEGORIES`,
        :data:`ZINC_BOND_CATEGORIES`); ``"ogb"``: OGB's
        :func:`~ogb.utils.features.get_atom_feature_dims` (9 columns) and
        :func:`~ogb.utils.features.get_bond_feature_dims` (3 columns).

    Raises:
        ValueError: for an unknown :obj:`featurization`.
    """
    check_choice("featurization", featurization, Featurization)
    if featurization == "zinc":
        return [ZINC_ATOM_CATEGORIES], [ZINC_BOND_CATEGORIES]
    return list(get_atom_feature_dims()), list(get_bond_feature_dims())


class MoleculeError(ValueError):
    r"""A SMILES string that cannot be turned into a graph; the message says why."""


def smiles_text(smiles: object) -> str:
    r"""The SMILES text RDKit is given: ``smiles`` without its leading and trailing whitespace
    (RDKit drops them itself), checked to hold no whitespace inside. RDKit reads the text after
    a space, tab or line break as the molecule's name, so ``"CC O"`` would be ethane and
    ``"c1ccccc1 CCCC"`` benzene: such a text is refused, never cut.

    Args:
        smiles (object): the SMILES cell (any type; only a non-blank string is a SMILES).

    Returns:
        str: the stripped text.

    Raises:
        MoleculeError: for an empty or non-string value (``"empty SMILES cell"``) or whitespace
            inside the text (``"invalid SMILES: whitespace inside ..."``, naming the character
            and its 0-based position in the stripped text, and the fix).
    """
    if not isinstance(smiles, str) or not smiles.strip():
        raise MoleculeError("empty SMILES cell")
    text = smiles.strip()
    inside = next((i for i, c in enumerate(text) if c.isspace()), None)
    if inside is not None:
        raise MoleculeError(
            f"invalid SMILES: whitespace inside the SMILES ({text[inside]!r} at character "
            f"{inside}): RDKit would "
            "take the text after it as a name, not atoms; remove it (one molecule per cell, "
            "fragments joined with '.')")
    return text


def smiles_parse_error(log: str) -> str:
    r"""RDKit's reason for refusing a SMILES, from its parser's error log (captured with
    :class:`rdkit.rdBase.CaptureErrorLog`), without the timestamps and the repeated SMILES:
    ``"unclosed ring"``, ``"extra open parentheses around position 2"``, ``"syntax error around
    position 1"`` (RDKit's 1-based character position); ``"syntax error"`` where the log holds
    no parse error.

    Args:
        log (str): the captured messages, e.g. ``"[12:00:00] SMILES Parse Error: unclosed ring
            for input: 'C1CC'\n"``.

    Returns:
        str: the reason.
    """
    lines = [re.sub(r"^\[[\d:.]+\] ", "", line) for line in log.splitlines()]
    head = "SMILES Parse Error: "
    first = next((line[len(head):] for line in lines if line.startswith(head)), "")
    reason = re.split(r" (?:while parsing|for input):", first)[0].strip() or "syntax error"
    position = re.search(r"check for mistakes around position (\d+)", log)
    return f"{reason} around position {position.group(1)}" if position else reason


def parse_smiles(smiles: str) -> Chem.Mol:
    r"""Parses and sanitises a SMILES string with RDKit (hydrogens become implicit, except
    isotope-labelled ones such as ``[2H]``): the one parse of every SMILES this package reads
    (``fit``'s CSV, ``predict``, :class:`~graph_urpe.Predictor`, ``fingerprint``, ``explain``).

    Salts and other disconnected molecules (``.``), charges, isotopes and single atoms are accepted.
    Leading and trailing whitespace is ignored; whitespace inside is refused
    (:func:`smiles_text`).

    Args:
        smiles (str): the SMILES text.

    Returns:
        rdkit.Chem.Mol: the sanitised molecule (at least one atom).

    Raises:
        MoleculeError: for an empty or non-string value, whitespace inside the text, a syntax
            error (RDKit's reason: :func:`smiles_parse_error`), a chemically invalid structure (e.g. a pentavalent carbon; RDKit's message is
            included) or a molecule with no atoms.
    """
    text = smiles_text(smiles)
    with rdBase.BlockLogs():
        mol = Chem.MolFromSmiles(text)
        if mol is None:
            with rdBase.CaptureErrorLog() as log:
                raw = Chem.MolFromSmiles(text, sanitize=False)
            if raw is None:
                raise MoleculeError(f"invalid SMILES: {smiles_parse_error(log.messages)}")
            try:
                Chem.SanitizeMol(raw)
            except Chem.rdchem.MolSanitizeException as exc:  # valence, kekulisation, ...
                raise MoleculeError(f"invalid SMILES: {exc}") from None
            raise MoleculeError("invalid SMILES: RDKit could not parse it")
    if mol.GetNumAtoms() == 0:
        raise MoleculeError("SMILES has no atoms")
    return mol


def heavy_atom_count(smiles: str) -> int | None:
    r"""The number of atoms a SMILES's graph will have (every atom but hydrogens without an
    isotope label, as :func:`parse_smiles` keeps them), read without sanitising: linear in the
    text's length, so a limit is checked before sanitisation, featurization and shortest paths
    (RDKit's ring perception alone takes minutes on a 20,000-atom ring).

    Args:
        smiles (str): the SMILES text.

    Returns:
        int or None: the count, or :obj:`None` if :func:`parse_smiles` would refuse the text
        before RDKit reads it, or RDKit cannot parse it (then :func:`parse_smiles` says why).
    """
    try:
        text = smiles_text(smiles)
    except MoleculeError:
        return None
    with rdBase.BlockLogs():
        mol = Chem.MolFromSmiles(text, sanitize=False)
    if mol is None:
        return None
    return sum(1 for a in mol.GetAtoms() if a.GetAtomicNum() != 1 or a.GetIsotope())


def zinc_atom_type_name(atom: Chem.Atom) -> str:
    r"""The ZINC type name (``"C"``, ``"N H3 +"``, ...) of an atom of a **kekulised** molecule
    without isotope labels (see the module docstring); it may not be one of the 28 types."""
    # For an atom of a molecule read from SMILES, GetSmarts returns its SMILES text.
    bracketed = atom.GetSmarts(isomericSmiles=True).startswith("[")
    name = atom.GetSymbol()
    hydrogens = atom.GetTotalNumHs() if bracketed else 0
    if hydrogens:
        name += f" H{hydrogens}"
    charge = atom.GetFormalCharge()
    if charge:
        name += " " + ("+" if charge > 0 else "-") + (str(abs(charge)) if abs(charge) > 1 else "")
    return name


def smiles_to_zinc_graph(smiles: str) -> Data:
    r"""Featurizes a molecule as in the ZINC benchmark.

    Edges are sorted row-major (by source, then target), as PyG's ZINC loader produces them from the
    adjacency matrix.

    Args:
        smiles (str): the SMILES text.

    Returns:
        Data: ``x`` ``torch.long`` ``[n, 1]`` (ids of :data:`ZINC_ATOM_TYPES`), ``edge_index``
        ``torch.long`` ``[2, E]``, ``edge_attr`` ``torch.long`` ``[E, 1]`` (1, 2 or 3).

    Raises:
        MoleculeError: if the SMILES is invalid (:func:`parse_smiles`), an atom has no ZINC type, a
            bond is not single/double/triple after kekulisation, or the structure cannot be
            kekulised.
    """
    return mol_to_zinc_graph(parse_smiles(smiles))


def mol_to_zinc_graph(mol: Chem.Mol) -> Data:
    r"""The ZINC featurization (:func:`smiles_to_zinc_graph`) of a molecule parsed by
    :func:`parse_smiles` (it is not modified).

    Raises:
        MoleculeError: see :func:`smiles_to_zinc_graph`.
    """
    mol = Chem.Mol(mol)
    try:
        Chem.Kekulize(mol, clearAromaticFlags=True)
    except Chem.rdchem.MolSanitizeException as exc:
        raise MoleculeError(f"cannot kekulise: {exc}") from None
    types = []
    for atom in mol.GetAtoms():
        atom.SetIsotope(0)
        name = zinc_atom_type_name(atom)
        if name not in ZINC_ATOM_TYPES:
            raise MoleculeError(
                f"atom {atom.GetIdx()} has type {name!r}, which is not one of the 28 ZINC atom "
                "types; use the 'ogb' featurization for such molecules"
            )
        types.append(ZINC_ATOM_TYPES[name])
    n = len(types)
    adjacency = np.zeros((n, n), dtype=np.int64)
    for bond in mol.GetBonds():
        kind = ZINC_BOND_TYPES.get(bond.GetBondType())
        if kind is None:
            raise MoleculeError(
                f"bond {bond.GetIdx()} has type {bond.GetBondType()}, not single/double/triple"
            )
        i, j = bond.GetBeginAtomIdx(), bond.GetEndAtomIdx()
        adjacency[i, j] = adjacency[j, i] = kind
    row, col = np.nonzero(adjacency)  # row-major order
    return Data(
        x=torch.tensor(types, dtype=torch.long).view(n, 1),
        edge_index=torch.from_numpy(np.stack([row, col]).astype(np.int64)),
        edge_attr=torch.from_numpy(adjacency[row, col]).view(-1, 1),
        num_nodes=n,
    )


def _enum_table(enum: type, names: list[str], misc: int) -> np.ndarray:
    """Look-up table from an RDKit enum's integer values to the index of their name in OGB's
    list (``misc`` for the names it does not list), as OGB's ``safe_index(list, str(value))``."""
    table = np.full(max(enum.values) + 1, misc, dtype=np.int64)
    for value, member in enum.values.items():
        if str(member) in names:
            table[value] = names.index(str(member))
    return table


_OGB = allowable_features
_CHIRALITY = _enum_table(Chem.ChiralType, _OGB["possible_chirality_list"], 4)
_HYBRIDIZATION = _enum_table(Chem.HybridizationType, _OGB["possible_hybridization_list"], 5)
_BOND_TYPE = _enum_table(Chem.BondType, _OGB["possible_bond_type_list"], 4)
_BOND_STEREO = _enum_table(Chem.BondStereo, _OGB["possible_bond_stereo_list"], -1)


# OGB's safe_index over the list [low, ..., high, "misc"] of each atom column: value - low, or
# misc outside. Columns 1 (chirality) and 6 (hybridisation) are enum tables, applied after; 7
# (aromatic) and 8 (in ring) are 0 / 1 as they are.
_ATOM_LOW = np.array([1, 0, 0, -5, 0, 0, 0, 0, 0])
_ATOM_HIGH = np.array([118, 2**62, 10, 5, 8, 4, 2**62, 1, 1])
_ATOM_MISC = np.array([118, 0, 11, 11, 9, 5, 0, 0, 0])


def mol_to_ogb_graph(mol: Chem.Mol) -> Data:
    r"""OGB's features (:func:`ogb.utils.smiles2graph`) of a molecule already parsed by
    :func:`parse_smiles`: the same ids, edge order and dtypes as ``smiles2graph`` on its SMILES,
    without parsing it again (tested against ``smiles2graph``): RDKit's raw values are read once
    per atom and bond and mapped to OGB's ids with NumPy look-up tables.

    Args:
        mol (rdkit.Chem.Mol): a sanitised molecule (from :func:`parse_smiles`).

    Returns:
        Data: ``x`` ``torch.long`` ``[n, 9]``, ``edge_index`` ``torch.long`` ``[2, E]`` (bond by
        bond, ``(i, j)`` then ``(j, i)``), ``edge_attr`` ``torch.long`` ``[E, 3]``.

    Raises:
        MoleculeError: for a bond stereo label outside OGB's list (e.g. RDKit's atropisomer
            labels, on which ``smiles2graph`` fails with a bare ``ValueError``).
    """
    atom = mol.GetAtomWithIdx
    raw = np.array([(a.GetAtomicNum(), a.GetChiralTag(), a.GetTotalDegree(), a.GetFormalCharge(),
                     a.GetTotalNumHs(), a.GetNumRadicalElectrons(), a.GetHybridization(),
                     a.GetIsAromatic(), a.IsInRing())
                    for a in map(atom, range(mol.GetNumAtoms()))], dtype=np.int64).reshape(-1, 9)
    # Columns: atomic number, chirality, degree, formal charge, #H, #radical electrons,
    # hybridisation, aromatic, in ring (OGB's atom_to_feature_vector), all mapped at once.
    x = np.where((raw < _ATOM_LOW) | (raw > _ATOM_HIGH), _ATOM_MISC, raw - _ATOM_LOW)
    x[:, 1] = _CHIRALITY[raw[:, 1]]
    x[:, 6] = _HYBRIDIZATION[raw[:, 6]]
    bond = mol.GetBondWithIdx
    bonds = np.array([(b.GetBeginAtomIdx(), b.GetEndAtomIdx(), b.GetBondType(), b.GetStereo(),
                       b.GetIsConjugated()) for b in map(bond, range(mol.GetNumBonds()))],
                     dtype=np.int64).reshape(-1, 5)
    stereo = _BOND_STEREO[bonds[:, 3]]
    if (stereo < 0).any():
        k = int(np.flatnonzero(stereo < 0)[0])
        raise MoleculeError(f"bond {k} has stereo {mol.GetBondWithIdx(k).GetStereo()}, which "
                            "OGB's bond features do not list")
    features = np.stack([_BOND_TYPE[bonds[:, 2]], stereo, bonds[:, 4]], axis=1)
    pairs = bonds[:, :2]
    edge_index = np.stack([pairs, pairs[:, ::-1]], axis=1).reshape(-1, 2).T  # (i, j), (j, i)
    return Data(
        x=torch.from_numpy(x),
        edge_index=torch.from_numpy(np.ascontiguousarray(edge_index)),
        edge_attr=torch.from_numpy(np.repeat(features, 2, axis=0)),
        num_nodes=x.shape[0],
    )


def smiles_to_ogb_graph(smiles: str) -> Data:
    r"""Featurizes a molecule with OGB's atom and bond features (:func:`ogb.utils.smiles2graph`;
    computed by :func:`mol_to_ogb_graph` from one RDKit parse).

    Edge order is OGB's: bond by bond, each as ``(i, j)`` then ``(j, i)``, the order OGB's own
    loaders produce.

    Args:
        smiles (str): the SMILES text.

    Returns:
        Data: ``x`` ``torch.long`` ``[n, 9]``, ``edge_index`` ``torch.long`` ``[2, E]``,
        ``edge_attr`` ``torch.long`` ``[E, 3]``.

    Raises:
        MoleculeError: if the SMILES is invalid (:func:`parse_smiles`).
    """
    return mol_to_ogb_graph(parse_smiles(smiles))


def mol_to_graph(mol: Chem.Mol, featurization: Featurization = "ogb") -> Data:
    r"""Featurizes a molecule parsed by :func:`parse_smiles` (see :func:`smiles_to_graph`).

    Raises:
        MoleculeError: if the molecule cannot be featurized.
    """
    if featurization == "ogb":
        return mol_to_ogb_graph(mol)
    return mol_to_zinc_graph(mol)


def smiles_to_graph(smiles: str, featurization: Featurization = "ogb") -> Data:
    r"""Featurizes a SMILES string with the named featurization (see the module docstring).

    Args:
        smiles (str): the SMILES text.
        featurization (str, optional): ``"ogb"`` or ``"zinc"``. (default: :obj:`"ogb"`)

    Raises:
        ValueError: for an unknown :obj:`featurization`.
        MoleculeError: if the molecule cannot be featurized.
    """
    check_choice("featurization", featurization, Featurization)
    if featurization == "ogb":
        return smiles_to_ogb_graph(smiles)
    return smiles_to_zinc_graph(smiles)
