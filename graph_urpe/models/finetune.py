"""Fine-tuning: start a :class:`~graph_urpe.nn.Graphormer` from another run's encoder.

:func:`load_pretrained_encoder` copies the encoder weights of a graph-urpe checkpoint (a
Lightning ``.ckpt`` written by ``graph-urpe fit``, or an encoder file in the package's format,
e.g. the shipped one, :mod:`graph_urpe.pretrained`) into a network whose head stays freshly
initialised for the new targets and task. The file is read with ``torch.load(weights_only=True)``
(plain tensors, numbers and strings; nothing in it is imported or run) and no class it names is
built. Before anything is copied the two encoders are compared; any difference (featurization,
vocabulary sizes, width, layers, heads, attention kind, then any tensor's name or shape) refuses
the load in one line, so a model is never half loaded.

:func:`encoder_parameter_groups` gives the encoder a lower learning rate than the head
(``encoder_lr_factor``), and the :class:`EncoderFreezing` callback freezes it (``freeze_encoder``:
the first part of the run's updates); both are options of :class:`~graph_urpe.models.graph.GraphPropertyModule`. This
is the recipe of Graphormer's ogbg-molhiv results (Ying et al., NeurIPS 2021, Sec. 4.2: fine-tuned
from a PCQM4M-pretrained model) and of Chemprop's foundation model.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from lightning.pytorch.callbacks import Callback
from torch import Tensor, nn

from graph_urpe.models.optim import parameter_groups
from graph_urpe.models.record import nest_flat_arguments
from graph_urpe.pretrained import ENCODER_FORMAT, available, resolve
from graph_urpe.trust import read_checkpoint

__all__ = [
    "EncoderFreezing",
    "EncoderMismatchError",
    "Finetune",
    "PretrainedEncoder",
    "encoder_parameter_groups",
    "load_pretrained_encoder",
    "network_facts",
    "read_pretrained_encoder",
    "set_encoder_frozen",
]

NO_ENCODER = ("none", "null")
"""Values of ``Finetune.pretrained`` that mean no pretrained encoder (from scratch)."""
_PREFIX = "model.encoder."
_FACTS = ("featurization", "atom_categories", "bond_categories", "embed_dim", "num_layers",
          "num_heads", "attention")
_FACT_NAMES = {"featurization": "featurization", "atom_categories": "atom vocabulary sizes",
               "bond_categories": "bond vocabulary sizes", "embed_dim": "width (embed_dim)",
               "num_layers": "layers", "num_heads": "heads", "attention": "attention kind"}


class EncoderMismatchError(ValueError):
    """The pretrained encoder does not fit the network (one line naming what differs)."""


class PretrainedEncoder:
    r"""An encoder read from a file: its weights, architecture facts and provenance.

    Args:
        state (dict[str, Tensor]): the :class:`~graph_urpe.nn.GraphormerEncoder` state dict
            (keys without a prefix, e.g. ``"layers.0.attn.qkv_proj.weight"``).
        facts (dict): ``featurization``, ``atom_categories``, ``bond_categories``, ``embed_dim``,
            ``num_layers``, ``num_heads``, ``attention`` (values :obj:`None` where unknown).
        source (str): what was read (file path, and the shipped name if any).
        metadata (dict, optional): plain provenance (data, labels, updates). (default: empty)
    """

    def __init__(self, state: dict[str, Tensor], facts: dict[str, Any], source: str,
                 metadata: dict[str, Any] | None = None) -> None:
        self.state = state
        self.facts = facts
        self.source = source
        self.metadata = dict(metadata or {})

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.source!r}, {len(self.state)} tensors, "
                f"{self.facts.get('num_layers')} x {self.facts.get('embed_dim')}, "
                f"{self.facts.get('attention')})")


def read_pretrained_encoder(source: str) -> PretrainedEncoder:
    r"""Read an encoder from a graph-urpe checkpoint or encoder file, or a shipped name.

    Args:
        source (str): a name of :func:`graph_urpe.pretrained.available` (e.g.
            ``"moses-descriptors"``), a Lightning checkpoint of a Graphormer run (``.ckpt``), or an
            encoder file (``{"format": ENCODER_FORMAT, "encoder_state", "encoder_args",
            "featurization", "metadata"}``, as written by :mod:`graph_urpe.pretrained.export`).

    Returns:
        PretrainedEncoder: the encoder's tensors and facts.

    Raises:
        FileNotFoundError: if :obj:`source` is neither a shipped name nor a file.
        ValueError: if the file holds no Graphormer encoder (e.g. a sequence model), is corrupt,
            or (:class:`graph_urpe.trust.UntrustedFileError`) holds pickled objects or names a
            class outside the allow-list (:func:`graph_urpe.trust.read_checkpoint`).
    """

    path = resolve(source)
    if path is None:
        raise FileNotFoundError(
            f"pretrained {source!r}: no such file and no shipped encoder of that name (shipped: "
            f"{', '.join(available())}); pass a graph-urpe checkpoint path or a shipped name."
        )
    blob = read_checkpoint(path)  # weights_only, class paths allow-listed (graph_urpe.trust)
    label = path if path == source else f"{source} ({path})"
    if isinstance(blob, dict) and blob.get("format") == ENCODER_FORMAT:
        facts = dict(blob.get("encoder_args", {}))
        facts["featurization"] = blob.get("featurization")
        return PretrainedEncoder(dict(blob["encoder_state"]), _facts(facts), label,
                                 blob.get("metadata"))
    if not isinstance(blob, dict) or "state_dict" not in blob:
        raise ValueError(f"pretrained {path}: neither a Lightning checkpoint nor an encoder file "
                         f"({ENCODER_FORMAT}).")
    state = {k[len(_PREFIX):]: v for k, v in blob["state_dict"].items() if k.startswith(_PREFIX)}
    hparams = blob.get("hyper_parameters", {}) or {}
    network = hparams.get("model")
    if not state:
        kind = network.get("class_path") if isinstance(network, dict) else None
        raise ValueError(
            f"pretrained {path}: the checkpoint's network ({kind or 'unknown'}) has no Graphormer "
            "encoder (model.encoder.*); only graph_urpe.nn.Graphormer runs can be fine-tuned from."
        )
    facts = dict(network.get("init_args", {})) if isinstance(network, dict) else {}
    record = nest_flat_arguments(hparams).get("record") or {}
    facts["featurization"] = record.get("featurization")
    metadata = {"global_step": blob.get("global_step"), "dataset_source":
                record.get("dataset_source"), "target_names": record.get("target_names")}
    return PretrainedEncoder(state, _facts(facts), label, metadata)


def _facts(args: dict[str, Any]) -> dict[str, Any]:
    """The compared facts from a network's plain arguments (lists for vocabularies)."""
    out = {}
    for key in _FACTS:
        value = args.get(key)
        if key.endswith("_categories") and value is not None:
            value = [int(v) for v in (value if isinstance(value, (list, tuple)) else [value])]
        out[key] = value
    if out["attention"] is None:
        out["attention"] = "urpe"  # GraphormerEncoder's default
    return out


