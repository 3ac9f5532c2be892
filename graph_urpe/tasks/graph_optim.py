"""Graphormer's optimiser recipe: AdamW, linear warm-up, then polynomial decay to an end value.

Shared by the graph and sequence Lightning modules.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import nn
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler

__all__ = ["PolynomialDecayLR", "configure_adamw", "polynomial_decay_factor"]


def configure_adamw(
    module: Any, extra_decayed: Iterable[nn.Parameter] = ()
) -> dict[str, Any]:
    """AdamW + :class:`PolynomialDecayLR` stepped every update, for ``configure_optimizers``.

    Weight decay applies to the weight matrices of linear layers (unless tied to an embedding) and
    to ``extra_decayed``, not to biases, norms, embeddings or the ``B`` / ``C`` relation tables
    (decay would pull ``C`` from its initial ones towards 0).

    Args:
        module (LightningModule): with hyperparameters ``lr``, ``end_lr``, ``weight_decay``,
            ``betas``, ``eps``, ``warmup_steps``, ``total_steps`` (:obj:`None`: the Trainer's
            estimated number of updates) and ``power``.
        extra_decayed (iterable of Parameter, optional): more parameters to decay.
            (default: :obj:`()`)

    Returns:
        dict: Lightning's ``{"optimizer": ..., "lr_scheduler": {...}}``.
    """
    hp = module.hparams
    embedding = {
        id(p) for m in module.modules() if isinstance(m, nn.Embedding) for p in m.parameters()
    }
    decayed = {id(m.weight) for m in module.modules() if isinstance(m, nn.Linear)} - embedding
    decayed |= {id(p) for p in extra_decayed}
    decay, no_decay = [], []
    for param in module.parameters():
        if param.requires_grad:
            (decay if id(param) in decayed else no_decay).append(param)
    groups = [
        {"params": decay, "weight_decay": hp.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=hp.lr, betas=tuple(hp.betas), eps=hp.eps)
    total = hp.total_steps
    if total is None:
        total = int(module.trainer.estimated_stepping_batches)
    warmup = min(hp.warmup_steps, max(total - 1, 0))
    scheduler = PolynomialDecayLR(optimizer, warmup, max(total, warmup + 1), hp.end_lr, hp.power)
    return {
        "optimizer": optimizer,
        "lr_scheduler": {"scheduler": scheduler, "interval": "step", "frequency": 1},
    }


def polynomial_decay_factor(
    step: int, warmup_steps: int, total_steps: int, peak_lr: float, end_lr: float, power: float
) -> float:
    r"""Learning rate at optimizer step ``step`` (0-based: the rate used by the ``step+1``-th update).

    .. math::
        \eta(t) = \begin{cases}
            \eta_{peak}\, \frac{t + 1}{T_w} & t < T_w \\
            \eta_{end} + (\eta_{peak} - \eta_{end})
              \left(1 - \frac{t - T_w}{T - T_w}\right)^{p} & T_w \le t < T \\
            \eta_{end} & t \ge T
        \end{cases}

    Source: Graphormer's ``PolynomialDecayLR`` (Ying et al., NeurIPS 2021, reference code; the
    fairseq ``polynomial_decay`` scheduler). ``warmup_steps = 0`` starts at the peak.

    Raises:
        ValueError: if ``total_steps <= warmup_steps`` or a value is negative.
    """
    if warmup_steps < 0 or total_steps <= warmup_steps:
        raise ValueError(
            f"need 0 <= warmup_steps < total_steps, got warmup_steps={warmup_steps}, "
            f"total_steps={total_steps}."
        )
    if step < warmup_steps:
        return peak_lr * (step + 1) / warmup_steps
    if step >= total_steps:
        return end_lr
    remaining = 1.0 - (step - warmup_steps) / (total_steps - warmup_steps)
    return end_lr + (peak_lr - end_lr) * remaining**power


class PolynomialDecayLR(LRScheduler):
    r"""Linear warm-up to the optimizer's learning rate, then polynomial decay to ``end_lr``.

    The peak is each parameter group's initial ``lr``. Step it once per optimizer update
    (Lightning: ``interval="step"``). See :func:`polynomial_decay_factor` for the formula.

    Args:
        optimizer (Optimizer): the wrapped optimizer.
        warmup_steps (int): updates of linear warm-up.
        total_steps (int): updates until ``end_lr`` is reached.
        end_lr (float, optional): final learning rate. (default: :obj:`1e-9`)
        power (float, optional): decay exponent; 1 is linear. (default: :obj:`1.0`)
        last_epoch (int, optional): index of the last step, for resuming. (default: :obj:`-1`)

    Raises:
        ValueError: if ``total_steps <= warmup_steps``.
    """

    def __init__(
        self,
        optimizer: Optimizer,
        warmup_steps: int,
        total_steps: int,
        end_lr: float = 1e-9,
        power: float = 1.0,
        last_epoch: int = -1,
    ) -> None:
        polynomial_decay_factor(0, warmup_steps, total_steps, 1.0, end_lr, power)  # validates
        self.warmup_steps = int(warmup_steps)
        self.total_steps = int(total_steps)
        self.end_lr = float(end_lr)
        self.power = float(power)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        """Learning rate of every parameter group at the current step."""
        return [
            polynomial_decay_factor(
                self.last_epoch, self.warmup_steps, self.total_steps, peak, self.end_lr, self.power
            )
            for peak in self.base_lrs
        ]
