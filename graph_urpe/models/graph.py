"""Lightning module for graph- and node-level prediction with an injected network (URPE-Graphormer).

:class:`GraphPropertyModule` trains a network mapping a PyG batch to ``[num_graphs, num_outputs]``
(or ``[num_nodes, num_outputs]`` for a network whose ``level`` is ``"node"``), by default
:class:`~graph_urpe.nn.Graphormer`, for regression, multi-task binary or multi-class
classification: missing labels masked, regression targets standardised with the training split's
statistics (loss in standardised units, metrics and predictions in the labels' units), epoch
metrics exact under DDP (:mod:`graph_urpe.models.scores`), an injected optimizer and scheduler
(:mod:`graph_urpe.models.optim`). It is composed, as Chemprop composes its ``MPNN``: the network,
the :class:`~graph_urpe.models.record.ModelRecord` of what the data taught it (linked whole from
the data module by ``graph-urpe``), the :class:`~graph_urpe.models.objective.Objective`, the
:class:`~graph_urpe.models.finetune.Finetune` options, optimizer and scheduler. In YAML ::

    model:
      class_path: graph_urpe.models.GraphPropertyModule
      init_args:
        model:
          class_path: graph_urpe.nn.Graphormer
          init_args: {num_layers: 12, embed_dim: 80, num_heads: 8, attention: urpe}
        objective: {loss: mse}

In Python: ``GraphPropertyModule(net, ModelRecord(task="classification"))``. A checkpoint written
under ``graph-urpe`` stores the network's class path and arguments, so
``GraphPropertyModule.load_from_checkpoint(path)`` rebuilds it alone; a module built in Python
from a network *instance* is loaded with ``load_from_checkpoint(path, model=net)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import torch
from lightning.pytorch import Callback, LightningModule
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from lightning.pytorch.utilities import rank_zero_info
from torch import Tensor, nn

from graph_urpe.data.facts import GraphData, TrainingStatistics, label_columns
from graph_urpe.models.calibration import CalibrationMixin, masked_gaussian_nll
from graph_urpe.models.ensemble import EnsembleMixin
from graph_urpe.models.finetune import (
    EncoderFreezing,
    Finetune,
    encoder_parameter_groups,
    load_pretrained_encoder,
)
from graph_urpe.models.hparams import save_configuration
from graph_urpe.models.loss_checks import non_finite_loss_error
from graph_urpe.models.metrics import (
    METRICS,
    EpochPredictions,
    balanced_pos_weight,
    masked_loss,
    multiclass_loss,
)
from graph_urpe.models.objective import Objective, check_task_options, pos_weight_tensor
from graph_urpe.models.optim import PolynomialDecayLR, configure_optimizers
from graph_urpe.models.record import ModelRecord, as_group, nest_flat_arguments
from graph_urpe.models.sample_ids import NODE_ID_STRIDE, node_sample_ids, row_ids
from graph_urpe.models.scores import row_labels, split_scores
from graph_urpe.trust import TrustedLoadMixin

__all__ = ["NODE_ID_STRIDE", "GraphPropertyModule", "node_sample_ids"]


class GraphPropertyModule(EnsembleMixin, CalibrationMixin, TrustedLoadMixin, LightningModule):
    r"""Graph- or node-level regression / binary / multi-class classification with an injected
    network.

    The level is the network's ``level`` (default ``"graph"``): outputs and labels ``batch.y``
    ``[num_graphs, T]``, or per node ``[num_nodes, T]`` (:func:`node_sample_ids`). Tasks
    (``record.task``): ``"regression"`` / ``"classification"`` (binary, multi-task):
    ``num_outputs = T`` values / logits, NaN labels missing; ``"multiclass"``: one class label
    per row (an integer in ``[0, num_classes)``; NaN or negative = missing), ``num_outputs =
    num_classes`` logits, cross-entropy, metrics ``accuracy``, ``f1_macro``,
    ``baseline_accuracy``.

    Args:
        model (nn.Module): the network, ``batch -> [num_graphs or num_nodes, num_outputs]``
            (logits for classification), e.g. :class:`~graph_urpe.nn.Graphormer`; its
            ``num_tasks`` (or ``out_channels``) is ``num_outputs``.
        record (ModelRecord, optional): what the data taught the model (task, metric,
            evaluator, target names, featurization, node limit, SMILES column, source;
            :class:`~graph_urpe.models.record.ModelRecord`); linked from the data module by
            ``graph-urpe``; a dict of its fields is accepted. (default: a regression record)
        objective (Objective, optional): the loss, target standardisation, positive-class
            weights, Platt scaling, class count (:class:`~graph_urpe.models.objective.Objective`;
            or a dict). (default: the task's defaults)
        finetune (Finetune, optional): start from a pretrained encoder, its learning-rate factor
            and frozen fraction (:class:`~graph_urpe.models.finetune.Finetune`; or a dict).
            (default: from scratch)
        optimizer (OptimizerCallable, optional): ``params -> Optimizer`` over
            :func:`~graph_urpe.models.optim.parameter_groups` (no weight decay on biases, norms,
            embeddings and the ``B`` / ``C`` tables). (default: :class:`torch.optim.AdamW`)
        lr_scheduler (LRSchedulerCallable, optional): ``optimizer -> LRScheduler``, stepped every
            update. (default: :class:`~graph_urpe.models.optim.PolynomialDecayLR`)
        ensemble_size (int, optional): members of a deep ensemble
            (:mod:`~graph_urpe.models.ensemble`): ``model`` and ``ensemble_size - 1``
            re-initialised copies trained side by side, evaluated and predicted as one model.
            (default: :obj:`1`)
        compile (bool, optional): run the network through :func:`torch.compile`; accelerators
            only (:meth:`setup` refuses it on a CPU run, where it was slower than eager:
            ``benchmarks/README.md``, section 7). (default: :obj:`False`)

    Regression predictions come with a std and a 95 % interval calibrated on the validation
    split (:mod:`~graph_urpe.models.calibration`).

    Raises:
        ValueError: options that do not fit together or the network
            (:func:`~graph_urpe.models.objective.check_task_options`,
            :meth:`~graph_urpe.models.finetune.Finetune.check`,
            :meth:`~graph_urpe.models.record.ModelRecord.names`); (:meth:`setup`) ``compile``
            on a CPU run.
        ~graph_urpe.models.loss_checks.NonFiniteLossError: (training) a NaN or infinite loss.
    """

    def __init__(self, model: nn.Module, record: ModelRecord = ModelRecord(),  # noqa: B008
                 objective: Objective = Objective(), finetune: Finetune = Finetune(),  # noqa: B008
                 optimizer: OptimizerCallable = torch.optim.AdamW,
                 lr_scheduler: LRSchedulerCallable | None = PolynomialDecayLR,
                 ensemble_size: int = 1, compile: bool = False) -> None:
        super().__init__()
        # The network / optimizer / scheduler as configurations, never as objects.
        save_configuration(self, ("model", "optimizer", "lr_scheduler"))
        self.record, self.objective, self.finetune = (as_group(record, ModelRecord),
                                                      as_group(objective, Objective),
                                                      as_group(finetune, Finetune))
        task = self.record.task
        self.level, self.num_outputs = check_task_options(model, task, self.record.metric,
                                                          self.objective)
        self.model = model
        self.loss_name = self.objective.loss_name(task, self.record.metric)
        self.mve = self.loss_name == "mve"
        self._init_ensemble(ensemble_size)
        self.finetune.check(model)
        self.num_labels = label_columns(task, self.num_outputs // (1 + self.mve))
        self.target_names = self.record.names(self.num_labels)
        self.optimizer = optimizer
        self.lr_scheduler = lr_scheduler
        # Not registered: the compiled wrapper would add a second copy of the parameters.
        self.__dict__["_forwards"] = [torch.compile(m) if compile else m for m in self.members]
        # Regression: y_std = (y - mean) / std, from the training split at fit (identity before).
        self.register_buffer("target_mean", torch.zeros(self.num_labels))
        self.register_buffer("target_std", torch.ones(self.num_labels))
        if self.objective.pos_weight is not None:
            self.register_buffer("bce_pos_weight", pos_weight_tensor(
                self.objective.pos_weight, task, self.num_labels))
        self._init_calibration()
        # The atom / bond feature values of training (set at fit), for predict's warnings.
        self.training_vocabulary: dict[str, Any] | None = None
        # Collected rows: multiclass logits (label in every column), else values and variances.
        width = self.num_outputs if task == "multiclass" else 2 * self.num_labels
        self.epoch_predictions = nn.ModuleDict(
            {s: EpochPredictions(width) for s in ("val", "test")})

    upgrade_arguments = staticmethod(nest_flat_arguments)  # earlier versions' received arguments

    @property
    def metric_name(self) -> str:
        """The monitored metric (``record.metric``, else ``mae`` / ``rocauc`` / ``accuracy``)."""
        return self.record.metric_name

    @property
    def metric_mode(self) -> str:
        """``"max"`` or ``"min"``: how the monitored metric improves."""
        return "max" if METRICS[self.metric_name].higher_is_better else "min"

    def setup(self, stage: str) -> None:
        """Refuse ``compile=True`` on a CPU run; at ``fit``: load the ``finetune.pretrained``
        encoder (unless resuming) and, with a graph data module
        (:class:`~graph_urpe.data.facts.GraphData`), :meth:`use_training_statistics`."""
        if self.hparams.get("compile") and self.trainer.strategy.root_device.type == "cpu":
            raise ValueError("compile=True is not offered on CPU: torch.compile was slower than "
                             "eager there (benchmarks/README.md, section 7). Remove "
                             "--model.init_args.compile (or `compile: true`), or use a GPU.")
        pretrained = self.finetune.pretrained
        if stage == "fit" and pretrained and self.trainer.ckpt_path is None:
            for member in self.members:
                pre = load_pretrained_encoder(member, pretrained, self.record.featurization)
            rank_zero_info(f"Fine-tuning from the pretrained encoder {pre.source}")
        data = self.trainer.datamodule
        if stage == "fit" and isinstance(data, GraphData):
            self.use_training_statistics(data.training_statistics())

    def use_training_statistics(self, statistics: TrainingStatistics) -> None:
        """Take the training split's :class:`~graph_urpe.data.facts.TrainingStatistics` (done by
        :meth:`setup` with a graph data module; else call it before ``fit``): target mean and std
        (regression with ``standardize``), ``pos_weight="balanced"``'s ``n_negative /
        n_positive``, the feature vocabulary and ``record.dataset_source``.

        Raises:
            ValueError: statistics of another number of labels than the module's.
        """
        if len(statistics.target_mean) != self.num_labels:
            raise ValueError(
                f"training statistics of {len(statistics.target_mean)} label columns for a module "
                f"of {self.num_labels}: the data module and the model disagree on the labels.")
        self.training_vocabulary = statistics.vocabulary
        self.record = dataclasses.replace(self.record, dataset_source=statistics.source)
        self.hparams["record"] = dataclasses.asdict(self.record)
        if self.objective.pos_weight == "balanced":
            weights = balanced_pos_weight(statistics.target_mean)  # the mean of 0/1 labels
            self.bce_pos_weight.copy_(torch.tensor(weights))
        if self.record.task == "regression" and self.objective.standardize:
            self.target_mean.copy_(torch.as_tensor(statistics.target_mean, dtype=torch.float32))
            std = torch.as_tensor(statistics.target_std, dtype=torch.float32)
            self.target_std.copy_(std.clamp(min=1e-12))

    def scaled(self, target: Tensor) -> Tensor:
        """Labels ``[R, T]`` in training units (regression: standardised; else as they are)."""
        if self.record.task != "regression":
            return target
        return (target - self.target_mean) / self.target_std

    def loss(self, pred: Tensor, target: Tensor) -> Tensor:
        """Training-units loss of ``[R, num_outputs]`` outputs against ``[R, num_labels]`` labels
        (NaN labels masked)."""
        if self.loss_name == "cross_entropy":
            return multiclass_loss(pred, target)
        if self.mve:
            return masked_gaussian_nll(*pred.chunk(2, dim=-1), self.scaled(target))
        return masked_loss(pred, self.scaled(target), self.loss_name,
                           getattr(self, "bce_pos_weight", None))

    def training_step(self, batch, batch_idx: int) -> Tensor:
        outs = self.member_outputs(batch)  # each member trains on its own loss
        target = row_labels(batch, outs.shape[1], self.level, self.num_labels)
        loss = sum(self.loss(pred, target) for pred in outs)
        if not torch.isfinite(loss):
            raise non_finite_loss_error(self, loss, outs, target)
        self.log("train/loss", loss / len(outs), prog_bar=True, batch_size=outs.shape[1])
        return loss

    def _eval_step(self, batch, stage: str) -> None:
        pred = self._eval_rows(batch)
        target = row_labels(batch, pred.shape[0], self.level, self.num_labels)
        target = target.expand(-1, self.num_outputs) if self.record.task == "multiclass" \
            else target.repeat(1, 2)
        self.epoch_predictions[stage].update(row_ids(batch, self.level), pred, target)

    def validation_step(self, batch, batch_idx: int) -> None:
        self._eval_step(batch, "val")

    def test_step(self, batch, batch_idx: int) -> None:
        self._eval_step(batch, "test")

    def _eval_epoch_end(self, stage: str) -> None:
        collector = self.epoch_predictions[stage]
        ids, pred, target = collector.rows()
        collector.reset()
        if self.trainer.sanity_checking:
            return
        monitored = f"{stage}/{self.metric_name}"
        for key, value in split_scores(self, stage, ids, pred, target).items():
            self.log(key, value, prog_bar=key == monitored, sync_dist=False)

    def on_validation_epoch_end(self) -> None:
        self._eval_epoch_end("val")

    def on_test_epoch_end(self) -> None:
        self._eval_epoch_end("test")

    def predict_step(self, batch, batch_idx: int) -> dict[str, Tensor]:
        """``{"sample_id": [R], **predict_outputs(batch)}`` (node level: :func:`node_sample_ids`)."""
        return {"sample_id": row_ids(batch, self.level), **self.predict_outputs(batch)}

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Store :attr:`training_vocabulary` (plain lists) for ``predict``'s ``warning`` column."""
        if self.training_vocabulary is not None:
            checkpoint["training_vocabulary"] = self.training_vocabulary

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Restore :attr:`training_vocabulary` (older checkpoints: :obj:`None`)."""
        self.training_vocabulary = checkpoint.get("training_vocabulary")

    def configure_callbacks(self) -> Sequence[Callback] | Callback:
        """Fit: :class:`~graph_urpe.models.finetune.EncoderFreezing` (``finetune.freeze_encoder``);
        test: the data module's ``test_callbacks()`` (OGB's submission writer)."""
        trainer = self.trainer
        if trainer.state.fn == "fit":
            fraction = self.finetune.freeze_encoder
            return [EncoderFreezing(fraction)] if fraction > 0 else []
        if trainer.state.fn != "test":
            return []
        data = trainer.datamodule
        return data.test_callbacks() if isinstance(data, GraphData) else []

    def configure_optimizers(self) -> dict[str, Any]:
        """The optimizer over :func:`~graph_urpe.models.optim.parameter_groups` (the encoder's at
        ``finetune.encoder_lr_factor`` times the rate), the scheduler stepped every update."""
        factor = self.finetune.encoder_lr_factor
        groups = None if factor == 1.0 else [
            g for m in self.members for g in encoder_parameter_groups(m, factor)]
        return configure_optimizers(self, self.optimizer, self.lr_scheduler, groups)
