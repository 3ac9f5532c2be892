"""Letting OGB's loaders run under ``torch.load(weights_only=True)``, PyTorch's default since 2.6.

OGB 1.3.6 reads its processed files and split dictionaries with a bare ``torch.load(path)``. These
files hold pickled PyG :class:`~torch_geometric.data.Data` containers (and, for PCQM4Mv2's
``split_dict.pt``, NumPy arrays), which the safe unpickler refuses unless their classes are
allow-listed. :func:`allow_ogb_torch_load` allow-lists exactly those classes with
:func:`torch.serialization.add_safe_globals`; nothing turns ``weights_only`` off, so arbitrary code
in a malicious file is still refused.
"""

from __future__ import annotations

import numpy as np
import torch
from torch_geometric.data.data import DataEdgeAttr, DataTensorAttr
from torch_geometric.data.storage import GlobalStorage


def _numpy_array_globals() -> list:
    """Classes the safe unpickler needs to rebuild a pickled ``numpy.ndarray`` of int64/float."""
    try:
        from numpy._core.multiarray import _reconstruct  # NumPy >= 2
    except ImportError:  # pragma: no cover - NumPy 1.x
        from numpy.core.multiarray import _reconstruct
    return [_reconstruct, np.ndarray, np.dtype, type(np.dtype(np.int64)),
            type(np.dtype(np.float64)), type(np.dtype(np.float32))]


SAFE_GLOBALS = [DataEdgeAttr, DataTensorAttr, GlobalStorage, *_numpy_array_globals()]
"""The classes allow-listed by :func:`allow_ogb_torch_load`."""


def allow_ogb_torch_load() -> None:
    r"""Allow-lists :data:`SAFE_GLOBALS` for ``torch.load(weights_only=True)`` (idempotent).

    Called by the OGB and PCQM4Mv2 accessors of this package before they construct OGB's datasets.
    """
    torch.serialization.add_safe_globals(SAFE_GLOBALS)
