"""Lightning module for graph property prediction with an injected network (URPE-Graphormer).

:class:`GraphPropertyModule` trains any network that maps a PyG batch to ``[num_graphs,
num_tasks]`` (by default :class:`~graph_urpe.nn.Graphormer`) for graph regression (ZINC,
PCQM4Mv2, your CSV) or multi-task binary classification (OGB ``ogbg-mol*``, your CSV): missing
labels masked, regression targets standardised with the training split's statistics (kept in the
checkpoint; loss in standardised units, metrics and predictions in the labels' units), epoch
metrics exact under DDP (:mod:`graph_urpe.tasks.metrics`), an injected optimizer and scheduler
(:mod:`graph_urpe.tasks.optim`). Gradient clipping is a Trainer option.

The network, optimizer and scheduler are written once, in their own classes: in YAML ::

    model:
      class_path: graph_urpe.tasks.GraphPropertyModule
      init_args:
        model:
          class_path: graph_urpe.nn.Graphormer
          init_args: {num_layers: 12, embed_dim: 80, num_heads: 8, attention: urpe}

with the dataset's sizes (``num_tasks``, ``atom_categories``, ``bond_categories``) and facts
(``task``, ``metric``, ...) linked from the data module by ``graph-urpe``. In Python ::

    net = Graphormer(num_tasks=1, atom_categories=[28], bond_categories=[4])
    module = GraphPropertyModule(net, task="regression", metric="mae")

A checkpoint written under ``graph-urpe`` stores the network's class path and arguments, so
``GraphPropertyModule.load_from_checkpoint(path)`` rebuilds it alone; a module built in Python
from a network *instance* is loaded with ``load_from_checkpoint(path, model=net)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from lightning.pytorch import LightningModule
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from lightning.pytorch.core.mixins.hparams_mixin import _given_hyperparameters
from torch import Tensor, nn

from graph_urpe.tasks.metrics import LOSSES, EpochPredictions, epoch_metrics, masked_loss
from graph_urpe.tasks.optim import PolynomialDecayLR, configure_optimizers

__all__ = ["GraphPropertyModule", "NonFiniteLossError"]

_TASKS = ("regression", "classification")
_HIGHER_IS_BETTER = {"rocauc": True, "ap": True, "r2": True, "mae": False, "rmse": False}


class NonFiniteLossError(RuntimeError):
    """Training produced a NaN / infinite loss: the run is stopped instead of continuing."""


def _sample_ids(batch) -> Tensor:
    ids = batch.get("sample_id")
    if ids is None:
        raise ValueError(
            "batch has no `sample_id`: wrap the dataset in graph_urpe.data.IndexedDataset "
            "(the GraphDataModules do), so epoch metrics can de-duplicate and order samples."
        )
    return ids.view(-1)


class GraphPropertyModule(LightningModule):
    r"""Graph-level regression / binary classification with an injected network.

    Args:
        model (nn.Module): the network, ``batch -> [num_graphs, num_tasks]`` (logits for
            classification), e.g. :class:`~graph_urpe.nn.Graphormer`.
        task (str, optional): ``"regression"`` or ``"classification"``.
            (default: ``"regression"``; linked from the data module)
        metric (str, optional): the monitored metric, ``"mae"``, ``"rmse"``, ``"r2"``,
            ``"rocauc"`` or ``"ap"``. (default: :obj:`None`: ``mae`` / ``rocauc``)
        evaluator (str, optional): official evaluator (``"ogbg-..."``, ``"pcqm4mv2"``).
            (default: :obj:`None`)
        target_names (list[str], optional): names of the outputs. (default: ``y0, y1, ...``)
        featurization (str, optional): how SMILES become graphs (``"zinc"``/``"ogb"``), used by
            ``predict``. (default: :obj:`None`)
        max_graph_nodes (int, optional): the node-count limit of training, enforced by
            ``predict``. (default: :obj:`None`)
        dataset_source (str, optional): where the training data came from (recorded in the
            checkpoint and logs). (default: :obj:`None`)
        loss (str, optional): ``"l1"``, ``"mse"`` or ``"bce"``; :obj:`None` picks ``"bce"`` for
            classification, ``"mse"`` for RMSE-scored and ``"l1"`` for other regression.
            (default: :obj:`None`)
        standardize (bool, optional): train regression on targets standardised per task with
            the training split's NaN-aware mean and std. (default: :obj:`True`)
        optimizer (OptimizerCallable, optional): ``params -> Optimizer``; parameters are split by
            :func:`~graph_urpe.tasks.optim.parameter_groups` (no weight decay on biases, norms,
            embeddings and the ``B`` / ``C`` tables). (default: :class:`torch.optim.AdamW`)
        lr_scheduler (LRSchedulerCallable, optional): ``optimizer -> LRScheduler``, stepped every
            update. (default: :class:`~graph_urpe.tasks.optim.PolynomialDecayLR`)
        compile (bool, optional): run the network through :func:`torch.compile`.
            (default: :obj:`False`)

    Raises:
        ValueError: for unknown ``task`` / ``loss`` / ``metric`` values, or a loss that does not
            fit the task.
        NonFiniteLossError: (during training) when a loss is NaN or infinite.
    """

    def __init__(
        self,
        model: nn.Module,
        task: str = "regression",
        metric: str | None = None,
        evaluator: str | None = None,
        target_names: list[str] | None = None,
        featurization: str | None = None,
        max_graph_nodes: int | None = None,
        dataset_source: str | None = None,
        loss: str | None = None,
        standardize: bool = True,
        optimizer: OptimizerCallable = torch.optim.AdamW,
        lr_scheduler: LRSchedulerCallable | None = PolynomialDecayLR,
        compile: bool = False,
    ) -> None:
        super().__init__()
        # Under LightningCLI the configurations of the network, optimizer and scheduler (class
        # paths, arguments) are saved, so a checkpoint rebuilds them; objects given in Python are
        # never pickled into a checkpoint (it stays loadable with weights_only=True).
        injected = ["model", "optimizer", "lr_scheduler"]
        self.save_hyperparameters(ignore=None if _given_hyperparameters.get() else injected)
        if task not in _TASKS:
            raise ValueError(f"task must be one of {_TASKS}, got {task!r}.")
        if loss is not None and loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}.")
        if metric is not None and metric not in _HIGHER_IS_BETTER:
            raise ValueError(f"metric must be one of {sorted(_HIGHER_IS_BETTER)}, got {metric!r}.")
        if (task == "classification") != (self.loss_name == "bce"):
            raise ValueError(
                f"loss {self.loss_name!r} does not fit a {task} task: use 'bce' for "
                "classification and 'l1' or 'mse' for regression."
            )
        self.model = model
        self.num_tasks = _num_outputs(model)
        self.optimizer = optimizer
        self.lr_scheduler = lr_scheduler
        # Kept out of the module registry: the compiled wrapper shares the model's parameters and
        # must not add a second copy of them to the state dict.
        self.__dict__["_forward"] = torch.compile(model) if compile else model
        # Target standardisation (regression): y_std = (y - mean) / std, set from the training
        # split at fit time; identity until then. Buffers, so checkpoints carry them.
        self.register_buffer("target_mean", torch.zeros(self.num_tasks))
        self.register_buffer("target_std", torch.ones(self.num_tasks))
        self.epoch_predictions = nn.ModuleDict(
            {s: EpochPredictions(self.num_tasks) for s in ("val", "test")}
        )

    # --------------------------------------------------------------------------- facts
    @property
    def loss_name(self) -> str:
        """The loss in use: ``loss``, else ``bce`` (classification), ``mse`` (RMSE-scored
        regression) or ``l1``."""
        hp = self.hparams
        if hp.get("loss") is not None:
            return hp.loss
        if hp.get("task") == "classification":
            return "bce"
        return "mse" if hp.get("metric") == "rmse" else "l1"

    @property
    def metric_name(self) -> str:
        """The monitored metric: ``metric``, else ``mae`` / ``rocauc``."""
        if self.hparams.get("metric") is not None:
            return self.hparams.metric
        return "rocauc" if self.hparams.get("task") == "classification" else "mae"

    @property
    def metric_mode(self) -> str:
        """``"max"`` or ``"min"``: how the monitored metric improves."""
        return "max" if _HIGHER_IS_BETTER[self.metric_name] else "min"

    @property
    def target_names(self) -> list[str]:
        """Names of the outputs (``target_names`` or ``y0, y1, ...``)."""
        names = self.hparams.target_names
        if names:
            return list(names)
        return ["y"] if self.num_tasks == 1 else [f"y{i}" for i in range(self.num_tasks)]

    # ----------------------------------------------------------------------- setup
    def setup(self, stage: str) -> None:
        """At ``fit``: take the target statistics of the data module's training split
        (``train_target_stats()``; regression with ``standardize`` only)."""
        if stage != "fit" or self.hparams.task != "regression" or not self.hparams.standardize:
            return
        dm = getattr(self.trainer, "datamodule", None)
        stats = getattr(dm, "train_target_stats", None)
        if not callable(stats):
            return
        mean, std = stats()
        self.target_mean.copy_(torch.as_tensor(mean, dtype=torch.float32))
        self.target_std.copy_(torch.as_tensor(std, dtype=torch.float32).clamp(min=1e-12))

    # --------------------------------------------------------------------- forward
    def forward(self, batch) -> Tensor:
        """Raw network outputs ``[num_graphs, num_tasks]`` in standardised units (regression)
        or logits (classification)."""
        return self._forward(batch)

    def predict_values(self, batch) -> Tensor:
        """Predictions ``[num_graphs, num_tasks]`` in the labels' units (regression) or
        probabilities (classification)."""
        out = self(batch).float()
        if self.hparams.task == "classification":
            return torch.sigmoid(out)
        return out * self.target_std + self.target_mean

    # ------------------------------------------------------------------------ steps
    def _target(self, batch) -> Tensor:
        return batch.y.view(-1, self.num_tasks).to(torch.float32)

    def _scaled(self, target: Tensor) -> Tensor:
        if self.hparams.task == "classification":
            return target
        return (target - self.target_mean) / self.target_std

    def training_step(self, batch, batch_idx: int) -> Tensor:
        pred = self(batch)
        loss = masked_loss(pred, self._scaled(self._target(batch)), self.loss_name)
        if not torch.isfinite(loss):
            raise NonFiniteLossError(
                f"training loss is {loss.item()} at epoch {self.current_epoch}, step "
                f"{self.global_step}: the labels or the learning rate are out of range (check for "
                "huge label values; lower the optimizer's lr). Training stopped; the last good "
                "checkpoint is kept."
            )
        self.log("train/loss", loss, prog_bar=True, batch_size=pred.shape[0])
        return loss

    def _eval_step(self, batch, stage: str) -> None:
        pred = self.predict_values(batch) if self.hparams.task == "regression" else self(batch)
        self.epoch_predictions[stage].update(_sample_ids(batch), pred, self._target(batch))

    def validation_step(self, batch, batch_idx: int) -> None:
        self._eval_step(batch, "val")

    def test_step(self, batch, batch_idx: int) -> None:
        self._eval_step(batch, "test")

    def _eval_epoch_end(self, stage: str) -> None:
        collector = self.epoch_predictions[stage]
        ids, pred, target = collector.compute()
        collector.reset()
        if self.trainer.sanity_checking:
            return
        # Loss over the de-duplicated samples (exact under DDP), in training units.
        scaled_pred = pred if self.hparams.task == "classification" else (
            (pred - self.target_mean) / self.target_std)
        loss = masked_loss(scaled_pred, self._scaled(target), self.loss_name)
        values = epoch_metrics(pred, target, self.hparams.task, self.hparams.evaluator)
        values = {f"{stage}/{k}": v for k, v in values.items()}
        values[f"{stage}/loss"] = float(loss)
        values[f"{stage}/num_graphs"] = float(ids.numel())
        monitored = f"{stage}/{self.metric_name}"
        for key, value in values.items():
            # Every rank holds the same gathered values: no further reduction needed.
            self.log(key, value, prog_bar=key == monitored, sync_dist=False)
        if stage == "test":
            self.test_outputs = (ids, pred, target)

    def on_validation_epoch_end(self) -> None:
        self._eval_epoch_end("val")

    def on_test_epoch_end(self) -> None:
        self._eval_epoch_end("test")

    def predict_step(self, batch, batch_idx: int) -> dict[str, Tensor]:
        """``{"sample_id": [G], "prediction": [G, T]}`` in the labels' units (probabilities for
        classification)."""
        return {"sample_id": _sample_ids(batch), "prediction": self.predict_values(batch)}

    def configure_callbacks(self) -> Sequence[Callback] | Callback:
        """When predicting with a data module that names an output CSV, add its writer."""
        trainer = self._trainer
        if trainer is None or trainer.state.fn != "predict":
            return []
        make = getattr(getattr(trainer, "datamodule", None), "prediction_writer", None)
        writer = make() if callable(make) else None
        return [writer] if writer is not None else []

    def configure_optimizers(self) -> dict[str, Any]:
        """The injected optimizer over :func:`~graph_urpe.tasks.optim.parameter_groups`, and the
        scheduler stepped every update, sized from the run."""
        return configure_optimizers(self, self.optimizer, self.lr_scheduler)


def _num_outputs(model: nn.Module) -> int:
    """Outputs per graph of a network: its ``num_tasks`` (Graphormer) or ``out_channels``."""
    for name in ("num_tasks", "out_channels"):
        value = getattr(model, name, None)
        if isinstance(value, int) and value > 0:
            return value
    raise ValueError(
        f"cannot tell how many outputs {type(model).__name__} has: give it a positive integer "
        "attribute `num_tasks` (or `out_channels`)."
    )