def network_facts(network: nn.Module, featurization: str | None) -> dict[str, Any]:
    """The compared facts of a :class:`~graph_urpe.nn.Graphormer` (see :data:`_FACTS`)."""
    enc = network.encoder
    edge = getattr(enc, "edge_encoder", None)
    return {
        "featurization": featurization,
        "atom_categories": [int(v) for v in enc.atom_encoder.num_categories],
        "bond_categories": None if edge is None else
        [int(v) for v in edge.edge_encoder.num_categories],
        "embed_dim": enc.embed_dim, "num_layers": enc.num_layers, "num_heads": enc.num_heads,
        "attention": enc.attention,
    }


def load_pretrained_encoder(network: nn.Module, source: str | PretrainedEncoder,
                            featurization: str | None = None) -> PretrainedEncoder:
    r"""Copy a pretrained encoder's weights into ``network.encoder``; the head is not touched.

    Args:
        network (nn.Module): a :class:`~graph_urpe.nn.Graphormer` (anything with a
            :class:`~graph_urpe.nn.GraphormerEncoder` as ``encoder``).
        source (str or PretrainedEncoder): see :func:`read_pretrained_encoder`.
        featurization (str, optional): how this run turns molecules into graphs (``"ogb"`` /
            ``"zinc"``), compared with the checkpoint's; :obj:`None` skips that comparison.
            (default: :obj:`None`)

    Returns:
        PretrainedEncoder: what was loaded.

    Raises:
        EncoderMismatchError: one line naming every fact that differs (featurization, vocabulary
            sizes, width, layers, heads, attention kind), else the first tensor missing, extra or
            of another shape; nothing is copied then.
        ValueError, FileNotFoundError: from :func:`read_pretrained_encoder`; a network without an
            ``encoder``.
    """
    encoder = getattr(network, "encoder", None)
    if not isinstance(encoder, nn.Module) or not hasattr(encoder, "atom_encoder"):
        raise ValueError(f"{type(network).__name__} has no Graphormer encoder to load a "
                         "pretrained one into: use graph_urpe.nn.Graphormer.")
    pre = source if isinstance(source, PretrainedEncoder) else read_pretrained_encoder(source)
    mine = network_facts(network, featurization)
    diffs = [f"{_FACT_NAMES[k]} {pre.facts[k]} there, {mine[k]} here" for k in _FACTS
             if pre.facts[k] is not None and mine[k] is not None and pre.facts[k] != mine[k]]
    own = encoder.state_dict()
    if not diffs:
        missing = sorted(set(own) - set(pre.state))
        extra = sorted(set(pre.state) - set(own))
        shapes = [k for k in own if k in pre.state and tuple(own[k].shape) !=
                  tuple(pre.state[k].shape)]
        if missing:
            diffs.append(f"tensor {missing[0]} missing there ({len(missing)} in all)")
        elif extra:
            diffs.append(f"tensor {extra[0]} not in this network ({len(extra)} in all)")
        elif shapes:
            k = shapes[0]
            diffs.append(f"tensor {k} of shape {tuple(pre.state[k].shape)} there, "
                         f"{tuple(own[k].shape)} here")
    if diffs:
        raise EncoderMismatchError(
            f"pretrained encoder {pre.source} does not fit this model: {'; '.join(diffs)} "
            "(build the model like the pretrained one, or train from scratch without pretrained)."
        )
    with torch.no_grad():
        for key, value in own.items():
            value.copy_(pre.state[key].to(dtype=value.dtype))
    return pre


