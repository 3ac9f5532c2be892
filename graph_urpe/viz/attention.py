"""Attention maps of a graph model on one molecule, before and after the URPE multiplier ``C``,
and their figure beside the molecule.

For each :class:`~graph_urpe.nn.MultiheadURPEAttention` module the probabilities are recomputed
from the module's own inputs (captured with a forward pre-hook) with the plain equation

.. math::
    P = \\mathrm{softmax}\\left(\\frac{Q K^\\top}{\\sqrt{d}} + B\\right), \\qquad
    A = P \\odot C

(Luo et al., NeurIPS 2022, arXiv 2205.13401, Eq. (4)); ``Q`` and ``K`` come from the module's
``qkv_proj``. ``P`` ("before C") is a probability distribution over the keys in every row; ``A``
("after C") is what multiplies ``V``, unnormalised and possibly negative.
"""

from __future__ import annotations

import inspect
import io
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn
from torch_geometric.data import Batch

from graph_urpe.data.featurize import parse_smiles, smiles_to_graph
from graph_urpe.nn.attention import MultiheadURPEAttention
from graph_urpe.transforms import AddShortestPathDistance
from graph_urpe.viz._mpl import pyplot, save

__all__ = ["attention_figure", "attention_maps", "attention_probabilities", "plot_attention"]


def attention_probabilities(
    module: MultiheadURPEAttention,
    x: Tensor,
    attn_bias: Tensor | None = None,
    multiplier: Tensor | None = None,
    key_padding_mask: Tensor | None = None,
    is_causal: bool = False,
) -> tuple[Tensor, Tensor]:
    """The attention probabilities of ``module`` on input ``x``, before and after ``C``.

    Computed in float32 from ``module.qkv_proj`` with the plain equation of the module docstring
    (no dropout); hidden keys (padding, and ``j > i`` with ``is_causal``) get probability 0; rows
    whose keys are all hidden are 0.

    Args:
        module (MultiheadURPEAttention): the attention module.
        x (Tensor): its input ``[B, N, E]``.
        attn_bias (Tensor, optional): ``B``, broadcastable to ``[B, H, N, N]``.
            (default: :obj:`None`)
        multiplier (Tensor, optional): ``C``, broadcastable to ``[B, H, N, N]``.
            (default: :obj:`None`: after = before)
        key_padding_mask (BoolTensor, optional): ``[B, N]``, ``True`` = padded.
            (default: :obj:`None`)
        is_causal (bool, optional): hide keys ``j > i``. (default: :obj:`False`)

    Returns:
        tuple[Tensor, Tensor]: ``(before, after)``, each float32 ``[B, H, N, N]`` on ``x``'s
        device.
    """
    b, n, _ = x.shape
    h, d = module.num_heads, module.head_dim
    qkv = module.qkv_proj(x).view(b, n, 3, h, d).float()
    q, k = qkv[:, :, 0].transpose(1, 2), qkv[:, :, 1].transpose(1, 2)  # [B, H, N, d]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)
    if attn_bias is not None:
        scores = scores + attn_bias.float()
    hidden = torch.zeros(b, 1, n, n, dtype=torch.bool, device=x.device)
    if key_padding_mask is not None:
        hidden = hidden | key_padding_mask[:, None, None, :]
    if is_causal:
        hidden = hidden | torch.ones(n, n, dtype=torch.bool, device=x.device).triu(1)
    scores = scores.masked_fill(hidden, float("-inf"))
    before = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # all-hidden rows -> 0
    after = before if multiplier is None else before * multiplier.float()
    return before, after.expand_as(before)


