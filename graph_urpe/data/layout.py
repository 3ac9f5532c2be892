"""The tensor layout every dataset of :mod:`graph_urpe.data` yields, enforced on graphs from loaders
that use another one (PyG's ZINC: 1-D ``x``, ``edge_attr`` and ``y``; OGB: integer ``y``).

The layout: ``x`` ``[n, F]``, ``edge_attr`` ``[E, F_e]`` (integer categorical features) and ``y``
``torch.float32`` ``[1, T]`` (one row per graph, NaN = missing label; classification labels are
0./1.), so that a collated batch has ``y`` ``[B, T]`` whatever the source.
"""

from __future__ import annotations

import torch
from torch_geometric.data import Data
from torch_geometric.transforms import BaseTransform


class StandardLayout(BaseTransform):
    r"""Reshapes a graph to the package's layout: 1-D ``x`` -> ``[n, 1]``, 1-D ``edge_attr`` ->
    ``[E, 1]``, ``y`` -> ``torch.float32`` ``[1, T]``. Other attributes are untouched.

    Shapes:
        - **input:** ``x`` ``[n]`` or ``[n, F]``; ``edge_attr`` ``[E]`` or ``[E, F_e]``; ``y``
          scalar, ``[T]`` or ``[1, T]`` (any numeric dtype).
        - **output:** ``x`` ``[n, F]``, ``edge_attr`` ``[E, F_e]``, ``y`` ``float32`` ``[1, T]``.

    Raises:
        ValueError: if ``y`` has more than one row (node-level labels are not graph labels).
    """

    def forward(self, data: Data) -> Data:
        if data.x is not None and data.x.dim() == 1:
            data.x = data.x.view(-1, 1)
        if data.edge_attr is not None and data.edge_attr.dim() == 1:
            data.edge_attr = data.edge_attr.view(-1, 1)
        y = data.y
        if isinstance(y, torch.Tensor):
            if y.dim() == 2 and y.size(0) != 1:
                raise ValueError(
                    f"graph label y must hold one row per graph, got shape {list(y.shape)}"
                )
            data.y = y.reshape(1, -1).to(torch.float32)
        return data
