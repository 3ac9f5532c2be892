"""Graphormer's learning-rate schedule: linear warm-up, then polynomial decay to an end value."""

from __future__ import annotations

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler

__all__ = ["PolynomialDecayLR", "polynomial_decay_factor"]


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