def encoder_parameter_groups(network: nn.Module, encoder_lr_factor: float) -> list[dict]:
    r"""Weight-decay groups (:func:`~graph_urpe.models.optim.parameter_groups`) of the encoder and
    of the rest (head), the encoder's marked with ``lr_scale = encoder_lr_factor``, which
    :func:`~graph_urpe.models.optim.configure_optimizers` applies to the optimizer's ``lr`` (so
    the schedule scales both alike).

    Args:
        network (nn.Module): a network with an ``encoder`` submodule.
        encoder_lr_factor (float): the encoder's learning rate relative to the head's, in
            ``(0, 1]``.

    Returns:
        list[dict]: up to four groups (empty ones dropped).

    Raises:
        ValueError: for a factor outside ``(0, 1]``.
    """
    if not 0.0 < encoder_lr_factor <= 1.0:
        raise ValueError(f"encoder_lr_factor must lie in (0, 1], got {encoder_lr_factor}.")
    encoder = network.encoder
    enc_ids = {id(p) for p in encoder.parameters()}
    groups = [dict(g, lr_scale=encoder_lr_factor) for g in parameter_groups(encoder)]
    rest = [{**g, "params": [p for p in g["params"] if id(p) not in enc_ids]}
            for g in parameter_groups(network)]
    return [g for g in groups + rest if g["params"]]


def set_encoder_frozen(network: nn.Module, frozen: bool) -> None:
    r"""Freeze (no gradients, so the optimizer leaves them as they are) or unfreeze the encoder's
    parameters; the head always trains.

    Args:
        network (nn.Module): a network with an ``encoder`` submodule.
        frozen (bool): freeze (:obj:`True`) or unfreeze.
    """
    for param in network.encoder.parameters():
        param.requires_grad_(not frozen)


