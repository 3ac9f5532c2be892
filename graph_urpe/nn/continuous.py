"""Continuous pairwise relations -> per-head terms of ``B`` and ``C``, evaluated once per distinct
value.

A continuous relation (Graphormer-GD's resistance distance, Zhang, Luo, Wang, He, ICLR 2023)
reaches the attention through :class:`GaussianBasisEmbedding`: ``K`` Gaussian basis functions of
the value, then a two-layer per-head projection. :class:`ContinuousRelations` sums them over
several relations on a padded graph attention map. Both evaluate the function on the map's
:func:`distinct_values` (a batch of 128 ZINC molecules: ~60,000 pairs, ~1,400 distinct values) and
gather the per-value table back to the cells (:func:`gather_heads`): exact, and the cost of a
table rather than of the map (``benchmarks/README.md`` section 23).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from graph_urpe.choices import check_at_least, check_choice
from graph_urpe.nn.relations import CONTINUOUS_RELATIONS

__all__ = [
    "ContinuousRelations",
    "DistinctValues",
    "GaussianBasisEmbedding",
    "distinct_values",
    "gather_heads",
]


class DistinctValues(NamedTuple):
    """A real-valued pair map as its distinct values and an index into them
    (:func:`distinct_values`): ``values[index]`` is the map."""

    values: Tensor
    """The distinct values ``[U]``, sorted ascending, the map's dtype (for a map that requires
    grad: every cell's value, in the map's order, ``U`` = cells)."""
    index: Tensor
    """``[..., Nq, Nk]`` int64, the map's shape, entries in ``[0, U)``."""


def distinct_values(value: Tensor | DistinctValues) -> DistinctValues:
    """The distinct values of a pair map and the index that gathers them back
    (:func:`torch.unique` with ``return_inverse=True``), so that a function of each value is
    evaluated once per distinct value (Graphormer-GD's resistance distance:
    :class:`GaussianBasisEmbedding`). Given :class:`DistinctValues`, returns them as they are.
    On CUDA the unique's size is one host synchronisation per call (one per batch: the encoder
    and :class:`~graph_urpe.nn.URPEGraphConv` call it once, in their densification).

    A map that requires grad (a relation computed from learned weights) is kept per cell (its
    values in order, the index an ``arange``), so that its gradient reaches every cell:
    :func:`torch.unique` has no derivative, and a value shared by two cells has one gradient
    per cell.

    Args:
        value (Tensor or DistinctValues): the map ``[..., Nq, Nk]`` (real, integer or bool
            dtype, kept).

    Returns:
        DistinctValues: ``values`` ``[U]`` sorted ascending and ``index`` (int64, the map's
        shape) with ``values[index] == value`` elementwise (``-0.0`` and ``0.0`` are one value).

    Shapes:
        - **input**: ``[..., Nq, Nk]``
        - **output**: ``values`` ``[U]``, ``index`` ``[..., Nq, Nk]``

    Raises:
        TypeError: for a complex map.
    """
    if isinstance(value, DistinctValues):
        return value
    if value.is_complex():
        raise TypeError(f"a pair map must hold real values, got {value.dtype}")
    if value.requires_grad:
        index = torch.arange(value.numel(), device=value.device).view(value.shape)
        return DistinctValues(value.reshape(-1), index)
    values, index = torch.unique(value, sorted=True, return_inverse=True)
    return DistinctValues(values, index)


def gather_heads(table: Tensor, index: Tensor) -> Tensor:
    """Gather per-value head outputs back to the cells, in the attention layout.

    One ``index_select`` on the transposed ``[H, U]`` table: its backward (``index_add``, exact
    and deterministic on the CPU) was the cheapest of the exact forms measured
    (``benchmarks/README.md`` section 23: ``F.embedding``'s dense backward and advanced
    indexing's accumulating ``index_put`` cost more).

    Args:
        table (Tensor): per-value outputs ``[U, H]``.
        index (LongTensor): ``[..., Nq, Nk]`` (int64 or int32), entries in ``[0, U)``.

    Shapes:
        - **input**: ``table`` ``[U, H]``, ``index`` ``[..., Nq, Nk]``
        - **output**: ``[..., H, Nq, Nk]``, the table's dtype

    Raises:
        ValueError: for a table that is not ``[U, H]`` or an index with fewer than 2 dimensions.
        RuntimeError: (from :func:`torch.index_select`) for an index out of ``[0, U)``.
    """
    if table.dim() != 2 or index.dim() < 2:
        raise ValueError(f"gather_heads takes a table [U, H] and an index [..., Nq, Nk], got "
                         f"{list(table.shape)} and {list(index.shape)}")
    heads = table.shape[1]
    out = table.t().contiguous().index_select(1, index.reshape(-1))
    return out.view(heads, *index.shape).movedim(0, -3).contiguous()


