"""Deep ensembles and mean-variance outputs: N networks trained side by side in one module.

A deep ensemble (Lakshminarayanan et al., NeurIPS 2017; Chemprop's ``--ensemble-size``) is N
copies of one network that differ in their random initialisation (and their dropout masks); each
is trained on its own loss, and their predictions are combined:

* regression: the members' mean; the spread of the members' means is the model (epistemic)
  uncertainty. With a mean-variance head (MVE, Nix & Weigend 1994; each member predicts a mean
  :math:`\\mu_m` and a variance :math:`\\sigma^2_m`, trained by the Gaussian negative
  log-likelihood) the mixture's variance is
  :math:`\\frac1M\\sum_m(\\sigma^2_m + \\mu_m^2) - \\mu^2` (Lakshminarayanan et al., Eq. 4 ff.);
* binary classification: the mean of the members' probabilities (returned as its logit);
* multi-class: the mean of the members' class probabilities (returned as its log).

One member gives back its own outputs unchanged. :class:`EnsembleMixin` gives
:class:`~graph_urpe.models.GraphPropertyModule` its members' forward, the regression uncertainty
and its calibration on the validation split (:mod:`~graph_urpe.models.calibration`).
"""

from __future__ import annotations

import copy
import math
from typing import get_args

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from graph_urpe.choices import check_at_least
from graph_urpe.models.optim import configure_gradient_clipping
from graph_urpe.nn.relations import GraphRelation

__all__ = ["MIN_VARIANCE", "EnsembleMixin", "combine_members", "member_copies", "member_spread",
           "mve_outputs"]

MIN_VARIANCE = 1e-6
"""Smallest predicted variance of a mean-variance head, in standardised units (softplus + this)."""


def member_copies(network: nn.Module, count: int) -> list[nn.Module]:
    """``count`` copies of ``network``, each re-initialised by its ``reset_parameters()`` under its
    own seed, drawn from torch's global generator (so ``seed_everything`` fixes them all).

    Args:
        network (nn.Module): the first member; it has a ``reset_parameters()`` method.
        count (int): how many more members to make (``ensemble_size - 1``).

    Returns:
        list[nn.Module]: the new members (``network`` itself is left as it is).

    Raises:
        ValueError: if ``network`` has no ``reset_parameters()`` (its copies would be identical).
    """
    if count > 0 and not callable(getattr(network, "reset_parameters", None)):
        raise ValueError(
            f"an ensemble needs members initialised differently, and {type(network).__name__} has "
            "no reset_parameters(): give the network one, or set ensemble_size 1."
        )
    seeds = torch.randint(0, 2**31 - 1, (count,)).tolist()
    members = []
    for seed in seeds:
        member = copy.deepcopy(network)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            member.reset_parameters()
        members.append(member)
    return members


def mve_outputs(raw: Tensor) -> Tensor:
    """A mean-variance head's raw outputs ``[R, 2T]`` as ``[R, 2T]`` means and variances:
    ``softplus`` of the second half plus :data:`MIN_VARIANCE` (Chemprop's ``MveFFN``)."""
    mean, var = raw.chunk(2, dim=-1)
    return torch.cat([mean, F.softplus(var) + MIN_VARIANCE], dim=-1)


def combine_members(outputs: Tensor, task: str, mve: bool = False) -> Tensor:
    r"""The ensemble's output from its members' outputs, in the members' units.

    Args:
        outputs (Tensor): ``[M, R, K]`` float: per member, standardised values (regression),
            ``[means, variances]`` (``mve``: ``K = 2T``), logits (classification) or class logits
            (multiclass).
        task (str): ``"regression"``, ``"classification"`` or ``"multiclass"``.
        mve (bool, optional): regression outputs are means and variances. (default: :obj:`False`)

    Returns:
        Tensor: ``[R, K]``: the mean (regression; ``mve``: mixture mean and variance), the logit
        of the mean probability (classification), the log of the mean class probabilities
        (multiclass). ``M = 1``: ``outputs[0]``, unchanged.
    """
    if outputs.shape[0] == 1:
        return outputs[0]
    log_m = math.log(outputs.shape[0])
    if task == "classification":  # logit(mean sigmoid): log mean p - log mean (1 - p)
        return (torch.logsumexp(F.logsigmoid(outputs), 0)
                - torch.logsumexp(F.logsigmoid(-outputs), 0))
    if task == "multiclass":
        return torch.logsumexp(torch.log_softmax(outputs, dim=-1), 0) - log_m
    if not mve:
        return outputs.mean(0)
    means, variances = outputs.chunk(2, dim=-1)
    mean = means.mean(0)
    variance = (variances + means.square()).mean(0) - mean.square()
    return torch.cat([mean, variance.clamp(min=MIN_VARIANCE)], dim=-1)


def member_spread(outputs: Tensor, task: str, mve: bool = False) -> Tensor | None:
    """The members' disagreement ``[R, T]``: the population variance of their means
    (regression, standardised units) or of their probabilities (classification); :obj:`None`
    for one member or a multiclass task."""
    if outputs.shape[0] == 1 or task == "multiclass":
        return None
    if task == "classification":
        return torch.sigmoid(outputs).var(0, unbiased=False)
    means = outputs.chunk(2, dim=-1)[0] if mve else outputs
    return means.var(0, unbiased=False)


