"""The learned relation tables: RPE bias ``B`` and URPE multiplier ``C`` per head, against the
relation they are indexed by (shortest-path distance for graphs, relative position ``j - i`` for
sequences).

URPE attention is ``(softmax(QK^T / sqrt(d) + B) ⊙ C) V`` with ``B[i, j] = b_{r(i, j)}`` and
``C[i, j] = c_{r(i, j)}`` (Luo et al., NeurIPS 2022, arXiv 2205.13401, Eq. (4)); ``b`` and ``c``
are the rows of :class:`~graph_urpe.nn.RelationEmbedding` tables. Where the tables are stored
(read by :func:`relation_tables_from_state_dict`):

* :class:`~graph_urpe.nn.GraphormerEncoder` (inside :class:`~graph_urpe.nn.Graphormer` as
  ``encoder.``, so ``model.encoder.`` in a Lightning checkpoint) and
  :class:`~graph_urpe.nn.URPEGraphConv`: ``<prefix>spatial_bias.weight`` (``B``) and
  ``<prefix>multiplier.weight`` (``C``), each ``[max_distance + 4, H]``, or ``[max_distance + 4,
  L * H]`` (layer-major columns) with ``bias_per_layer`` / ``multiplier_per_layer``. Rows:
  distances ``0 .. max_distance`` (the last also holds longer distances), unreachable, graph
  token, padding (always 0; not drawn). The number of heads of per-layer tables comes from the
  hyperparameters or from the edge encoding's ``<prefix>edge_encoder.hop_weight`` ``[K, H, H]``.
* :class:`~graph_urpe.nn.SequenceTransformer` (also inside
  :class:`~graph_urpe.nn.TransformerLM` as ``encoder.``): ``<prefix>rel_bias.<t>.weight`` and
  ``<prefix>rel_multiplier.<t>.weight``, each ``[R, H]``, one table ``t`` shared by all layers or
  one per layer; row ``r`` is the id of :func:`~graph_urpe.nn.relative_position_ids`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch import Tensor

from graph_urpe.choices import check_at_least
from graph_urpe.nn.relations import relative_position_ids
from graph_urpe.viz._mpl import pyplot, save

__all__ = [
    "RelationTables",
    "graph_relation_labels",
    "plot_relation_tables",
    "relation_tables_figure",
    "relation_tables_from_state_dict",
    "sequence_relation_labels",
]

#: T5-mode default of :class:`~graph_urpe.nn.SequenceTransformer`'s ``max_distance``.
T5_MAX_DISTANCE = 128


class RelationTables(NamedTuple):
    """``B`` and ``C`` of one model, ready for :func:`plot_relation_tables`.

    Attributes:
        bias (Tensor or None): ``[R, H]`` (shared by all layers) or ``[L, R, H]`` float32, CPU.
        multiplier (Tensor or None): same layout, :obj:`None` for RPE models.
        labels (list[str]): ``R`` names of the relations (x-axis tick labels).
        xlabel (str): what the relations are.
    """

    bias: Tensor | None
    multiplier: Tensor | None
    labels: list[str]
    xlabel: str


def graph_relation_labels(max_distance: int) -> list[str]:
    """Names of Graphormer's relation ids except padding: ``"0" .. "≥M"``, ``"unreach."``,
    ``"token"`` (ids of :func:`~graph_urpe.nn.graph_relation_ids`; length ``max_distance + 3``).

    Raises:
        ValueError: for a negative ``max_distance``.
    """
    check_at_least(0, max_distance=max_distance)
    return [str(d) for d in range(max_distance)] + [f"≥{max_distance}", "unreach.", "token"]


def sequence_relation_labels(
    max_distance: int, causal: bool = False, num_buckets: int | None = None
) -> list[str]:
    """Names of the relative-position ids of :func:`~graph_urpe.nn.relative_position_ids`, as the
    values of ``j - i`` they cover: ``"3"``, a range ``"8..15"``, or an open end ``"≥128"`` /
    ``"≤-128"``. Computed by evaluating the id function on a query in the middle of a long enough
    sequence (causal: keys ``j <= i`` only), so it follows the function in every mode.

    Returns:
        list[str]: one label per id (``""`` for an id that no relative position reaches).

    Raises:
        ValueError: as :func:`~graph_urpe.nn.relative_position_ids`.
    """
    margin = max_distance + 2
    ids = relative_position_ids(
        margin + 1, 2 * margin + 1, max_distance=max_distance, causal=causal,
        num_buckets=num_buckets,
    )[margin]
    rel = torch.arange(-margin, margin + 1)
    if causal:
        ids, rel = ids[rel <= 0], rel[rel <= 0]
    labels = []
    for r in range(int(ids.max()) + 1):
        covered = rel[ids == r]
        if not len(covered):
            labels.append("")
            continue
        lo, hi = int(covered.min()), int(covered.max())
        if lo == -margin:
            labels.append(f"≤{hi}")
        elif hi == margin:
            labels.append(f"≥{lo}")
        else:
            labels.append(str(lo) if lo == hi else f"{lo}..{hi}")
    return labels


def _find_hparam(hparams: Any, name: str) -> Any:
    """The first non-None value stored under ``name`` in nested mappings and lists (depth first);
    :obj:`None` if absent."""
    if isinstance(hparams, Mapping):
        if hparams.get(name) is not None:
            return hparams[name]
        children = hparams.values()
    elif isinstance(hparams, (list, tuple)):
        children = hparams
    else:
        return None
    for child in children:
        found = _find_hparam(child, name)
        if found is not None:
            return found
    return None


def _one_key(state_dict: Mapping[str, Tensor], pattern: str, what: str) -> str | None:
    keys = [k for k in state_dict if re.fullmatch(pattern, k)]
    if len(keys) > 1:
        raise ValueError(
            f"several {what} tables in the state dict ({keys}); pass prefix= to choose one model."
        )
    return keys[0] if keys else None


def _graph_tables(state_dict, bias_key, mult_key, hparams) -> RelationTables:
    tables = {}
    num_heads = _find_hparam(hparams, "num_heads")
    prefix = (bias_key or mult_key).rsplit("spatial_bias.", 1)[0].rsplit("multiplier.", 1)[0]
    hop = state_dict.get(f"{prefix}edge_encoder.hop_weight")
    if num_heads is None and hop is not None:
        num_heads = hop.shape[-1]
    for name, key in (("bias", bias_key), ("multiplier", mult_key)):
        if key is None:
            tables[name] = None
            continue
        weight = state_dict[key].detach().float().cpu()[:-1]  # drop the padding row
        width = weight.shape[1]
        if num_heads is not None and width != num_heads:
            if width % num_heads:
                raise ValueError(
                    f"{key} has {width} columns, not a multiple of num_heads={num_heads}."
                )
            weight = weight.view(weight.shape[0], width // num_heads, num_heads).transpose(0, 1)
        tables[name] = weight
    num_rel = next(t for t in tables.values() if t is not None).shape[-2]
    return RelationTables(
        tables["bias"], tables["multiplier"], graph_relation_labels(num_rel - 3),
        "shortest-path distance",
    )


def _sequence_tables(state_dict, prefix, hparams) -> RelationTables:
    tables = {}
    for name, module in (("bias", "rel_bias"), ("multiplier", "rel_multiplier")):
        pattern = re.compile(re.escape(prefix) + module + r"\.(\d+)\.weight")
        found = sorted(
            (int(m.group(1)), v) for k, v in state_dict.items() if (m := pattern.fullmatch(k))
        )
        weights = [v.detach().float().cpu() for _, v in found]
        tables[name] = (
            None if not weights else weights[0] if len(weights) == 1 else torch.stack(weights)
        )
    num_rel = next(t for t in tables.values() if t is not None).shape[-2]
    is_lm = any(k.startswith(prefix.rsplit("encoder.", 1)[0] + "output.") for k in state_dict)
    causal = _find_hparam(hparams, "causal")
    causal = is_lm if causal is None else bool(causal)
    num_buckets = _find_hparam(hparams, "num_buckets")
    max_distance = _find_hparam(hparams, "max_distance")
    if num_buckets is not None:
        max_distance = T5_MAX_DISTANCE if max_distance is None else max_distance
        labels = sequence_relation_labels(max_distance, causal, num_buckets)
    else:
        max_distance = num_rel - 1 if causal else (num_rel - 1) // 2
        labels = sequence_relation_labels(max_distance, causal)
    if len(labels) != num_rel:
        raise ValueError(
            f"the sequence tables have {num_rel} relations but causal={causal}, "
            f"max_distance={max_distance}, num_buckets={num_buckets} give {len(labels)}: pass "
            "the checkpoint's hyper_parameters as hparams."
        )
    return RelationTables(tables["bias"], tables["multiplier"], labels, "relative position j - i")


def relation_tables_from_state_dict(
    state_dict: Mapping[str, Tensor], hparams: Mapping[str, Any] | None = None, prefix: str = ""
) -> RelationTables:
    """Read ``B`` and ``C`` out of a model's (or a Lightning checkpoint's) ``state_dict``.

    No model is rebuilt: the tables are found by their key names (module docstring), under any
    prefix (e.g. ``model.encoder.`` in a Lightning checkpoint of a Graphormer). Per-layer graph
    tables are split into layers with ``num_heads`` from ``hparams`` (searched in nested
    mappings), else from the edge encoding's ``edge_encoder.hop_weight`` ``[K, H, H]`` beside the
    tables; without either, the columns are taken as heads.
    Sequence tables are labelled with ``causal``, ``num_buckets`` and ``max_distance`` from
    ``hparams``; missing values are inferred (causal iff the model is a
    :class:`~graph_urpe.nn.TransformerLM`; ``max_distance`` from the table size), so T5-bucketed
    models need ``hparams``.

    Args:
        state_dict (Mapping[str, Tensor]): e.g. ``torch.load(ckpt, weights_only=True)["state_dict"]``
            or ``model.state_dict()``.
        hparams (Mapping, optional): e.g. the checkpoint's ``"hyper_parameters"``.
            (default: :obj:`None`)
        prefix (str, optional): only keys starting with this. (default: :obj:`""`)

    Returns:
        RelationTables: ``bias`` / ``multiplier`` ``[R, H]`` or ``[L, R, H]`` float32 on the CPU
        (graph tables without the padding row), labels and x-axis name.

    Raises:
        ValueError: if the state dict holds no relation table (an ``attention="none"`` /
            ``attention="none"`` or ``"ape"`` model), several models' tables, or tables whose size
            does not fit the configuration.
    """
    p = re.escape(prefix) + r"(?:.*\.)?"
    bias_key = _one_key(state_dict, p + r"spatial_bias\.weight", "spatial bias")
    mult_key = _one_key(state_dict, p + r"multiplier\.weight", "multiplier")
    if bias_key or mult_key:
        return _graph_tables(state_dict, bias_key, mult_key, hparams)
    seq = _one_key(state_dict, p + r"rel_bias\.0\.weight", "sequence bias") or _one_key(
        state_dict, p + r"rel_multiplier\.0\.weight", "sequence multiplier"
    )
    if seq is None:
        raise ValueError(
            "the state dict holds no relation table (spatial_bias / multiplier / rel_bias / "
            "rel_multiplier): the model uses no relative positional encoding (attention or "
            "attention 'none' / 'ape'), so there is no B or C to draw."
        )
    seq_prefix = re.sub(r"rel_(?:bias|multiplier)\.0\.weight$", "", seq)
    return _sequence_tables(state_dict, seq_prefix, hparams)


def _as_layers(name: str, table: Tensor | None) -> Tensor | None:
    if table is None:
        return None
    table = torch.as_tensor(table).detach().float().cpu()
    if table.dim() == 2:
        return table.unsqueeze(0)
    if table.dim() != 3:
        raise ValueError(f"{name} must be [R, H] or [L, R, H], got shape {tuple(table.shape)}.")
    return table


def _positions_and_ticks(labels: list[str], max_ticks: int = 24) -> tuple[list[int], list[int]]:
    """The x position of each relation and the relations that get a tick label.

    Ticks: every ``k``-th relation (``k`` chosen so at most about ``max_ticks`` remain) and every
    non-numeric one (``unreach.``, ``token``, open ends such as ``≥36``). Positions: the relation
    index, except that a non-numeric relation sits ``k`` positions from its neighbours (not 1),
    so that no two tick labels are closer than ``k`` positions and none overlap."""
    step = max(1, -(-len(labels) // max_ticks))
    special = [not label.lstrip("-").isdigit() for label in labels]
    positions = []
    for i in range(len(labels)):
        gap = step if i and (special[i] or special[i - 1]) else 1
        positions.append(positions[-1] + gap if i else 0)
    ticks = [i for i in range(len(labels)) if special[i] or i % step == 0]
    # A numeric tick right before a non-numeric one sits closer than k: leave it out.
    ticks = [i for j, i in enumerate(ticks) if special[i] or j + 1 == len(ticks)
             or positions[ticks[j + 1]] - positions[i] >= step]
    return positions, ticks


def relation_tables_figure(
    bias: Tensor | None,
    multiplier: Tensor | None,
    labels: list[str],
    xlabel: str = "relation",
    title: str | None = None,
):
    """Draw ``B`` and ``C`` against the relation: one line per head, one row of panels per layer.

    The left column shows ``B`` (additive, before the softmax; dashed line at 0), the right
    column ``C`` (multiplies the attention probabilities; dashed line at 1, URPE's initial value =
    plain RPE, and at 0 when in range). Each panel's y-range spans its values and that initial
    level (0 for ``B``, 1 for ``C``). A table shared by all layers fills the first row only.

    Args:
        bias (Tensor, optional): ``[R, H]`` or ``[L, R, H]``.
        multiplier (Tensor, optional): ``[R, H]`` or ``[L', R, H]`` (``L'`` may differ from
            ``L``: a shared table beside per-layer ones).
        labels (list[str]): ``R`` relation names (e.g. :func:`graph_relation_labels`).
        xlabel (str, optional): x-axis name. (default: :obj:`"relation"`)
        title (str, optional): figure title. (default: :obj:`None`)

    Returns:
        matplotlib.figure.Figure: panel ``[layer, column]``; in each, line ``h`` is head ``h``
        (y = table value; x = relation index ``0..R-1`` when at most about 24 relations, else
        the index with the non-numeric relations (open ends, ``unreach.``, ``token``) set ``k``
        apart from their neighbours, ``k`` the spacing of the tick labels).

    Raises:
        ValueError: if both tables are None, a table is not 2-D / 3-D, or the sizes of the
            tables and ``labels`` disagree.
        ImportError: if matplotlib is missing.
    """
    tables = [("B (bias)", _as_layers("bias", bias)), ("C (multiplier)",
                                                       _as_layers("multiplier", multiplier))]
    tables = [(name, t) for name, t in tables if t is not None]
    if not tables:
        raise ValueError("give bias or multiplier (both are None).")
    for name, t in tables:
        if t.shape[1] != len(labels) or t.shape[2] != tables[0][1].shape[2]:
            raise ValueError(
                f"{name} has shape {tuple(t.shape)} ([L, R, H]); expected R = len(labels) = "
                f"{len(labels)} relations and the same H for both tables."
            )
    plt = pyplot()
    rows = max(t.shape[0] for _, t in tables)
    num_heads = tables[0][1].shape[2]
    cmap = plt.get_cmap("tab10" if num_heads <= 10 else "viridis")
    colors = [cmap(h if num_heads <= 10 else h / max(num_heads - 1, 1)) for h in range(num_heads)]
    width = max(5.0, min(8.0, 0.18 * len(labels) + 2))
    fig, axes = plt.subplots(rows, len(tables), figsize=(width * len(tables), 2.6 * rows + 0.8),
                             squeeze=False, layout="constrained")
    x, ticks = _positions_and_ticks(labels)
    marker = "o" if len(labels) <= 60 else None
    for col, (name, table) in enumerate(tables):
        for layer in range(rows):
            ax = axes[layer, col]
            if layer >= table.shape[0]:
                ax.set_visible(False)
                continue
            for h in range(num_heads):
                ax.plot(x, table[layer, :, h].numpy(), color=colors[h], lw=1.1, marker=marker,
                        ms=2.5, label=f"head {h}")
            # The y-range covers the values and the initial level (C: 1, plain RPE; B: 0), so a
            # table that moved little from it is not flattened against a far reference line.
            init = 1.0 if name.startswith("C") else 0.0
            lo = min(float(table[layer].min()), init)
            hi = max(float(table[layer].max()), init)
            pad = 0.06 * (hi - lo) if hi > lo else 0.05
            ax.set_ylim(lo - pad, hi + pad)
            for ref in (0.0, 1.0) if name.startswith("C") else (0.0,):
                if lo - pad <= ref <= hi + pad:
                    ax.axhline(ref, color="grey", lw=0.7, ls="--", zorder=0)
            scope = "shared by all layers" if table.shape[0] == 1 else f"layer {layer}"
            ax.set_title(f"{name}, {scope}", fontsize=10)
            # Vertical labels: at most one line of text every k relations (no overlap).
            ax.set_xticks([x[i] for i in ticks], [labels[i] for i in ticks], rotation=90,
                          fontsize=7)
            ax.grid(alpha=0.3)
            if layer == table.shape[0] - 1:
                ax.set_xlabel(xlabel)
    handles, names = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, names, loc="outside lower center", ncol=min(num_heads, 8), fontsize=8)
    if title:
        fig.suptitle(title)
    return fig


def plot_relation_tables(
    bias: Tensor | None,
    multiplier: Tensor | None,
    labels: list[str],
    out_path: str | Path,
    xlabel: str = "relation",
    title: str | None = None,
) -> Path:
    """Write the figure of :func:`relation_tables_figure` to ``out_path`` (PNG).

    Example:
        >>> from graph_urpe.nn import Graphormer
        >>> model = Graphormer(1, 28, edge_encoding="none", num_layers=2, num_heads=4)
        >>> t = relation_tables_from_state_dict(model.state_dict())
        >>> plot_relation_tables(t.bias, t.multiplier, t.labels, "tables.png", t.xlabel)  # doctest: +SKIP

    Returns:
        Path: ``out_path``.
    """
    return save(relation_tables_figure(bias, multiplier, labels, xlabel, title), out_path)
