"""Why this prediction: per-atom attributions of a trained graph model by integrated gradients
over the atom embeddings, and their picture on the molecule.

Integrated gradients (Sundararajan et al., ICML 2017, Eq. 1; :class:`captum.attr.
IntegratedGradients`) of the prediction :math:`F` with respect to the atom embeddings
:math:`E \\in \\mathbb{R}^{n \\times d}` (the output of the network's ``atom_encoder``: the atom
features' embeddings, before the degree encoding and attention), from the baseline
:math:`E' = 0` (no atom identity; bonds, shortest paths and degrees kept):

.. math::
    \\mathrm{IG}_{ik} = E_{ik} \\int_0^1 \\frac{\\partial F(\\alpha E)}{\\partial E_{ik}}\\,
    d\\alpha, \\qquad a_i = \\sum_k \\mathrm{IG}_{ik},

so that :math:`\\sum_i a_i = F(E) - F(0)` (completeness, up to the Riemann sum's error that
Captum reports as ``delta``). :math:`F` is the prediction in the labels' units (regression), the
probability (classification) or the predicted class's probability (multi-class), of the whole
module: an ensemble's members are walked along their own embeddings at once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import torch
from torch import Tensor, nn
from torch_geometric.data import Batch, Data

__all__ = ["AtomAttributions", "atom_attributions", "draw_attributions"]


class AtomAttributions(NamedTuple):
    """The attributions of one molecule's prediction for one target."""

    atoms: Tensor
    """``[n]`` float64: :math:`a_i` per atom, in RDKit's atom order, in the prediction's units."""
    prediction: float
    """:math:`F(E)`: the model's prediction (``predict_values``)."""
    baseline: float
    """:math:`F(0)`: the prediction with every atom embedding zero."""
    delta: float
    """Captum's convergence delta, ``sum(atoms) - (prediction - baseline)``."""


def _atom_encoders(module: nn.Module) -> list[nn.Module]:
    members = getattr(module, "members", None) or [getattr(module, "model", module)]
    encoders = []
    for member in members:
        found = [m for name, m in member.named_modules() if name.split(".")[-1] == "atom_encoder"]
        if len(found) != 1:
            raise ValueError(
                f"{type(member).__name__} has {len(found)} modules named atom_encoder: "
                "attributions need a network with one (graph_urpe.nn.Graphormer)."
            )
        encoders.append(found[0])
    return encoders