class EnsembleMixin:
    """The members' forward and predictions with uncertainty of a
    :class:`~graph_urpe.models.GraphPropertyModule` (which holds ``_forwards``, ``mve``,
    ``num_labels`` and the target statistics; the calibration is
    :class:`~graph_urpe.models.calibration.CalibrationMixin`'s)."""

    def _init_ensemble(self, ensemble_size: int) -> None:
        """``ensemble``: the ``ensemble_size - 1`` members beside ``model``."""
        check_at_least(1, ensemble_size=ensemble_size)
        self.ensemble = nn.ModuleList(member_copies(self.model, ensemble_size - 1))

    @property
    def per_molecule_uncertainty(self) -> bool:
        """Whether a regression prediction has an uncertainty of its own: an ensemble (the
        members' spread) or a mean-variance head (``loss="mve"``). A single plain network has
        none: its calibrated std would be the validation RMSE, the same for every molecule, so
        it writes no ``<target>_std`` (its conformal interval, of one width, is kept)."""
        return len(self.members) > 1 or bool(self.mve)

    @property
    def members(self) -> list[nn.Module]:
        """The networks of the ensemble, ``model`` first (one unless ``ensemble_size``)."""
        return [self.model, *self.ensemble]

    def pair_relations(self) -> tuple[str, ...]:
        """The pairwise relations the members read (``"spd"``, ``"resistance"``; each network's
        ``relations``), what prediction computes for each molecule: the resistance distance only
        for a network that reads it (0.4-0.8 ms of CPU per molecule). A network that does not
        say (no ``relations``) is given every relation of
        :data:`~graph_urpe.nn.relations.GraphRelation`."""
        every = get_args(GraphRelation)
        read = {r for m in self.members for r in (getattr(m, "relations", None) or every)}
        return tuple(r for r in every if r in read)

    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None,
                                    gradient_clip_algorithm=None) -> None:
        """:func:`~graph_urpe.models.optim.configure_gradient_clipping` (also fused optimizers
        under mixed precision), per member of an ensemble, so each trains as it would alone."""
        members = self.members  # one network: the total norm, without listing its parameters
        configure_gradient_clipping(self, optimizer, gradient_clip_val, gradient_clip_algorithm,
                                    [list(m.parameters()) for m in members]
                                    if len(members) > 1 else None)

    def member_outputs(self, batch) -> Tensor:
        """Every member's outputs ``[M, R, num_outputs]`` (``loss="mve"``: means, then
        variances after softplus)."""
        outs = [f(batch) for f in self._forwards]
        return torch.stack([mve_outputs(o.float()) for o in outs] if self.mve else outs)

    def forward(self, batch) -> Tensor:
        """The ensemble's outputs ``[R, num_outputs]`` (``R`` graphs or nodes), as one network's:
        standardised values (regression; ``mve``: means and variances), logits (classification,
        multiclass); :func:`combine_members`."""
        return combine_members(self.member_outputs(batch), self.record.task, self.mve)

    def mean_and_variance(self, batch) -> tuple[Tensor, Tensor]:
        """Regression: predictions and their raw variances ``[R, T]`` in the labels' units
        (MVE mixture, else the members' spread, else 1 standardised unit), not yet calibrated."""
        outs = self.member_outputs(batch).float()
        out = combine_members(outs, "regression", self.mve)
        spread = member_spread(outs, "regression", self.mve)
        var = out[:, self.num_labels:] if self.mve else \
            (spread if spread is not None else torch.ones_like(out))
        return out[:, :self.num_labels] * self.target_std + self.target_mean, \
            var * self.target_std.square()

    def _eval_rows(self, batch) -> Tensor:
        """What validation and test collect per row: regression ``[means, variances]``
        (:meth:`mean_and_variance`), classification ``[logits, members' variance of the
        probability]`` (0 for one member), multiclass the logits."""
        task = self.record.task
        if task == "regression":
            return torch.cat(self.mean_and_variance(batch), dim=-1)
        outs = self.member_outputs(batch)
        out = combine_members(outs, task, self.mve)
        if task == "multiclass":
            return out
        spread = member_spread(outs.float(), task)
        return torch.cat([out.float(), torch.zeros_like(out.float()) if spread is None
                          else spread], dim=-1)

    def predict_values(self, batch) -> Tensor:
        """Predictions ``[R, num_labels]`` in the labels' units (regression), probabilities
        (classification) or class probabilities (multiclass, softmax)."""
        out = self(batch).float()
        if self.record.task == "classification":
            return torch.sigmoid(self.platt_logits(out))
        if self.record.task == "multiclass":
            return torch.softmax(out, dim=-1)
        return out[:, :self.num_labels] * self.target_std + self.target_mean

    def predict_outputs(self, batch) -> dict[str, Tensor]:
        """``{"prediction": [R, T]}`` in the labels' units (probabilities for classification),
        with ``std``, ``lower``, ``upper`` ``[R, T]`` for regression (:meth:`calibrated`; no
        ``std`` without :attr:`per_molecule_uncertainty`: a single plain network's would be the
        validation RMSE on every row) and ``std`` (the members' spread of the probability) for
        an ensemble classifier."""
        task = self.record.task
        if task == "regression":
            mean, variance = self.mean_and_variance(batch)
            std, lower, upper = self.calibrated(mean, variance)
            if not self.per_molecule_uncertainty:
                return {"prediction": mean, "lower": lower, "upper": upper}
            return {"prediction": mean, "std": std, "lower": lower, "upper": upper}
        out = {"prediction": self.predict_values(batch)}
        spread = member_spread(self.member_outputs(batch).float(), task) \
            if task == "classification" else None
        return out if spread is None else {**out, "std": spread.sqrt()}