def attention_maps(
    model: nn.Module, smiles: str, featurization: str = "ogb"
) -> list[tuple[Tensor, Tensor]]:
    """Attention maps of every attention layer of a graph model on one molecule.

    The molecule is featurised as the model was trained (:func:`graph_urpe.data.featurize.
    smiles_to_graph`), given its shortest paths (:class:`~graph_urpe.transforms.
    AddShortestPathDistance`), collated into a :class:`~torch_geometric.data.Batch` of one, and
    passed through ``model(batch)`` in eval mode without gradients (the model's train/eval mode is
    restored afterwards). A forward pre-hook on each :class:`~graph_urpe.nn.MultiheadURPEAttention`
    captures its inputs and :func:`attention_probabilities` recomputes the maps.

    Args:
        model (torch.nn.Module): a graph model called as ``model(batch)``, e.g.
            :class:`~graph_urpe.nn.Graphormer` (a Lightning module's ``.model``).
        smiles (str): the molecule.
        featurization (str, optional): ``"ogb"`` or ``"zinc"``, as the model was trained.
            (default: :obj:`"ogb"`)

    Returns:
        list[tuple[Tensor, Tensor]]: one ``(before, after)`` pair per attention call, in call order
        (layer order), each float32 ``[H, N', N']`` on the CPU; for Graphormer ``N' = n + 1``
        (row/column 0 is the graph token, then the atoms in RDKit order).

    Raises:
        ValueError: if ``model`` has no MultiheadURPEAttention module, or for an unknown
            featurisation.
        MoleculeError: if the molecule cannot be featurised.
    """
    modules = [m for m in model.modules() if isinstance(m, MultiheadURPEAttention)]
    if not modules:
        raise ValueError(
            f"{type(model).__name__} has no MultiheadURPEAttention module: attention maps can only "
            "be read from graph_urpe's attention layers."
        )
    data = AddShortestPathDistance()(smiles_to_graph(smiles, featurization))
    param = next(model.parameters(), None)
    batch = Batch.from_data_list([data]).to(param.device if param is not None else "cpu")
    captured: list[tuple[Tensor, Tensor]] = []

    def hook(module, args, kwargs):
        bound = inspect.signature(module.forward).bind(*args, **kwargs)
        bound.apply_defaults()
        a = bound.arguments
        before, after = attention_probabilities(
            module, a["x"], a.get("attn_bias"), a.get("multiplier"),
            a.get("key_padding_mask"), bool(a.get("is_causal", False)),
        )
        captured.append((before[0].cpu(), after[0].cpu()))

    handles = [m.register_forward_pre_hook(hook, with_kwargs=True) for m in modules]
    was_training = model.training
    try:
        model.eval()
        with torch.no_grad():
            model(batch)
    finally:
        for handle in handles:
            handle.remove()
        model.train(was_training)
    return captured


def _molecule_image(mol, size: int = 420) -> np.ndarray:
    """RDKit drawing of ``mol`` with atom indices, as an ``[size, size, 4]`` RGBA array."""
    from PIL import Image
    from rdkit.Chem.Draw import rdMolDraw2D

    drawer = rdMolDraw2D.MolDraw2DCairo(size, size)
    drawer.drawOptions().addAtomIndices = True
    rdMolDraw2D.PrepareAndDrawMolecule(drawer, mol)
    drawer.FinishDrawing()
    return np.asarray(Image.open(io.BytesIO(drawer.GetDrawingText())).convert("RGBA"))


def _as_map(name: str, values, size: int) -> np.ndarray:
    arr = np.asarray(values.detach().cpu() if isinstance(values, Tensor) else values, dtype=float)
    if arr.shape not in ((size + 1, size + 1), (size, size)):
        raise ValueError(
            f"{name} has shape {arr.shape}; for a molecule of {size} atoms expected "
            f"[{size + 1}, {size + 1}] (graph token first) or [{size}, {size}] (no token). Pass "
            "one head's map, e.g. attention_maps(...)[layer][0][head]."
        )
    return arr


