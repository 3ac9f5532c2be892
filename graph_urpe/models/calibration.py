"""Calibrated regression uncertainty: fitted on the validation split, scored on the test split.

A regression model gives each prediction a raw standard deviation :math:`\\sigma` (an ensemble's
spread, a mean-variance head's, both, or 1 for a single plain network). On the validation split
(labels the model did not train on), per target:

* **a floor** :math:`\\tau \\ge 0` (:func:`fit_sigma_floor`): :math:`\\sigma` is used as
  :math:`\\sqrt{\\sigma^2 + \\tau^2}` below, with :math:`\\tau` the value, among 0 and a log grid
  around the validation :math:`\\sigma`'s, that maximises the Gaussian likelihood of the validation
  errors under the z-scaled variance :math:`s^2 (\\sigma^2 + \\tau^2)`. A small ensemble's spread
  can be near 0 by chance on a molecule whose error is not (two members agreeing), and one such
  molecule sets :math:`s` (the mean of :math:`z^2`) hundreds of times too high for every other;
  the floor bounds :math:`z`. Where it does not raise the likelihood (a well-spread ensemble, a
  plain network's constant :math:`\\sigma`), :math:`\\tau = 0` and nothing changes;

* **z-scaling** (Levi et al., Sensors 2022; Chemprop's ``ZScalingCalibrator``): the factor
  :math:`s = \\sqrt{\\mathrm{mean}(z^2)}`, :math:`z = (y - \\mu) / \\sigma`, the maximum-likelihood
  scale of a Gaussian; the reported standard deviation is :math:`s\\,\\sigma` (for a plain
  network: the validation RMSE);
* **a conformal 95 % interval** (split conformal prediction with normalised residuals, Lei et al.,
  JASA 2018; Chemprop's ``RegressionConformalCalibrator``): :math:`q` = the
  :math:`\\lceil (n + 1)\\,0.95 \\rceil`-th smallest of the :math:`n` values :math:`|z|`, and the
  interval :math:`\\mu \\pm q\\,\\sigma`, which covers a new label with probability at least 95 %
  when validation and test molecules are exchangeable (a scaffold split makes them less so: the
  test coverage says how much).

:func:`calibration_metrics` scores them on the test split: the interval's coverage, the Spearman
correlation of :math:`|y - \\mu|` with the standard deviation (does a larger uncertainty go with a
larger error?) and the Gaussian negative log-likelihood.

Classification probabilities, optionally (``platt_scaling``): **Platt scaling** (Platt 1999;
Chemprop's ``PlattCalibrator``), :math:`p = \\sigma(a z + b)` of the logit :math:`z`, with
:math:`a > 0` and :math:`b` of each task fitted by maximum likelihood on the validation split,
against Platt's smoothed targets (:func:`fit_platt`): the validation log loss is never above the
uncalibrated one, and the order of the probabilities (ROC-AUC, AP) is unchanged.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.stats import spearmanr
from torch import Tensor

__all__ = ["GAUSSIAN_HALF_WIDTH", "LEVEL", "SUMMARY_LABELS", "CalibrationMixin",
           "calibration_metrics", "fit_calibration", "fit_platt", "fit_sigma_floor",
           "floored_sigma",
           "masked_gaussian_nll", "platt_targets"]

LEVEL = 0.95
"""The level of the prediction intervals (``<target>_lower`` / ``<target>_upper``)."""

GAUSSIAN_HALF_WIDTH = 1.959964
"""The standard normal's 97.5 % quantile: an uncalibrated interval's half-width in stds."""

SUMMARY_LABELS = {
    "coverage95": "coverage of the 95% intervals (calibrated on the validation split)",
    "spearman": "Spearman correlation of |error| with the std",
    "nll": "NLL (Gaussian, calibrated std, labels' units)",
}
"""How the fit summary names the test metrics ``test/coverage95``, ``test/spearman``,
``test/nll`` (logged by :class:`~graph_urpe.models.GraphPropertyModule` for regression)."""

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def masked_gaussian_nll(mean: Tensor, variance: Tensor, target: Tensor) -> Tensor:
    r"""Mean Gaussian negative log-likelihood over the labelled (non-NaN) entries:
    :math:`\frac12\log(2\pi\sigma^2) + \frac{(y-\mu)^2}{2\sigma^2}` (the loss of a mean-variance
    head, :func:`torch.nn.functional.gaussian_nll_loss` with ``full=True``).

    Args:
        mean (Tensor): ``[R, T]`` predicted means.
        variance (Tensor): ``[R, T]`` predicted variances, positive.
        target (Tensor): ``[R, T]`` labels, NaN = missing.

    Returns:
        Tensor: scalar; ``0`` (with gradient) when nothing is labelled.
    """
    mask = ~torch.isnan(target)
    if not mask.any():
        return mean.sum() * 0.0
    return torch.nn.functional.gaussian_nll_loss(mean[mask], target[mask], variance[mask],
                                                 full=True)


FLOOR_GRID = torch.logspace(-3, 1, 41, dtype=torch.float64)
"""The candidate floors of :func:`fit_sigma_floor` besides 0, as multiples of the median raw
:math:`\\sigma` of the validation rows (0.001 to 10, 10 a decade; the median of an even count is
the lower middle value, :meth:`torch.Tensor.median`). At the top of the grid the floor dominates:
the spread says nothing about the errors on these rows and every molecule gets nearly one std."""


def fit_sigma_floor(mean: Tensor, sigma: Tensor, target: Tensor) -> Tensor:
    r"""The floor :math:`\tau` of each target's raw standard deviation (module docstring): the
    candidate (0, or :data:`FLOOR_GRID` times the median :math:`\sigma`) that minimises the
    profile Gaussian negative log-likelihood of the validation errors :math:`e`,
    :math:`\mathrm{mean}(\log \sigma_\tau) + \frac12 \log \mathrm{mean}(e^2 / \sigma_\tau^2)` with
    :math:`\sigma_\tau = \sqrt{\sigma^2 + \tau^2}` (the z-scale :math:`s` at its optimum); ties
    keep the smaller floor, so a constant :math:`\sigma` keeps :math:`\tau = 0`.

    Args:
        mean (Tensor): ``[R, T]`` validation predictions.
        sigma (Tensor): ``[R, T]`` their raw standard deviations, ``>= 0``.
        target (Tensor): ``[R, T]`` validation labels, NaN = missing.

    Returns:
        Tensor: ``[T]`` float32, ``>= 0`` (0 for a target without validation labels, or whose
        errors are all 0).
    """
    floor = torch.zeros(target.shape[1])
    for t in range(target.shape[1]):
        seen = ~torch.isnan(target[:, t])
        err = (target[seen, t] - mean[seen, t]).double().cpu()
        sd = sigma[seen, t].double().cpu().clamp(min=0)
        if err.numel() == 0 or not bool((err != 0).any()):
            continue
        unit = sd.median() if bool(sd.median() > 0) else err.abs().mean()
        best, best_nll = 0.0, None
        for tau in torch.cat([torch.zeros(1, dtype=torch.float64), unit * FLOOR_GRID]).tolist():
            var = (sd.square() + tau * tau).clamp(min=1e-24)
            nll = float(0.5 * var.log().mean() + 0.5 * (err.square() / var).mean().log())
            if best_nll is None or nll < best_nll - 1e-9 * abs(best_nll):
                best, best_nll = tau, nll
        floor[t] = best
    return floor


def floored_sigma(variance: Tensor, floor: Tensor) -> Tensor:
    r"""The raw standard deviation the calibration scales, :math:`\sqrt{\sigma^2 + \tau^2}`
    (module docstring), kept above 1e-12.

    Args:
        variance (Tensor): ``[R, T]`` raw variances :math:`\sigma^2` (negative ones read as 0).
        floor (Tensor): ``[T]`` floors :math:`\tau` (:func:`fit_sigma_floor`; NaN read as 0).

    Returns:
        Tensor: ``[R, T]``, in the labels' units.
    """
    floor = torch.nan_to_num(floor, nan=0.0)
    return (variance.clamp(min=0) + floor.square()).sqrt().clamp(min=1e-12)


def fit_calibration(mean: Tensor, sigma: Tensor, target: Tensor, level: float = LEVEL
                    ) -> tuple[Tensor, Tensor]:
    """The z-scaling factor and the conformal interval factor of each target (module docstring).

    Args:
        mean (Tensor): ``[R, T]`` validation predictions.
        sigma (Tensor): ``[R, T]`` their raw standard deviations, positive.
        target (Tensor): ``[R, T]`` validation labels, NaN = missing.
        level (float, optional): the interval's level. (default: :obj:`0.95`)

    Returns:
        tuple[Tensor, Tensor]: ``scale [T]`` and ``quantile [T]`` (NaN for a target without
        validation labels; ``quantile`` is the largest :math:`|z|` when fewer than
        :math:`1 / (1 - \\text{level}) - 1` labels leave no higher order statistic).
    """
    z = ((target - mean) / sigma).abs()
    scale = torch.full((target.shape[1],), float("nan"))
    quantile = torch.full((target.shape[1],), float("nan"))
    for t in range(target.shape[1]):
        values = z[~torch.isnan(z[:, t]), t].double().cpu()
        n = values.numel()
        if n == 0:
            continue
        scale[t] = float(values.square().mean().sqrt())
        k = min(math.ceil((n + 1) * level), n)  # the k-th smallest, 1-based
        quantile[t] = float(values.sort().values[k - 1])
    return scale, quantile


def platt_targets(y: Tensor) -> Tensor:
    """Platt's targets for labels ``y`` (0 / 1): :math:`(N_+ + 1) / (N_+ + 2)` for a positive,
    :math:`1 / (N_- + 2)` for a negative (a prior that keeps the fit finite on a validation split
    the logits separate)."""
    positives = float(y.sum())
    negatives = y.numel() - positives
    return torch.where(y > 0.5, (positives + 1) / (positives + 2), 1 / (negatives + 2))


def _platt_task(z: Tensor, y: Tensor) -> tuple[float, float]:
    """:func:`fit_platt` of one task's labelled logits ``z`` and labels ``y`` (float64)."""
    params = torch.zeros(2, dtype=torch.float64, requires_grad=True)  # log a, b
    soft = platt_targets(y)

    def loss(p: Tensor, labels: Tensor = soft) -> Tensor:
        return torch.nn.functional.binary_cross_entropy_with_logits(p[0].exp() * z + p[1],
                                                                    labels)

    optimizer = torch.optim.LBFGS([params], lr=1.0, max_iter=200, tolerance_grad=1e-10,
                                  tolerance_change=1e-14, line_search_fn="strong_wolfe")

    def closure() -> Tensor:
        optimizer.zero_grad()
        value = loss(params)
        value.backward()
        return value

    optimizer.step(closure)
    with torch.no_grad():
        identity = torch.zeros(2, dtype=torch.float64)
        fitted = params if loss(params, y) <= loss(identity, y) else identity
    return float(fitted[0].detach().exp()), float(fitted[1].detach())