@contextlib.contextmanager
def _replaced(encoders: list[nn.Module], embeddings: tuple[Tensor, ...]) -> Iterator[None]:
    """While inside, encoder ``m`` returns ``embeddings[m]`` ``[k, n, d]`` as ``[k * n, d]``."""
    handles = [enc.register_forward_hook(lambda _m, _i, _o, e=e: e.reshape(-1, e.shape[-1]))
               for enc, e in zip(encoders, embeddings)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def atom_attributions(module: nn.Module, graph: Data, target: int = 0,
                      steps: int = 50) -> AtomAttributions:
    """Integrated-gradients attributions of one molecule's prediction to its atoms (module
    docstring).

    Args:
        module (nn.Module): a :class:`~graph_urpe.models.GraphPropertyModule` (graph level),
            in eval mode or not (it is put in eval mode and restored).
        graph (torch_geometric.data.Data): the molecule, featurized and pre-transformed as the
            model was trained (``featurize_inputs``).
        target (int, optional): the target (output column) to explain; for multi-class, the
            class. (default: :obj:`0`)
        steps (int, optional): Riemann steps of the path integral (Captum's ``n_steps``, Gauss-
            Legendre). (default: :obj:`50`)

    Returns:
        AtomAttributions: ``atoms`` ``[n]``, prediction, baseline and delta.

    Raises:
        ValueError: for a node-level model, a network without one ``atom_encoder`` per member,
            or a ``target`` out of range.
        ImportError: if Captum is missing (``pip install 'graph-urpe[explain]'``).
    """
    from captum.attr import IntegratedGradients

    if getattr(module, "level", "graph") != "graph":
        raise ValueError("attributions explain a graph-level prediction; this model predicts "
                         "per node.")
    task = module.record.task
    width = module.num_outputs if task == "multiclass" else module.num_labels
    if not 0 <= target < width:
        raise ValueError(f"target {target} is out of range: the model has {width} "
                         f"{'classes' if task == 'multiclass' else 'targets'}.")
    encoders = _atom_encoders(module)
    device = next(module.parameters()).device
    graph = graph.to(device)
    n = graph.num_nodes

    def predict(*embeddings: Tensor) -> Tensor:
        batch = Batch.from_data_list([graph] * embeddings[0].shape[0])
        with _replaced(encoders, embeddings):
            return module.predict_values(batch)[:, target]

    was_training = module.training
    module.eval()
    try:
        with torch.no_grad():
            one = Batch.from_data_list([graph])
            inputs = tuple(enc(one.x).detach().reshape(1, n, -1) for enc in encoders)
        baselines = tuple(torch.zeros_like(e) for e in inputs)
        attributions, delta = IntegratedGradients(predict).attribute(
            inputs, baselines, n_steps=steps, return_convergence_delta=True)
        with torch.no_grad():
            prediction = float(predict(*inputs)[0])
            baseline = float(predict(*baselines)[0])
    finally:
        module.train(was_training)
    atoms = sum(a[0].double().sum(-1) for a in attributions).cpu()
    return AtomAttributions(atoms, prediction, baseline, float(delta[0]))


#: Colours of the map: lowers the prediction (red), 0 (white), raises it (blue).
_COLOURS = [(0.84, 0.19, 0.15), (1.0, 1.0, 1.0), (0.19, 0.41, 0.76)]


def draw_attributions(smiles: str, atoms, out_path: str | Path, size: int = 420) -> Path:
    """Draw per-atom values on the molecule as a PNG: RDKit's similarity map (a Gaussian per
    atom, blue where the atom raises the prediction, red where it lowers it; colours scaled to
    the largest absolute value) with each atom's value written beside it.

    Args:
        smiles (str): the molecule (atoms in RDKit order, as featurized).
        atoms (Sequence[float] or Tensor): ``[n]`` values, one per atom.
        out_path (str or Path): the PNG file (its folder is created).
        size (int, optional): width and height in pixels. (default: :obj:`420`)

    Returns:
        Path: ``out_path``.

    Raises:
        ValueError: if ``atoms`` does not have one value per atom.
        MoleculeError: if ``smiles`` does not parse.
    """
    from rdkit.Chem.Draw import SimilarityMaps, rdMolDraw2D

    from graph_urpe.data.featurize import parse_smiles
    from graph_urpe.files import atomic_write

    mol = parse_smiles(smiles)
    values = [float(v) for v in atoms]
    if len(values) != mol.GetNumAtoms():
        raise ValueError(f"{len(values)} values for the {mol.GetNumAtoms()} atoms of {smiles}.")
    for atom, value in zip(mol.GetAtoms(), values):
        atom.SetProp("atomNote", f"{value:.2g}")
    drawer = rdMolDraw2D.MolDraw2DCairo(size, size)
    if mol.GetNumAtoms() == 1:  # RDKit's similarity map needs two atoms: a highlighted atom
        colour = _COLOURS[2] if values[0] > 0 else _COLOURS[0] if values[0] < 0 else _COLOURS[1]
        rdMolDraw2D.PrepareAndDrawMolecule(drawer, mol, highlightAtoms=[0],
                                           highlightAtomColors={0: colour})
    else:
        scale = max(abs(v) for v in values) or 1.0  # all zero: a white map
        SimilarityMaps.GetSimilarityMapFromWeights(mol, values, draw2d=drawer,
                                                   colorMap=_COLOURS, scale=scale)
    drawer.FinishDrawing()
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(str(out_path), "wb") as handle:
        handle.write(drawer.GetDrawingText())
    return out_path