def attention_figure(
    smiles: str,
    before,
    after,
    layer: int,
    head: int,
    atom_labels: Sequence[str] | None = None,
):
    """Three panels: the molecule (RDKit, atom indices), the attention map before ``C``, after ``C``.

    Rows are queries, columns keys; with a graph token it is the first row/column, labelled
    ``G``. "Before" uses a sequential colour map from 0 (probabilities); "after" a diverging one
    centred at 0 (``C`` can be negative), with limits ``±max|after|``.

    Args:
        smiles (str): the molecule (atoms in RDKit order, as featurised).
        before (array or Tensor): ``[n + 1, n + 1]`` (or ``[n, n]`` without graph token).
        after (array or Tensor): same shape.
        layer (int): layer index (for the title).
        head (int): head index (for the title).
        atom_labels (list[str], optional): ``n`` tick labels for the atoms.
            (default: :obj:`None`: element symbol and index, e.g. ``C0``, ``N1``)

    Returns:
        matplotlib.figure.Figure: axes 0 molecule, 1 before (``images[0]`` holds the map),
        2 after, then the two colour bars.

    Raises:
        ValueError: if the maps do not fit the molecule or ``atom_labels`` has the wrong length.
        MoleculeError: if ``smiles`` does not parse.
        ImportError: if matplotlib is missing.
    """
    mol = parse_smiles(smiles)
    n = mol.GetNumAtoms()
    before = _as_map("before", before, n)
    after = _as_map("after", after, n)
    if before.shape != after.shape:
        raise ValueError(f"before {before.shape} and after {after.shape} differ in shape.")
    if atom_labels is None:
        atom_labels = [f"{a.GetSymbol()}{a.GetIdx()}" for a in mol.GetAtoms()]
    if len(atom_labels) != n:
        raise ValueError(f"atom_labels has {len(atom_labels)} entries for {n} atoms.")
    labels = (["G"] if before.shape[0] == n + 1 else []) + list(atom_labels)
    plt = pyplot()
    from matplotlib.colors import TwoSlopeNorm

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.8), layout="constrained",
                             gridspec_kw={"width_ratios": [1, 1.15, 1.15]})
    axes[0].imshow(_molecule_image(mol))
    axes[0].set_axis_off()
    axes[0].set_title(smiles if len(smiles) <= 60 else smiles[:57] + "...", fontsize=9)
    step = max(1, math.ceil(len(labels) / 40))
    ticks = list(range(0, len(labels), step))
    font = 8 if len(labels) <= 25 else 6
    limit = float(np.abs(after).max()) or 1.0
    panels = [
        (axes[1], before, {"cmap": "viridis", "vmin": 0.0, "vmax": float(before.max()) or 1.0},
         "before C: softmax(QKᵀ/√d + B)"),
        (axes[2], after, {"cmap": "RdBu_r", "norm": TwoSlopeNorm(0.0, -limit, limit)},
         "after C: softmax(QKᵀ/√d + B) ⊙ C"),
    ]
    for ax, values, style, name in panels:
        image = ax.imshow(values, interpolation="nearest", **style)
        ax.set_xticks(ticks, [labels[i] for i in ticks], rotation=90, fontsize=font)
        ax.set_yticks(ticks, [labels[i] for i in ticks], fontsize=font)
        ax.set_xlabel("key")
        ax.set_ylabel("query")
        ax.set_title(f"layer {layer}, head {head}\n{name}", fontsize=10)
        fig.colorbar(image, ax=ax, shrink=0.85)
    return fig


def plot_attention(
    smiles: str,
    before,
    after,
    out_path: str | Path,
    layer: int,
    head: int,
    atom_labels: Sequence[str] | None = None,
) -> Path:
    """Write :func:`attention_figure` to ``out_path`` (PNG).

    Example:
        >>> maps = attention_maps(model, "CC(=O)Oc1ccccc1C(=O)O", "ogb")  # doctest: +SKIP
        >>> before, after = maps[-1]  # last layer, [H, n + 1, n + 1] each
        >>> plot_attention(smiles, before[0], after[0], "attention.png", layer=11, head=0)  # doctest: +SKIP

    Returns:
        Path: ``out_path``.
    """
    return save(attention_figure(smiles, before, after, layer, head, atom_labels), out_path)
