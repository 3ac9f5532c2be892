"""Dropout whose random numbers cost less on CPU: 16 random bits per element.

PyTorch's CPU dropout draws one 32-bit Mersenne-twister number per element (``bernoulli_``), which
made dropout 17 % of a training step of the CSV template (``benchmarks/README.md`` section 12).
Here one 64-bit draw (:meth:`torch.Tensor.random_` over the full ``int64`` range) gives four
16-bit lanes, and an element is kept when its lane is at least a threshold: the drop probability
is ``p`` rounded to a multiple of ``2**-16`` (0.1 -> 0.100006), and kept values are scaled by
``1 / (1 - p_rounded)``, so the expectation is unchanged exactly (Srivastava et al., JMLR 2014,
"inverted" dropout as :func:`torch.nn.functional.dropout`). The masks come from torch's global
generator like any dropout's, so seeding and the checkpointed generator state make runs
reproducible and resumable (``tests/test_resume.py``). Off the CPU (CUDA's fused dropout is
cheap) :func:`torch.nn.functional.dropout` is used.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["Dropout", "dropout", "keep_mask"]

_LANES = 4  # 16-bit lanes per 64-bit draw


def keep_mask(like: Tensor, p: float) -> tuple[Tensor, float]:
    """A dropout mask for ``like`` and the factor for the kept values.

    Args:
        like (Tensor): the tensor to drop from (its shape and device).
        p (float): drop probability in ``[0, 1)``.

    Returns:
        ``(keep, scale)``: ``keep`` a bool tensor of ``like``'s shape (True = kept, probability
        ``1 - p_rounded`` on CPU, ``p_rounded = round(p * 2**16) / 2**16``; ``1 - p`` elsewhere)
        and ``scale = 1 / (1 - p_rounded)``.
    """
    if like.device.type != "cpu":
        return torch.rand_like(like, dtype=torch.float32) >= p, 1.0 / (1.0 - p)
    dropped = round(p * 65536)
    n = like.numel()
    draws = torch.empty((n + _LANES - 1) // _LANES, dtype=torch.int64)
    draws.random_(-(2**63), 2**63 - 1)  # every bit random (the default range leaves the top 0)
    lanes = draws.view(torch.int16)[:n].view(like.shape)
    return lanes >= dropped - 32768, 65536.0 / (65536 - dropped)


class _Dropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, p: float) -> Tensor:
        keep, scale = keep_mask(x, p)
        ctx.save_for_backward(keep)
        ctx.scale = scale
        return x.mul(keep).mul_(scale)

    @staticmethod
    def backward(ctx, grad: Tensor):
        (keep,) = ctx.saved_tensors
        return grad.mul(keep).mul_(ctx.scale), None


def dropout(x: Tensor, p: float, training: bool = True) -> Tensor:
    """Inverted dropout of ``x`` with the CPU masks of :func:`keep_mask` (see the module doc).

    Args:
        x (Tensor): any shape and float dtype.
        p (float): drop probability in ``[0, 1]``; ``p = 1`` returns zeros.
        training (bool, optional): drop only when true. (default: :obj:`True`)

    Returns:
        Tensor: the shape and dtype of ``x``.
    """
    if not training or p == 0.0:
        return x
    if p >= 1.0 or x.device.type != "cpu":
        return F.dropout(x, p, training)
    return _Dropout.apply(x, p)


class Dropout(nn.Module):
    r""":class:`torch.nn.Dropout` with the cheaper CPU masks of :func:`dropout`.

    Args:
        p (float, optional): drop probability in ``[0, 1]``. (default: :obj:`0.5`)

    Shapes:
        - **input:** any; **output:** the same.

    Raises:
        ValueError: if ``p`` is outside ``[0, 1]``.
    """

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability must lie in [0, 1], got {p}")
        self.p = float(p)

    def reset_parameters(self) -> None:
        """Nothing to reset (no parameters)."""

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(p={self.p})"
