"""ECFP4 bit vectors and the Tanimoto kernel: the one place for both in graph-urpe.

* **ECFP4** (Rogers & Hahn, J. Chem. Inf. Model. 2010): RDKit's Morgan generator, radius 2,
  folded to :data:`ECFP4_BITS` = 2048 bits, as 0/1 ``uint8`` rows (:func:`ecfp4`); stored
  bit-packed, 256 bytes a molecule (:func:`pack_bits`, :func:`unpack_bits`: NumPy's
  :func:`~numpy.packbits` order, the first bit in the highest bit of the first byte).
* **Tanimoto kernel** :math:`K(a, b) = |a \\cap b| / (|a| + |b| - |a \\cap b|)`, 1 for two empty
  fingerprints (:func:`tanimoto_kernel`): RDKit's ``DataStructs.BulkTanimotoSimilarity`` on
  the same bits, and a positive semi-definite kernel on bit vectors (Gower 1971; Ralaivola et
  al., Neural Networks 2005), so it serves as a precomputed SVM kernel.

Used by the classical model of the CSV route (:mod:`graph_urpe.models.classical`) and the
classical anchor of the Chemprop peer benchmark (``benchmarks/peers/_classical.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["ECFP4_BITS", "ecfp4", "pack_bits", "tanimoto_kernel", "unpack_bits"]

ECFP4_BITS = 2048
"""Folded length of the ECFP4 bit vectors."""


def ecfp4(smiles: Sequence[str], n_bits: int = ECFP4_BITS) -> np.ndarray:
    """ECFP4 bit vectors of SMILES strings.

    Args:
        smiles (Sequence[str]): ``N`` SMILES.
        n_bits (int, optional): folded length. (default: :data:`ECFP4_BITS`)

    Returns:
        numpy.ndarray: ``[N, n_bits]`` ``uint8`` of 0/1.

    Raises:
        ValueError: a SMILES that RDKit cannot parse (named with its position): drop the row
            first.
    """
    from rdkit import Chem, rdBase
    from rdkit.Chem import rdFingerprintGenerator

    generator = rdFingerprintGenerator.GetMorganGenerator(radius=2, fpSize=n_bits)
    out = np.zeros((len(smiles), n_bits), dtype=np.uint8)
    with rdBase.BlockLogs():
        for i, smi in enumerate(smiles):
            mol = Chem.MolFromSmiles(str(smi))
            if mol is None:
                raise ValueError(f"SMILES {i} ({smi!r}) does not parse; drop the row first")
            out[i] = generator.GetFingerprintAsNumPy(mol)
    return out


def pack_bits(bits: np.ndarray) -> np.ndarray:
    """Bit-pack fingerprint rows (:func:`numpy.packbits` per row), as the checkpoint stores them.

    Args:
        bits (numpy.ndarray): ``[N, D]`` 0/1 values (any integer or bool dtype).

    Returns:
        numpy.ndarray: ``[N, ceil(D / 8)]`` ``uint8``, most significant bit first.
    """
    return np.packbits(np.asarray(bits, dtype=np.uint8), axis=1)


def unpack_bits(packed: np.ndarray, n_bits: int = ECFP4_BITS) -> np.ndarray:
    """The inverse of :func:`pack_bits`.

    Args:
        packed (numpy.ndarray): ``[N, ceil(n_bits / 8)]`` ``uint8``.
        n_bits (int, optional): bits per row. (default: :data:`ECFP4_BITS`)

    Returns:
        numpy.ndarray: ``[N, n_bits]`` ``uint8`` 0/1 rows.
    """
    return np.unpackbits(np.asarray(packed, dtype=np.uint8), axis=1, count=n_bits)


def tanimoto_kernel(a: np.ndarray, b: np.ndarray, block: int = 2048) -> np.ndarray:
    """Tanimoto similarity of every row of :obj:`a` with every row of :obj:`b`.

    The intersections are float32 matrix products (exact: counts up to ``D`` <= 2^24), the ratio
    float64, in blocks of :obj:`block` rows of :obj:`a`: besides the ``[N, M]`` result, memory
    of ``block x M x 12`` bytes.

    Args:
        a (numpy.ndarray): ``[N, D]`` 0/1 rows.
        b (numpy.ndarray): ``[M, D]`` 0/1 rows.
        block (int, optional): rows of :obj:`a` at a time. (default: :obj:`2048`)

    Returns:
        numpy.ndarray: ``[N, M]`` float64 in ``[0, 1]``; 1 where both fingerprints are empty.

    Raises:
        ValueError: rows of different lengths.
    """
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(f"fingerprints of shapes {list(a.shape)} and {list(b.shape)}: give two "
                         "[N, D] arrays of the same D")
    b32 = b.astype(np.float32)
    b_count = b32.sum(1, dtype=np.float64)
    out = np.empty((len(a), len(b)))
    for start in range(0, len(a), block):
        a32 = a[start:start + block].astype(np.float32)
        part = out[start:start + block]
        part[:] = a32 @ b32.T
        union = a32.sum(1, dtype=np.float64)[:, None] + b_count[None, :] - part
        empty = union <= 0
        union[empty] = 1.0
        part /= union
        part[empty] = 1.0
    return out
