"""Attention maps of a graph model on one molecule, before and after the URPE multiplier ``C``,
and their figure beside the molecule.

The maps are the network's own: ``model(batch, return_attention=True)`` (for
:class:`~graph_urpe.nn.Graphormer`, or the tensors for :class:`~graph_urpe.nn.GraphormerEncoder`)
runs every :class:`~graph_urpe.nn.MultiheadURPEAttention` with ``need_weights=True``, which
computes the plain eager equation

.. math::
    P = \\mathrm{softmax}\\left(\\frac{Q K^\\top}{\\sqrt{d}} + B\\right), \\qquad
    A = P \\odot C

(Luo et al., NeurIPS 2022, arXiv 2205.13401, Eq. (4)) and returns both. ``P`` ("before C") is a
probability distribution over the keys in every row; ``A`` ("after C") is what multiplies ``V``,
unnormalised and possibly negative.
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
from torch_geometric.transforms import Compose

from graph_urpe.data.featurize import parse_smiles, smiles_to_graph
from graph_urpe.nn.graphormer import GraphormerEncoder
from graph_urpe.transforms import AddResistanceDistance, AddShortestPathDistance
from graph_urpe.viz._mpl import pyplot, save

__all__ = ["attention_figure", "attention_maps", "plot_attention"]


def _forward_with_attention(model: nn.Module, batch: Batch) -> list:
    """The per-layer ``(before, after)`` maps of one forward pass of ``model`` on ``batch``."""
    if isinstance(model, GraphormerEncoder):
        return model(
            batch.x, batch.edge_index, batch.get("pair_index"), batch=batch.batch, ptr=batch.ptr,
            edge_attr=batch.get("edge_attr"), spd=batch.get("spd"),
            spd_pred_index=batch.get("spd_pred_index"), resistance=batch.get("resistance"),
            num_graphs=1, return_attention=True,
        )[2]
    if "return_attention" not in inspect.signature(model.forward).parameters:
        raise ValueError(
            f"{type(model).__name__} cannot return attention maps (its forward has no "
            "return_attention argument): pass a graph_urpe.nn.Graphormer or GraphormerEncoder "
            "(a Lightning module's .model)."
        )
    res = model(batch, return_attention=True)
    maps = res[-1] if isinstance(res, tuple) else None
    if not isinstance(maps, list) or not all(isinstance(m, tuple) and len(m) == 2 for m in maps):
        raise ValueError(
            f"{type(model).__name__}(batch, return_attention=True) must return (output, maps) "
            "with maps a list of (before, after) pairs, one per layer, as Graphormer does."
        )
    return maps


def attention_maps(
    model: nn.Module, smiles: str, featurization: str = "ogb"
) -> list[tuple[Tensor, Tensor]]:
    """Attention maps of every attention layer of a graph model on one molecule.

    The molecule is featurized as the model was trained (:func:`graph_urpe.data.featurize.
    smiles_to_graph`), given its shortest paths and resistance distances
    (:class:`~graph_urpe.transforms.AddShortestPathDistance`,
    :class:`~graph_urpe.transforms.AddResistanceDistance`), collated into a :class:`~torch_geometric.data.Batch` of one, and
    passed through ``model(batch, return_attention=True)`` in eval mode (no dropout) without
    gradients; the model's train/eval mode is restored afterwards. The maps are those the model
    multiplies ``V`` by (module docstring).

    Args:
        model (torch.nn.Module): :class:`~graph_urpe.nn.Graphormer` (a Lightning module's
            ``.model``), its :class:`~graph_urpe.nn.GraphormerEncoder`, or any graph model whose
            ``forward(batch, return_attention=True)`` returns ``(output, maps)`` with ``maps`` a
            list of per-layer ``(before, after)`` pairs ``[1, H, N', N']``.
        smiles (str): the molecule.
        featurization (str, optional): ``"ogb"`` or ``"zinc"``, as the model was trained.
            (default: :obj:`"ogb"`)

    Returns:
        list[tuple[Tensor, Tensor]]: one ``(before, after)`` pair per layer, in layer order, each
        float32 ``[H, N', N']`` on the CPU; with a graph token ``N' = n + 1`` (row/column 0 is the
        token, then the atoms in RDKit order), else ``N' = n``.

    Raises:
        ValueError: if ``model`` cannot return attention maps, or for an unknown featurization.
        MoleculeError: if the molecule cannot be featurized.
    """
    # Both relations, whichever the model reads (one molecule: the resistance costs ~1 ms).
    pre = Compose([AddShortestPathDistance(), AddResistanceDistance()])
    data = pre(smiles_to_graph(smiles, featurization))
    param = next(model.parameters(), None)
    batch = Batch.from_data_list([data]).to(param.device if param is not None else "cpu")
    was_training = model.training
    try:
        model.eval()
        with torch.no_grad():
            maps = _forward_with_attention(model, batch)
    finally:
        model.train(was_training)
    return [(before[0].float().cpu(), after[0].float().cpu()) for before, after in maps]


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
    ``G``. "Before" uses a sequential colour map from 0 (probabilities). Where "after" has no
    negative value, it uses the same colour map and limits (``0 .. max`` over both maps), so the
    two panels compare cell by cell; else (``C`` can be negative) a diverging map centred at 0 with
    limits ``±max|after|``.

    Args:
        smiles (str): the molecule (atoms in RDKit order, as featurized).
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
    if after.min() >= 0:  # one sequential scale for both panels, so they compare directly
        top = float(max(before.max(), after.max())) or 1.0
        before_style = after_style = {"cmap": "viridis", "vmin": 0.0, "vmax": top}
    else:
        limit = float(np.abs(after).max())
        before_style = {"cmap": "viridis", "vmin": 0.0, "vmax": float(before.max()) or 1.0}
        after_style = {"cmap": "RdBu_r", "norm": TwoSlopeNorm(0.0, -limit, limit)}
    panels = [
        (axes[1], before, before_style, "before C: softmax(QKᵀ/√d + B)"),
        (axes[2], after, after_style, "after C: softmax(QKᵀ/√d + B) ⊙ C"),
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