class GaussianBasisEmbedding(nn.Module):
    r"""Per-head values of a continuous pairwise relation through Gaussian basis functions, as
    Graphormer-GD encodes the resistance distance (`Zhang et al., ICLR 2023
    <https://arxiv.org/abs/2301.09505>`_, Sec. 4):

    .. math::
        \phi_k(r) = \frac{1}{\sqrt{2 \pi} |\sigma_k|}
        \exp\Big(-\frac{(a r + b - \mu_k)^2}{2 \sigma_k^2}\Big), \quad k = 1..K,

        \mathrm{out}(r) = \mathbf{W}_2 \, \mathrm{GELU}(\mathbf{W}_1 \phi(r) + \mathbf{b}_1)
        + \mathbf{b}_2 \in \mathbb{R}^H,

    with learnable means :math:`\mu_k \sim U(0, 3)`, widths :math:`\sigma_k \sim U(0, 3)`
    (used as :math:`|\sigma_k| + 0.01`), scale :math:`a = 1` and shift :math:`b = 0`.

    The function is evaluated once per *distinct* value (:meth:`table` on
    :func:`distinct_values`) and gathered back to the cells (:func:`gather_heads`): a batch of
    128 ZINC molecules holds ~60,000 pairs but ~1,400 distinct resistance values, so this is
    exact and, for one term of ``B`` or ``C`` on such a batch, 33-86x cheaper than one evaluation
    per cell, the unique included (``benchmarks/README.md`` section 23).

    Args:
        num_heads (int): outputs per value ``H``.
        num_kernels (int, optional): Gaussians ``K`` (also the hidden width).
            (default: :obj:`128`)
        init (str, optional): the output layer: ``"normal"`` (``N(0, std)`` weights, zero bias: a
            bias ``B``) or ``"zeros"`` (all zero: a term added to ``C``, which then starts
            unchanged). (default: :obj:`"normal"`)
        std (float, optional): standard deviation of the normal inits. (default: :obj:`0.02`)

    Shapes:
        - **input**: ``[..., Nq, Nk]``, any real or integer dtype, converted to the parameters'
          dtype (``float32`` unless the module was converted, e.g. with ``.double()``), or its
          :class:`DistinctValues`; :meth:`table`: the values ``[U]``
        - **output**: ``[..., H, Nq, Nk]`` (:meth:`table`: ``[U, H]``) in the parameters' dtype;
          inside :func:`torch.autocast` the dtype autocast gives the two linear layers (e.g.
          ``bfloat16``; the Gaussians themselves are computed in the parameters' dtype)

    Raises:
        ValueError: for non-positive sizes or an unknown ``init``.
    """

    def __init__(self, num_heads: int, num_kernels: int = 128,
                 init: Literal["normal", "zeros"] = "normal", std: float = 0.02) -> None:
        super().__init__()
        check_at_least(1, num_heads=num_heads, num_kernels=num_kernels)
        check_choice("init", init, ("normal", "zeros"))
        self.num_heads = num_heads
        self.num_kernels = num_kernels
        self.init = init
        self.std = std
        self.means = nn.Parameter(torch.empty(num_kernels))
        self.stds = nn.Parameter(torch.empty(num_kernels))
        self.scale = nn.Parameter(torch.empty(1))
        self.shift = nn.Parameter(torch.empty(1))
        self.hidden = nn.Linear(num_kernels, num_kernels)
        self.out = nn.Linear(num_kernels, num_heads)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Means and widths ``U(0, 3)``, scale 1, shift 0, the hidden layer ``N(0, std)`` with
        zero bias, the output layer as :obj:`init`."""
        with torch.no_grad():
            self.means.uniform_(0.0, 3.0)
            self.stds.uniform_(0.0, 3.0)
            self.scale.fill_(1.0)
            self.shift.zero_()
            nn.init.normal_(self.hidden.weight, 0.0, self.std)
            nn.init.zeros_(self.hidden.bias)
            if self.init == "normal":
                nn.init.normal_(self.out.weight, 0.0, self.std)
            else:
                nn.init.zeros_(self.out.weight)
            nn.init.zeros_(self.out.bias)

    def table(self, values: Tensor) -> Tensor:
        """The function on each of the values, one row per value (negative values are values
        here: :class:`ContinuousRelations` zeroes their rows).

        Args:
            values (Tensor): ``[U]``, any real or integer dtype, converted to the parameters'.

        Shapes:
            - **input**: ``[U]``
            - **output**: ``[U, H]``, the parameters' dtype (inside :func:`torch.autocast`, the
              dtype it gives the two linear layers)
        """
        r = (self.scale * values.to(self.means.dtype) + self.shift).unsqueeze(-1)
        std = self.stds.abs() + 1e-2
        phi = torch.exp(-0.5 * ((r - self.means) / std) ** 2) / (math.sqrt(2 * math.pi) * std)
        return self.out(F.gelu(self.hidden(phi)))

    def forward(self, value: Tensor | DistinctValues) -> Tensor:
        """``[..., Nq, Nk]`` (or its :func:`distinct_values`) -> ``[..., H, Nq, Nk]``."""
        distinct = distinct_values(value)
        return gather_heads(self.table(distinct.values), distinct.index)

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}(num_heads={self.num_heads}, "
                f"num_kernels={self.num_kernels}, init={self.init!r})")


class ContinuousRelations(nn.Module):
    r"""The sum over several continuous relations of their :class:`GaussianBasisEmbedding`, on a
    padded graph attention map, zero wherever a relation has no value: padded node slots, the
    graph token's row and column, pairs in different components
    (:data:`~graph_urpe.constants.UNREACHABLE`). The integer table
    (:class:`~graph_urpe.nn.RelationEmbedding` over :func:`~graph_urpe.nn.graph_relation_ids`)
    covers those cells.

    Args:
        relations (list[str]): names among :data:`~graph_urpe.nn.relations.CONTINUOUS_RELATIONS`.
        num_heads (int): outputs per pair (heads, or layers times heads).
        num_kernels (int, optional): Gaussians per relation. (default: :obj:`128`)
        init (str, optional): ``"normal"`` (a bias ``B``) or ``"zeros"`` (a term of ``C``).
            (default: :obj:`"normal"`)

    Shapes:
        - **input**: ``values``, a mapping from each relation's name to its padded values
          ``[B, N', N']`` (:data:`~graph_urpe.constants.UNREACHABLE` where there is none), or
          to their :func:`distinct_values` (computed once per batch, shared by ``B`` and ``C``)
        - **output**: ``[B, H, N', N']``, dtype as :class:`GaussianBasisEmbedding`'s output

    Raises:
        ValueError: for a relation that is not continuous, or (at call time) a missing one.
    """

    def __init__(self, relations: Sequence[str], num_heads: int, num_kernels: int = 128,
                 init: Literal["normal", "zeros"] = "normal") -> None:
        super().__init__()
        for name in relations:
            check_choice("continuous relation", name, CONTINUOUS_RELATIONS)
        self.embeddings = nn.ModuleDict(
            {name: GaussianBasisEmbedding(num_heads, num_kernels, init) for name in relations}
        )

    def reset_parameters(self) -> None:
        """Reset every relation's embedding."""
        for emb in self.embeddings.values():
            emb.reset_parameters()

    def forward(self, values: Mapping[str, Tensor | DistinctValues]) -> Tensor:
        """Sum the relations' terms; see the class docstring."""
        out = None
        for name, emb in self.embeddings.items():
            value = values.get(name)
            if value is None:
                raise ValueError(f"relation {name!r} is missing from the batch: build the dataset "
                                 "with graph_urpe.transforms.AddResistanceDistance() (in the CLI: "
                                 "--data.init_args.resistance true).")
            distinct = distinct_values(value)
            # Negative values (UNREACHABLE: padding, graph token, other components) get 0.
            table = emb.table(distinct.values).masked_fill((distinct.values < 0)[:, None], 0.0)
            term = gather_heads(table, distinct.index)
            out = term if out is None else out + term
        return out
