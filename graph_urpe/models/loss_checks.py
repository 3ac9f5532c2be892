"""A training loss that is not finite: the error that stops the run and says why
(:class:`NonFiniteLossError`, built by :func:`non_finite_loss_error` for
:class:`~graph_urpe.models.GraphPropertyModule`'s training step)."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from graph_urpe.data.csv.labels import LARGE_LABEL

__all__ = ["NonFiniteLossError", "non_finite_loss_error"]


class NonFiniteLossError(RuntimeError):
    """Training produced a NaN / infinite loss: the run is stopped instead of continuing. The
    message says what was seen (loss, step, learning rate, largest label, outputs, weights) and
    blames the labels only when they are out of range."""


def non_finite_loss_error(module: Any, loss: Tensor, outs: Tensor,
                          target: Tensor) -> NonFiniteLossError:
    """The error for a NaN / infinite training loss, saying what was seen (the loss, the step,
    the learning rate, the largest label as the loss sees it, whether the outputs and the
    weights are finite) and blaming the labels only when they are out of range
    (:data:`~graph_urpe.data.csv.labels.LARGE_LABEL`), else the learning rate (or, before
    the first update, the starting weights).

    Args:
        module (GraphPropertyModule): the module training (its trainer, step, optimizers,
            weights and target scaling are read).
        loss (Tensor): the loss, a scalar.
        outs (Tensor): the members' outputs ``[M, R, num_outputs]``.
        target (Tensor): the labels ``[R, T]`` in their units (NaN = missing).

    Returns:
        NonFiniteLossError: to raise.
    """
    scaled = module.scaled(target)
    seen = scaled[~torch.isnan(scaled)].abs()
    largest = seen.max().item() if seen.numel() else 0.0
    lrs = [g["lr"] for opt in module.trainer.optimizers for g in opt.param_groups]
    params = list(module.parameters())
    broken = sum(not torch.isfinite(p).all().item() for p in params)
    standardised = " (standardised)" if module.record.task == "regression" \
        and module.objective.standardize else ""
    seen_text = (f"training loss is {loss.item()} at epoch {module.current_epoch}, step "
                 f"{module.global_step}, lr {max(lrs, default=float('nan')):.3g}; the batch's "
                 f"largest |label|{standardised} is {largest:.3g}, its outputs are "
                 f"{'' if torch.isfinite(outs).all() else 'not '}finite, "
                 + (f"{broken} of {len(params)} weight tensors are not finite" if broken
                    else "the weights are finite"))
    if not math.isfinite(largest) or largest > LARGE_LABEL:
        advice = ("the labels are out of range: check the label column for huge values "
                  "(or rescale them)")
    elif module.global_step == 0 and not module.trainer.ckpt_path:
        advice = ("the labels are in range and no update was made yet: check the network's "
                  "starting weights (--model.init_args.finetune.pretrained) and its settings")
    else:
        advice = ("the labels are in range, so the updates diverged: lower the optimizer's "
                  "lr (--model.init_args.optimizer.init_args.lr)")
        resumed = module.trainer.ckpt_path
        if resumed and broken:
            advice += (f"; this run resumed from {resumed}: if its optimizer state is not "
                       "this model's, start a new fit")
    return NonFiniteLossError(f"{seen_text}: {advice}. Training stopped; the last good "
                              "checkpoint is kept.")