class EncoderFreezing(Callback):
    r"""Keeps the encoder frozen for the first ``fraction`` of the run's updates, then trains it
    (``freeze_encoder`` of :class:`~graph_urpe.models.graph.GraphPropertyModule`).

    A plain callback rather than Lightning's :class:`~lightning.pytorch.callbacks.BaseFinetuning`:
    that one thaws at epoch boundaries and adds the thawed parameters to the optimizer as a new
    group, while the fraction here counts updates (runs of a few epochs thaw mid-epoch) and the
    encoder's parameters stay in their groups from the start (``encoder_lr_factor``), frozen by
    ``requires_grad`` only. The state is a function of ``global_step``, so a resumed run freezes
    exactly as the uninterrupted one.

    Args:
        fraction (float): the frozen share of ``trainer.estimated_stepping_batches``, in
            ``[0, 1)``.
    """

    def __init__(self, fraction: float) -> None:
        super().__init__()
        self.fraction = float(fraction)
        self._frozen: bool | None = None

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx: int) -> None:
        frozen = trainer.global_step < round(self.fraction * trainer.estimated_stepping_batches)
        if frozen != self._frozen:
            for member in pl_module.members:  # the network, or each network of an ensemble
                set_encoder_frozen(member, frozen)
            self._frozen = frozen

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(fraction={self.fraction})"



@dataclasses.dataclass(frozen=True)
class Finetune:
    r"""Fine-tuning options of :class:`~graph_urpe.models.graph.GraphPropertyModule`: on the
    command line ``--model.init_args.finetune.pretrained moses-descriptors``; in YAML
    ``finetune: {pretrained: moses-descriptors}``.

    Args:
        pretrained (str, optional): start the network's encoder from this graph-urpe checkpoint
            or shipped encoder name (:mod:`graph_urpe.pretrained`), loaded at ``fit`` (not when
            resuming) by :func:`load_pretrained_encoder`; the head stays new. :obj:`None`, or
            the word ``none`` / ``null`` in any case (what ``--model.init_args.finetune.pretrained
            null`` gives: jsonargparse 4.53 passes a nested field's ``null`` as the string
            ``"None"``), trains from scratch. (default: :obj:`None`: from scratch)
        encoder_lr_factor (float, optional): the encoder's learning rate as a fraction of the
            optimizer's (the head's), in ``(0, 1]`` (:func:`encoder_parameter_groups`).
            (default: :obj:`1.0`)
        freeze_encoder (float, optional): fraction of the run's updates, in ``[0, 1)``, during
            which the encoder is frozen and only the head trains (:class:`EncoderFreezing`).
            (default: :obj:`0.0`)

    Raises:
        ValueError: (:meth:`check`) ``encoder_lr_factor`` outside ``(0, 1]``,
            ``freeze_encoder`` outside ``[0, 1)``, or any option set for a network without
            ``encoder``.
    """

    pretrained: str | None = None
    encoder_lr_factor: float = 1.0
    freeze_encoder: float = 0.0

    def __post_init__(self) -> None:
        if isinstance(self.pretrained, str) and self.pretrained.lower() in NO_ENCODER:
            object.__setattr__(self, "pretrained", None)

    def check(self, network: nn.Module) -> None:
        """Refuse options out of range or given for a network without an encoder (see the
        class docstring)."""
        if not 0.0 < self.encoder_lr_factor <= 1.0:
            raise ValueError(f"encoder_lr_factor must lie in (0, 1], got "
                             f"{self.encoder_lr_factor}.")
        if not 0.0 <= self.freeze_encoder < 1.0:
            raise ValueError(f"freeze_encoder (a fraction of the run's updates) must lie in "
                             f"[0, 1), got {self.freeze_encoder}.")
        used = self.pretrained is not None or self.encoder_lr_factor != 1.0 \
            or self.freeze_encoder > 0.0
        if used and not isinstance(getattr(network, "encoder", None), nn.Module):
            raise ValueError(f"pretrained / encoder_lr_factor / freeze_encoder need a network "
                             f"with an encoder (graph_urpe.nn.Graphormer), got "
                             f"{type(network).__name__}.")