def fit_platt(logits: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
    r"""Platt scaling of each task (module docstring): :math:`a > 0` (fitted as :math:`\log a`)
    and :math:`b` minimising the mean binary cross-entropy of :math:`\sigma(a z + b)` against
    Platt's targets (:func:`platt_targets`) on the labelled entries, by L-BFGS in float64 from
    :math:`a = 1, b = 0`; kept at ``(1, 0)`` if the fit does not lower the log loss of the
    labels themselves.

    Args:
        logits (Tensor): ``[R, T]`` validation logits.
        target (Tensor): ``[R, T]`` validation labels 0 / 1, NaN = missing.

    Returns:
        tuple[Tensor, Tensor]: ``scale [T]`` (:math:`a`) and ``bias [T]`` (:math:`b`); NaN for
        a task whose validation labels are not of both classes (left uncalibrated).
    """
    fitted = []
    for t in range(target.shape[1]):
        keep = ~torch.isnan(target[:, t])
        z = logits[keep, t].detach().double().cpu()
        y = target[keep, t].detach().double().cpu()
        if y.numel() == 0 or y.min() == y.max():
            fitted.append((math.nan, math.nan))
            continue
        # Also at a validation's end, where Lightning runs in inference mode.
        with torch.inference_mode(False), torch.enable_grad():
            fitted.append(_platt_task(z.clone(), y.clone()))
    scale, bias = zip(*fitted) if fitted else ((), ())
    return torch.tensor(scale, dtype=torch.float32), torch.tensor(bias, dtype=torch.float32)


def calibration_metrics(mean: Tensor, std: Tensor, lower: Tensor, upper: Tensor,
                        target: Tensor) -> dict[str, float]:
    """How well calibrated uncertainties did on labelled rows, averaged over the targets.

    Args:
        mean (Tensor): ``[R, T]`` predictions.
        std (Tensor): ``[R, T]`` calibrated standard deviations.
        lower (Tensor): ``[R, T]`` lower ends of the intervals.
        upper (Tensor): ``[R, T]`` upper ends.
        target (Tensor): ``[R, T]`` labels, NaN = missing.

    Returns:
        dict[str, float]: ``coverage`` (fraction of labels inside their interval), ``spearman``
        (Spearman's rank correlation of ``|label - mean|`` with ``std``; NaN for fewer than 3
        labels or a constant ``std``) and ``nll`` (mean Gaussian negative log-likelihood per
        label, with ``std``, in the labels' units); NaN where no target has labels.
    """
    per: dict[str, list[float]] = {"coverage": [], "spearman": [], "nll": []}
    for t in range(target.shape[1]):
        keep = ~torch.isnan(target[:, t])
        if not keep.any():
            continue
        y, mu, sd = (v[keep, t].double().cpu().numpy() for v in (target, mean, std))
        lo, hi = lower[keep, t].double().cpu().numpy(), upper[keep, t].double().cpu().numpy()
        per["coverage"].append(float(np.mean((y >= lo) & (y <= hi))))
        err = np.abs(y - mu)
        constant = np.ptp(sd) == 0 or np.ptp(err) == 0
        per["spearman"].append(float("nan") if len(y) < 3 or constant
                               else float(spearmanr(err, sd).statistic))
        per["nll"].append(float(np.mean(_HALF_LOG_2PI + np.log(sd) + 0.5 * (err / sd) ** 2)))
    return {k: float(np.mean(v)) if v else float("nan") for k, v in per.items()}


class CalibrationMixin:
    """The calibration of a :class:`~graph_urpe.models.GraphPropertyModule`'s predictions, fitted
    on the validation split: z-scaled standard deviations and conformal 95 % intervals
    (regression; buffers ``uncertainty_scale``, ``interval_factor``) and Platt scaling
    (classification with ``platt_scaling``; buffers ``platt_scale``, ``platt_bias``), scored on
    the test split (:func:`calibration_metrics`). Reads the module's ``num_labels``,
    ``record``, ``objective`` and :attr:`~graph_urpe.models.ensemble.EnsembleMixin.per_molecule_uncertainty`.
    """

    def _init_calibration(self) -> None:
        """The buffers ``uncertainty_scale`` (sigma -> calibrated std, z-scaling) and
        ``interval_factor`` (95 % half-width / sigma, conformal) of each target, fitted on the
        validation split (regression); NaN until then. With ``platt_scaling`` (classification
        only) also ``platt_scale`` and ``platt_bias`` (:func:`~graph_urpe.models.calibration.
        fit_platt`; a buffer only when asked for, so other checkpoints keep their tensors)."""
        for name in ("uncertainty_scale", "interval_factor"):
            self.register_buffer(name, torch.full((self.num_labels,), float("nan")))
        self.register_buffer("sigma_floor", torch.zeros(self.num_labels))
        if self.objective.platt_scaling:  # classification only (check_task_options)
            for name in ("platt_scale", "platt_bias"):
                self.register_buffer(name, torch.full((self.num_labels,), float("nan")))

    def platt_logits(self, logits: Tensor) -> Tensor:
        """Classification logits ``[R, T]`` after Platt scaling (``a z + b`` per task; as they
        are without ``platt_scaling`` and for a task not yet calibrated)."""
        if not hasattr(self, "platt_scale"):
            return logits
        scale = torch.nan_to_num(self.platt_scale, nan=1.0)
        return logits * scale + torch.nan_to_num(self.platt_bias, nan=0.0)

    @staticmethod
    def upgrade_state_dict(state: dict[str, Tensor]) -> None:
        """Add, in place, the calibration tensors a received state dict of an earlier version
        lacks (called on reading it, before its sizes are checked: :mod:`graph_urpe.trust`):
        ``uncertainty_scale`` / ``interval_factor`` NaN (uncalibrated), ``sigma_floor`` 0 (the
        calibration as it was fitted). Sized from ``target_mean`` ``[T]``; a state without it
        is left as it is."""
        mean = state.get("target_mean")
        if not isinstance(mean, Tensor) or mean.dim() != 1:
            return
        for name, value in (("uncertainty_scale", float("nan")),
                            ("interval_factor", float("nan")), ("sigma_floor", 0.0)):
            if name not in state:
                state[name] = torch.full_like(mean, value)

    def calibrated(self, mean: Tensor, variance: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``(std, lower, upper)`` ``[R, T]``: z-scaled standard deviations and the conformal
        95 % interval (uncalibrated: the raw std and the Gaussian's 1.96 std)."""
        sigma = floored_sigma(variance, self.sigma_floor)
        scale = torch.nan_to_num(self.uncertainty_scale, nan=1.0)
        half = torch.nan_to_num(self.interval_factor, nan=GAUSSIAN_HALF_WIDTH) * sigma
        return sigma * scale, mean - half, mean + half

    def _uncertainty_epoch(self, stage: str, mean: Tensor, variance: Tensor, target: Tensor
                           ) -> dict[str, float]:
        """Regression: at validation fit the calibration; at test keep ``test_uncertainty``
        (``{"std", "lower", "upper"}``; without :attr:`per_molecule_uncertainty` no ``"std"``)
        and return the calibration metrics (``test/coverage95``, ``test/nll``, and with
        :attr:`per_molecule_uncertainty` ``test/spearman``). An ensemble classifier's test:
        ``test_uncertainty`` = ``{"std": the members' std of the probability}``."""
        if self.record.task != "regression":
            if stage == "val" and hasattr(self, "platt_scale"):
                scale, bias = fit_platt(mean, target)
                self.platt_scale.copy_(scale)
                self.platt_bias.copy_(bias)
            if stage == "test" and len(self.members) > 1:
                self.test_uncertainty = {"std": variance.clamp(min=0).sqrt()}
            return {}
        if stage == "val":
            floor = fit_sigma_floor(mean, variance.clamp(min=0).sqrt(), target)
            scale, factor = fit_calibration(mean, floored_sigma(variance, floor), target, LEVEL)
            self.sigma_floor.copy_(floor)
            self.uncertainty_scale.copy_(scale)
            self.interval_factor.copy_(factor)
            return {}
        std, lower, upper = self.calibrated(mean, variance)
        scores = calibration_metrics(mean, std, lower, upper, target)
        if not self.per_molecule_uncertainty:  # one std for every molecule: no ranking of them
            self.test_uncertainty = {"lower": lower, "upper": upper}
            return {"test/coverage95": scores["coverage"], "test/nll": scores["nll"]}
        self.test_uncertainty = {"std": std, "lower": lower, "upper": upper}
        return {"test/coverage95": scores["coverage"], "test/spearman": scores["spearman"],
                "test/nll": scores["nll"]}
