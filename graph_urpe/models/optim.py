"""Optimisation shared by every Lightning module: weight-decay groups, Graphormer's warm-up +
polynomial-decay schedule sized from the run, and the glue that turns Lightning's injected
``OptimizerCallable`` / ``LRSchedulerCallable`` into ``configure_optimizers`` output.

The optimizer and scheduler are dependency-injected (Lightning's documented pattern,
:class:`lightning.pytorch.cli.OptimizerCallable`): in YAML ::

    model:
      init_args:
        optimizer:
          class_path: torch.optim.AdamW
          init_args: {lr: 1.0e-3, weight_decay: 0.01}
        lr_scheduler:
          class_path: graph_urpe.models.optim.PolynomialDecayLR
          init_args: {warmup_fraction: 0.06, end_lr: 1.0e-6}

and in Python ``optimizer=functools.partial(torch.optim.AdamW, lr=1e-3)``. Each argument is
written once, in the class that uses it.

Gradient clipping under mixed precision (:func:`configure_gradient_clipping`, every module's
hook): a fused optimizer (``torch.optim.AdamW(fused=True)``, the default job's) unscales
``16-mixed``'s loss-scaled gradients inside its ``step``, so Lightning (2.6) refuses to clip for it
under any ``*-mixed`` precision. Here ``bf16-mixed`` (no loss scaling: the gradients are the true
ones) clips them as they are, and ``16-mixed`` unscales them first through the ``GradScaler``
(``scaler.unscale_``), as for an unfused optimizer; the scaler then hands the fused step
``grad_scale=None`` (nothing left to unscale) and the inf/NaN flag it found, so a step with
overflowed gradients is still skipped.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Iterable
from typing import Any

import torch
from lightning.pytorch.plugins.precision import MixedPrecision
from torch import Tensor, nn
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler

__all__ = [
    "PolynomialDecayLR",
    "configure_gradient_clipping",
    "configure_optimizers",
    "parameter_groups",
    "polynomial_decay_lr",
]


def parameter_groups(module: nn.Module) -> list[dict[str, Any]]:
    """Split trainable parameters into a weight-decayed and a non-decayed group.

    Decayed: parameters with at least 2 dimensions (weight matrices, the multi-hop edge weights),
    except those owned by embedding tables (:class:`torch.nn.Embedding` and any module with a
    ``num_relations`` table, i.e. :class:`~graph_urpe.nn.RelationEmbedding`: decay would pull the
    URPE multiplier ``C`` from its initial ones towards 0) and except names returned by a
    submodule's ``no_weight_decay()`` (the timm convention, e.g. Graphormer's graph token).
    Biases, norms and other vectors are never decayed. Tied weights are counted once.

    Args:
        module (nn.Module): the model.

    Returns:
        list[dict]: ``[{"params": decay}, {"params": no_decay, "weight_decay": 0.0}]``; the first
        group takes the optimizer's own ``weight_decay``.
    """
    excluded: set[int] = set()
    for prefix, sub in module.named_modules():
        if isinstance(sub, nn.Embedding) or hasattr(sub, "num_relations"):
            excluded.update(id(p) for p in sub.parameters())
        names = getattr(sub, "no_weight_decay", None)
        if callable(names):
            params = dict(sub.named_parameters())
            excluded.update(id(params[n]) for n in names() if n in params)
    decay, no_decay, seen = [], [], set()
    for param in module.parameters():
        if not param.requires_grad or id(param) in seen:
            continue
        seen.add(id(param))
        (decay if param.dim() >= 2 and id(param) not in excluded else no_decay).append(param)
    return [{"params": decay}, {"params": no_decay, "weight_decay": 0.0}]


def _accepts(factory: Callable, name: str) -> bool:
    """Whether ``factory`` (a class, function or :func:`functools.partial` of one, as made by
    jsonargparse for ``*Callable`` arguments) takes a keyword argument ``name``."""
    target = factory
    while isinstance(target, functools.partial):
        # jsonargparse: partial(instantiator, cls, **init_args); Python: partial(cls, ...)
        classes = [a for a in target.args if inspect.isclass(a)]
        target = classes[0] if classes else target.func
    try:
        return name in inspect.signature(target).parameters
    except (TypeError, ValueError):
        return False


def configure_optimizers(
    module: Any,
    optimizer: Callable[[Iterable], Optimizer],
    lr_scheduler: Callable[..., LRScheduler] | None,
    groups: list[dict[str, Any]] | None = None,
) -> dict[str, Any] | Optimizer:
    """``configure_optimizers`` for an injected optimizer and scheduler.

    The optimizer gets :func:`parameter_groups` of ``module``. A scheduler that takes a
    ``total_steps`` argument (like :class:`PolynomialDecayLR`) receives the Trainer's estimate of
    the run's optimizer updates (``trainer.estimated_stepping_batches``, which accounts for
    ``max_epochs`` / ``max_steps``, gradient accumulation and devices) unless the configuration
    sets it. Schedulers are stepped after every update.

    Args:
        module (LightningModule): attached to a Trainer.
        optimizer (callable): ``params -> Optimizer``.
        lr_scheduler (callable, optional): ``optimizer -> LRScheduler``.
        groups (list[dict], optional): parameter groups instead of :func:`parameter_groups`; a
            group's ``lr_scale`` multiplies the optimizer's ``lr`` for it (before the scheduler
            reads it, so the schedule scales it too). (default: :obj:`None`)

    Returns:
        dict or Optimizer: Lightning's ``{"optimizer", "lr_scheduler"}`` (or the optimizer alone).
    """
    opt = optimizer(parameter_groups(module) if groups is None else groups)
    for group in opt.param_groups:
        group["lr"] = group["lr"] * group.pop("lr_scale", 1.0)
    if lr_scheduler is None:
        return opt
    kwargs = {}
    if _accepts(lr_scheduler, "total_steps"):
        preset = getattr(lr_scheduler, "keywords", {}).get("total_steps")
        if preset is None:
            total = module.trainer.estimated_stepping_batches
            if not math.isfinite(total):
                raise ValueError(
                    "the learning-rate schedule needs the run's length: set trainer.max_epochs "
                    "or trainer.max_steps, or the scheduler's total_steps."
                )
            kwargs["total_steps"] = int(total)
    scheduler = lr_scheduler(opt, **kwargs)
    return {"optimizer": opt, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


def configure_gradient_clipping(
    module: Any,
    optimizer: Optimizer,
    gradient_clip_val: float | None = None,
    gradient_clip_algorithm: str | None = None,
    parameter_sets: list[list[Tensor]] | None = None,
) -> None:
    """Lightning's ``configure_gradient_clipping`` hook, also for fused optimizers under mixed
    precision (see the module doc).

    Lightning calls it with the Trainer's ``gradient_clip_val`` and ``gradient_clip_algorithm``
    after the backward pass and before the optimizer step. With an optimizer that unscales inside
    its step (``_step_supports_amp_scaling``, torch's flag that ``GradScaler.step`` reads: the
    fused Adam / AdamW / SGD) under ``bf16-mixed`` or ``16-mixed``, the gradients are unscaled
    first (``16-mixed`` only) and clipped by norm or value; in every other case Lightning's own
    :meth:`~lightning.pytorch.core.LightningModule.clip_gradients` does the work.

    Args:
        module (LightningModule): attached to a Trainer.
        optimizer (Optimizer): the optimizer about to step.
        gradient_clip_val (float, optional): clipping threshold; ``None`` or ``0`` clips
            nothing. (default: :obj:`None`)
        gradient_clip_algorithm (str, optional): ``"norm"`` (total 2-norm, Lightning's default)
            or ``"value"``. (default: :obj:`None`, ``"norm"``)
        parameter_sets (list[list[Tensor]], optional): clip the norm of each set on its own
            (the members of an ensemble), instead of the total norm of all parameters.
            (default: :obj:`None`)
    """
    plugin = module.trainer.precision_plugin
    fused = getattr(optimizer, "_step_supports_amp_scaling", False)
    if gradient_clip_val and gradient_clip_algorithm != "value" and parameter_sets \
            and len(parameter_sets) > 1:
        if fused and isinstance(plugin, MixedPrecision) and plugin.scaler is not None:
            plugin.scaler.unscale_(optimizer)  # Lightning unscales the others before this hook
        for params in parameter_sets:
            torch.nn.utils.clip_grad_norm_(params, gradient_clip_val)
        return
    if not (fused and isinstance(plugin, MixedPrecision)):
        module.clip_gradients(optimizer, gradient_clip_val, gradient_clip_algorithm)
        return
    if not gradient_clip_val:
        return
    if plugin.scaler is not None:  # 16-mixed: clip the true gradients, not the scaled ones
        plugin.scaler.unscale_(optimizer)
    if gradient_clip_algorithm == "value":
        plugin.clip_grad_by_value(optimizer, gradient_clip_val)
    else:
        plugin.clip_grad_by_norm(optimizer, gradient_clip_val)


def polynomial_decay_lr(
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
    r"""Linear warm-up to the optimizer's learning rate, then polynomial decay to ``end_lr``,
    sized from the run.

    The peak is each parameter group's initial ``lr``. The warm-up is ``warmup_steps`` if given,
    else ``warmup_fraction`` of ``total_steps`` capped at ``max_warmup_steps``, so that a short
    run (a small CSV, a shortened budget) still spends most of its updates at a useful rate; the
    warm-up always leaves at least one decay step. Step it once per optimizer update (Lightning:
    ``interval="step"``); see :func:`polynomial_decay_lr` for the formula.

    Args:
        optimizer (Optimizer): the wrapped optimizer.
        total_steps (int): updates until ``end_lr`` (required; :func:`configure_optimizers` fills it
            with the Trainer's estimate of the run). (default: :obj:`None`)
        warmup_steps (int, optional): explicit warm-up updates (wins over the fraction; at most
            ``total_steps - 1``).
            (default: :obj:`None`)
        warmup_fraction (float, optional): warm-up as a fraction of ``total_steps``.
            (default: :obj:`0.06`, Graphormer's PCQM4Mv2 ratio 60k / 1M)
        max_warmup_steps (int, optional): cap of the fraction-based warm-up.
            (default: :obj:`10000`)
        end_lr (float, optional): final learning rate. (default: :obj:`1e-9`)
        power (float, optional): decay exponent; 1 is linear. (default: :obj:`1.0`)
        last_epoch (int, optional): index of the last step, for resuming. (default: :obj:`-1`)

    Raises:
        ValueError: if ``total_steps < 1`` or ``warmup_fraction`` is outside ``[0, 1)``.
    """

    def __init__(
        self,
        optimizer: Optimizer,
        total_steps: int | None = None,
        warmup_steps: int | None = None,
        warmup_fraction: float = 0.06,
        max_warmup_steps: int | None = 10_000,
        end_lr: float = 1e-9,
        power: float = 1.0,
        last_epoch: int = -1,
    ) -> None:
        if total_steps is None or total_steps < 1:
            raise ValueError(
                f"total_steps must be a positive integer, got {total_steps} (Lightning modules "
                "fill it from the Trainer; in Python pass it)."
            )
        if not 0.0 <= warmup_fraction < 1.0:
            raise ValueError(f"warmup_fraction must lie in [0, 1), got {warmup_fraction}.")
        if warmup_steps is None:
            warmup_steps = round(warmup_fraction * total_steps)
            if max_warmup_steps is not None:
                warmup_steps = min(warmup_steps, max_warmup_steps)
        warmup_steps = min(warmup_steps, total_steps - 1)  # leave at least one decay step
        total_steps = max(int(total_steps), 1)
        polynomial_decay_lr(0, warmup_steps, total_steps, 1.0, end_lr, power)  # validates
        self.warmup_steps = int(warmup_steps)
        self.total_steps = int(total_steps)
        self.end_lr = float(end_lr)
        self.power = float(power)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        """Learning rate of every parameter group at the current step."""
        return [
            polynomial_decay_lr(
                self.last_epoch, self.warmup_steps, self.total_steps, peak, self.end_lr, self.power
            )
            for peak in self.base_lrs
        ]
