"""The soup of a fit's best epochs: one network whose weights are the mean of the weights of the
``k`` epochs with the best validation metric (a uniform "model soup" of checkpoints: Wortsman et
al., "Model soups", ICML 2022: their uniform soup, here of one fit's epochs).

``graph-urpe fit --test_checkpoint soup`` (the CSV template's default) adds :class:`EpochSoup`
to the fit's callbacks; at the end of ``fit`` the averaged weights are written as
``checkpoints/soup.ckpt`` (the fit's last state with the module's weights replaced), tested, and
named in the summary for ``predict`` (:mod:`graph_urpe.cli.lightning_cli`). Measured in
``benchmarks/checkpoint_rules.py`` (``benchmarks/README.md`` section 30c): on the CSV template
the soup of the five best epochs, blended as the fit blends, beats what the template tested
before (the last epoch for regression, the best for classification) on BACE pIC50 (MAE 0.811 ->
0.736, 6 seeds), FreeSolv (1.412 -> 1.344, 10 seeds), BBBP and BACE, and is level on
Lipophilicity and ClinTox. The kept weights are the callback's state (exact resume); the
received-file size bound allows for them (:data:`graph_urpe.checkpoint_parts.SOUP_SIZE`).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from lightning.pytorch.callbacks import Callback
from torch import Tensor

from graph_urpe.checkpoint_parts import SOUP_SIZE

__all__ = ["SOUP_SIZE", "EpochSoup"]


class EpochSoup(Callback):
    r"""Keeps the weights of the ``size`` best epochs by the monitored validation metric and
    averages them (the module docstring).

    After each validation pass of ``fit`` (not the sanity check) the module's ``state_dict`` is
    copied to the CPU when its ``val/<metric>`` is among the ``size`` best so far (ties: the
    earlier epoch ranks first); a non-finite or missing metric is skipped. The kept weights are
    the callback's state, so a resumed fit keeps them (exact resume).

    Args:
        size (int, optional): epochs in the soup. (default: :data:`SOUP_SIZE`)

    Raises:
        ValueError: if ``size < 1``.
    """

    def __init__(self, size: int = SOUP_SIZE) -> None:
        if size < 1:
            raise ValueError(f"size must be at least 1, got {size}")
        self.size = size
        self.monitor: str | None = None
        self.mode = "min"
        self.entries: list[tuple[float, int, dict[str, Tensor]]] = []
        self.validated: float | None = None
        """The monitored metric of the last ``validate`` (the soup's own, in a fit that writes
        ``soup.ckpt``); not part of the state."""
        self._layout: dict[str, tuple[tuple[int, ...], torch.dtype]] | None = None

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        """The monitored metric and direction (``metric_name`` / ``metric_mode`` of the module)
        and the layout of its weights (for :meth:`state_difference`)."""
        self.monitor = f"val/{pl_module.metric_name}"
        self.mode = pl_module.metric_mode
        self._layout = {k: (tuple(v.shape), v.dtype) for k, v in pl_module.state_dict().items()}

    def _rank(self, entry: tuple[float, int, dict]) -> tuple[float, int]:
        score, epoch, _ = entry
        return (-score if self.mode == "max" else score, epoch)

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        """Keep this epoch's weights if its metric is among the best (class docstring)."""
        if trainer.sanity_checking or self.monitor is None:
            return
        value = trainer.callback_metrics.get(self.monitor)
        score = float(value) if value is not None else math.nan
        if trainer.state.fn == "validate":  # the soup's own validation: its score, for the summary
            self.validated = score
        if trainer.state.fn != "fit":
            return  # fit's epochs only
        if not math.isfinite(score):
            return
        epoch = int(trainer.current_epoch)
        self.entries = [e for e in self.entries if e[1] != epoch]  # a repeated validation
        candidate = (score, epoch, None)
        if len(self.entries) >= self.size and self._rank(candidate) >= self._rank(
                max(self.entries, key=self._rank)):
            return
        weights = {k: v.detach().to("cpu", copy=True) for k, v in pl_module.state_dict().items()}
        self.entries.append((score, epoch, weights))
        self.entries.sort(key=self._rank)
        del self.entries[self.size:]

    @property
    def epochs(self) -> list[int]:
        """The kept epochs, best first."""
        return [e[1] for e in self.entries]

    def averaged(self) -> dict[str, Tensor]:
        """The soup: each floating-point tensor the mean of the kept epochs' (accumulated in
        float64, returned in its own dtype); other tensors (counters, integer buffers) the best
        epoch's.

        Returns:
            dict[str, Tensor]: a ``state_dict`` of the module, on the CPU.

        Raises:
            RuntimeError: if no epoch was kept (no finite validation metric yet).
        """
        if not self.entries:
            raise RuntimeError(f"no epoch with a finite {self.monitor} to average yet")
        states = [e[2] for e in self.entries]
        out = {}
        for key, best in states[0].items():
            if best.is_floating_point():
                total = torch.zeros(best.shape, dtype=torch.float64)
                for state in states:
                    total += state[key].double()
                out[key] = (total / len(states)).to(best.dtype)
            else:
                out[key] = best.clone()
        return out

    def state_dict(self) -> dict[str, Any]:
        """The kept epochs as plain data: ``size``, ``scores`` (floats), ``epochs`` (ints) and
        ``weights`` (CPU ``state_dict`` copies), best first."""
        return {"size": self.size, "scores": [e[0] for e in self.entries],
                "epochs": [e[1] for e in self.entries],
                "weights": [e[2] for e in self.entries]}

    def state_difference(self, state: Any) -> str | None:
        """Where a received state differs from what this callback writes for this module, or
        :obj:`None` (the weights' names, shapes and dtypes must be the module's, at most
        ``size`` entries, finite scores, distinct epochs that are counts)."""
        if not isinstance(state, dict) or set(state) != {"size", "scores", "epochs", "weights"}:
            return "not a soup state (size, scores, epochs, weights)"
        scores, epochs, weights = state["scores"], state["epochs"], state["weights"]
        if not (isinstance(scores, list) and isinstance(epochs, list)
                and isinstance(weights, list)) or not len(scores) == len(epochs) == len(weights):
            return "scores, epochs and weights are not lists of one length"
        if len(weights) > self.size:
            return f"{len(weights)} epochs kept, this fit keeps at most {self.size}"
        if not all(isinstance(s, float) and math.isfinite(s) for s in scores):
            return "a score that is not a finite float"
        if not all(type(e) is int and e >= 0 for e in epochs) or len(set(epochs)) != len(epochs):
            return "epochs that are not distinct counts"
        for w in weights:
            if not isinstance(w, dict) or self._layout is None or set(w) != set(self._layout):
                return "weights whose names are not this module's"
            for key, (shape, dtype) in self._layout.items():
                t = w[key]
                if type(t) is not Tensor or t.layout != torch.strided or t.requires_grad \
                        or tuple(t.shape) != shape or t.dtype != dtype:
                    return f"weights[{key!r}] is not a plain {dtype} tensor of shape {shape}"
        return None

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the kept epochs (checked by :meth:`state_difference` first, through
        :mod:`graph_urpe.cli.resume_state`)."""
        self.entries = sorted(zip(state_dict["scores"], state_dict["epochs"],
                                  state_dict["weights"]), key=self._rank)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(size={self.size}, epochs={self.epochs})"
