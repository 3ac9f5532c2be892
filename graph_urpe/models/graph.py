"""Lightning module for graph- and node-level prediction with an injected network (URPE-Graphormer).

:class:`GraphPropertyModule` trains any network that maps a PyG batch to ``[num_graphs,
num_outputs]`` (graph level) or ``[num_nodes, num_outputs]`` (node level, a network whose
``level`` attribute is ``"node"``, e.g. ``Graphormer(level="node")``), by default
:class:`~graph_urpe.nn.Graphormer`, for regression (ZINC, PCQM4Mv2, your CSV), multi-task binary
classification (OGB ``ogbg-mol*``, your CSV) or single-label multi-class classification (the
synthetic structural tasks of :mod:`graph_urpe.data.synthetic_graphs`): missing labels masked,
regression targets standardised with the training split's statistics (kept in the checkpoint;
loss in standardised units, metrics and predictions in the labels' units), epoch metrics exact
under DDP (:mod:`graph_urpe.models.metrics`; node-level rows are identified by
:func:`node_sample_ids`), an injected optimizer and scheduler (:mod:`graph_urpe.models.optim`).
Gradient clipping is a Trainer option.

The network, optimizer and scheduler are written once, in their own classes: in YAML ::

    model:
      class_path: graph_urpe.models.GraphPropertyModule
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
from typing import Any, Literal

import torch
from lightning.pytorch import Callback, LightningModule
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from lightning.pytorch.utilities import rank_zero_info
from torch import Tensor, nn

from graph_urpe.data.facts import (
    GraphData,
    TrainingStatistics,
    default_metric,
    default_target_names,
    label_columns,
)
from graph_urpe.models import finetune
from graph_urpe.models.calibration import CalibrationMixin, masked_gaussian_nll
from graph_urpe.models.ensemble import EnsembleMixin
from graph_urpe.models.hparams import save_configuration
from graph_urpe.models.loss_checks import non_finite_loss_error
from graph_urpe.models.metrics import (
    METRICS,
    EpochPredictions,
    balanced_pos_weight,
    epoch_metrics,
    masked_loss,
    multiclass_loss,
    multiclass_metrics,
)
from graph_urpe.models.optim import (
    PolynomialDecayLR,
    configure_optimizers,
)
from graph_urpe.models.sample_ids import NODE_ID_STRIDE, node_sample_ids, sample_ids
from graph_urpe.models.task_options import (
    LossName,
    MetricName,
    Task,
    check_task_options,
    pos_weight_tensor,
)
from graph_urpe.trust import TrustedLoadMixin

__all__ = [
    "NODE_ID_STRIDE",
    "GraphPropertyModule",
    "node_sample_ids",
]

#: Task types of :class:`GraphPropertyModule`; losses and monitored metrics it accepts.

class GraphPropertyModule(EnsembleMixin, CalibrationMixin, TrustedLoadMixin, LightningModule):
    r"""Graph- or node-level regression / binary / multi-class classification with an injected
    network.

    The level is the network's ``level`` attribute (``"graph"`` when it has none). Graph level:
    outputs ``[num_graphs, num_outputs]``, labels ``batch.y`` ``[num_graphs, T]`` (or ``[G]``);
    node level: outputs ``[num_nodes, num_outputs]``, labels per node ``[num_nodes, T]`` (or
    ``[num_nodes]``), epoch metrics over all nodes of the split, each node counted once under DDP
    (rows identified by :func:`node_sample_ids`). Tasks:

    * ``"regression"`` / ``"classification"`` (binary, multi-task): ``num_outputs = T`` values /
      logits; NaN labels are missing;
    * ``"multiclass"``: one class label per graph / node (``T = 1``, an integer in
      ``[0, num_classes)``; NaN or negative = missing), ``num_outputs = num_classes`` logits;
      cross-entropy; metrics ``accuracy``, ``f1_macro`` and ``baseline_accuracy``
      (:func:`multiclass_metrics`).

    Args:
        model (nn.Module): the network, ``batch -> [num_graphs or num_nodes, num_outputs]``
            (logits for classification), e.g. :class:`~graph_urpe.nn.Graphormer`; its
            ``num_tasks`` (or ``out_channels``) is ``num_outputs``.
        task (str, optional): ``"regression"``, ``"classification"`` or ``"multiclass"``.
            (default: ``"regression"``; linked from the data module)
        metric (str, optional): the monitored metric, ``"mae"``, ``"rmse"``, ``"r2"``,
            ``"rocauc"``, ``"ap"``, ``"accuracy"`` or ``"f1_macro"``. (default: :obj:`None`:
            ``mae`` / ``rocauc`` / ``accuracy``)
        evaluator (str, optional): official evaluator (``"ogbg-..."``, ``"pcqm4mv2"``).
            (default: :obj:`None`)
        target_names (list[str], optional): names of the outputs. (default: ``y0, y1, ...``)
        featurization (str, optional): how SMILES become graphs (``"zinc"``/``"ogb"``), used by
            ``predict``. (default: :obj:`None`)
        max_graph_nodes (int, optional): the node-count limit of training, enforced by
            ``predict``. (default: :obj:`None`)
        dataset_source (str, optional): where the training data came from, recorded in the
            checkpoint; set at ``fit`` from the data (:meth:`use_training_statistics`).
            (default: :obj:`None`)
        smiles_column (str, optional): the SMILES column of the training file, the column
            ``predict``, ``fingerprint`` and ``explain`` read by default (linked from the data).
            (default: :obj:`None`: ``smiles``)
        loss (str, optional): ``"l1"``, ``"mse"``, ``"mve"`` (regression with a mean-variance
            head: Gaussian negative log-likelihood; the network has ``outputs_per_task=2``, which
            ``graph-urpe fit`` sets), ``"bce"`` or ``"cross_entropy"``; :obj:`None` picks
            ``"bce"`` for classification, ``"cross_entropy"`` for multi-class, ``"mse"`` for
            RMSE-scored and ``"l1"`` for other regression. (default: :obj:`None`)
        num_classes (int, optional): classes of a ``"multiclass"`` task; must equal the
            network's ``num_outputs``. (default: :obj:`None`: ``num_outputs``)
        standardize (bool, optional): train regression on targets standardised per task with
            the training split's NaN-aware mean and std. (default: :obj:`True`)
        optimizer (OptimizerCallable, optional): ``params -> Optimizer``; parameters are split by
            :func:`~graph_urpe.models.optim.parameter_groups` (no weight decay on biases, norms,
            embeddings and the ``B`` / ``C`` tables). (default: :class:`torch.optim.AdamW`)
        lr_scheduler (LRSchedulerCallable, optional): ``optimizer -> LRScheduler``, stepped every
            update. (default: :class:`~graph_urpe.models.optim.PolynomialDecayLR`)
        compile (bool, optional): run the network through :func:`torch.compile`. Offered on
            accelerators only: on a CPU run :meth:`setup` refuses it, since it made the training
            step slower than eager there (``benchmarks/README.md``, section 7).
            (default: :obj:`False`)
        pretrained (str, optional): start the network's encoder from this graph-urpe checkpoint
            or shipped encoder name (:mod:`graph_urpe.pretrained`), loaded at ``fit`` (not when
            resuming) by :func:`~graph_urpe.models.finetune.load_pretrained_encoder`; the head stays
            new. (default: :obj:`None`: from scratch)
        encoder_lr_factor (float, optional): the encoder's learning rate as a fraction of the
            optimizer's (the head's), in ``(0, 1]``. (default: :obj:`1.0`)
        freeze_encoder (float, optional): fraction of the run's updates, in ``[0, 1)``, during
            which the encoder is frozen (only the head trains). (default: :obj:`0.0`)
        pos_weight (list[float] or str, optional): positive-class weight per task in the BCE
            loss (classification; :func:`~graph_urpe.models.metrics.masked_loss`), for imbalanced
            classes: ``"balanced"`` takes ``n_negative / n_positive`` of each task's training
            labels at ``fit`` (:func:`~graph_urpe.models.metrics.balanced_pos_weight`), or one
            positive number per task. The weights are kept in the checkpoint and printed in the
            summary; weighted training shifts the predicted probabilities towards the positive
            class (ROC-AUC and AP only rank them). (default: :obj:`None`: unweighted)
        ensemble_size (int, optional): members of a deep ensemble
            (:mod:`~graph_urpe.models.ensemble`): ``model`` and ``ensemble_size - 1`` copies re-initialised with seeds
            drawn from torch's generator, trained side by side (each on its own loss; gradients
            clipped per member), evaluated and predicted as one model (members' mean; regression
            also their spread). ``graph-urpe fit --ensemble_size N`` sets it. (default: :obj:`1`)
        platt_scaling (bool, optional): calibrate classification probabilities on the validation
            split by Platt scaling (:func:`~graph_urpe.models.calibration.fit_platt`; buffers
            ``platt_scale``, ``platt_bias``), used by the test and ``predict``. (default: :obj:`False`)

    Regression predictions come with a standard deviation and a 95 % interval, calibrated on the
    validation split at every validation (:mod:`~graph_urpe.models.calibration`; the factors are
    the buffers ``uncertainty_scale`` and ``interval_factor``, kept in checkpoints).

    Raises:
        ValueError: for unknown ``task`` / ``loss`` / ``metric`` values, a loss or metric that
            does not fit the task, a network ``level`` other than ``"graph"`` / ``"node"``, or a
            ``num_classes`` that is not the network's output count (or is given for another task),
            fine-tuning options out of range or given for a network without ``encoder``;
            ``pos_weight`` for a task other than classification, of the wrong length, or not
            positive and finite; ``target_names`` of another length than the targets;
            (in :meth:`setup`) for ``compile=True`` on a CPU run.
        ~graph_urpe.models.loss_checks.NonFiniteLossError: (during training) when a loss is
            NaN or infinite.
    """

    def __init__(
        self,
        model: nn.Module,
        task: Task = "regression",
        metric: MetricName | None = None,
        evaluator: str | None = None,
        target_names: list[str] | None = None,
        featurization: str | None = None,
        max_graph_nodes: int | None = None,
        dataset_source: str | None = None,
        smiles_column: str | None = None,
        loss: LossName | None = None,
        num_classes: int | None = None,
        standardize: bool = True,
        optimizer: OptimizerCallable = torch.optim.AdamW,
        lr_scheduler: LRSchedulerCallable | None = PolynomialDecayLR,
        compile: bool = False,
        pretrained: str | None = None,
        encoder_lr_factor: float = 1.0,
        freeze_encoder: float = 0.0,
        pos_weight: list[float] | Literal["balanced"] | None = None,
        ensemble_size: int = 1,
        platt_scaling: bool = False,
    ) -> None:
        super().__init__()
        # The network / optimizer / scheduler as configurations, never as objects.
        save_configuration(self, ("model", "optimizer", "lr_scheduler"))
        self.level, self.num_outputs = check_task_options(model, task, loss, self.loss_name,
                                                          metric, num_classes)
        self.model = model
        self.mve = self.loss_name == "mve"
        self._init_ensemble(ensemble_size)
        self.num_classes = self.num_outputs if task == "multiclass" else None
        finetune.check_finetune_options(model, pretrained, encoder_lr_factor, freeze_encoder)
        # Label columns (the network's num_tasks are its outputs): one class label
        # (multiclass), else one per output.
        self.num_labels = label_columns(task, self.num_outputs // (1 + self.mve))
        if target_names and len(target_names) != self.num_labels:  # empty: y0, y1, ...
            shown = ", ".join(map(str, target_names[:4])) + (", ..." if len(target_names) > 4
                                                             else "")
            raise ValueError(
                f"target_names lists {len(target_names)} name(s) ({shown}) for "
                f"{self.num_labels} target(s) (the network's num_tasks): give one name per "
                "target column.")
        self.optimizer = optimizer
        self.lr_scheduler = lr_scheduler
        # Kept out of the module registry: the compiled wrapper shares the model's parameters and
        # must not add a second copy of them to the state dict.
        self.__dict__["_forwards"] = [torch.compile(m) if compile else m for m in self.members]
        # Target standardisation (regression): y_std = (y - mean) / std, set from the training
        # split at fit time; identity until then. Buffers, so checkpoints carry them.
        self.register_buffer("target_mean", torch.zeros(self.num_labels))
        self.register_buffer("target_std", torch.ones(self.num_labels))
        if pos_weight is not None:
            # A buffer only when asked for, so checkpoints written without one still load.
            self.register_buffer("bce_pos_weight", pos_weight_tensor(pos_weight, task,
                                                                     self.num_labels))
        self._init_calibration()
        # The atom / bond feature values seen in training (plain lists; set at fit, kept in the
        # checkpoint): predict flags inputs outside them.
        self.training_vocabulary: dict[str, Any] | None = None
        # Rows of (id, outputs, labels); multiclass rows hold the label in every column (the
        # collector keeps predictions and labels of one width).
        # (Regression and classification: values, then variances, with the labels twice.)
        width = self.num_outputs if task == "multiclass" else 2 * self.num_labels
        self.epoch_predictions = nn.ModuleDict(
            {s: EpochPredictions(width) for s in ("val", "test")}
        )

    # --------------------------------------------------------------------------- facts
    @property
    def loss_name(self) -> str:
        """The loss in use (``loss``, else ``bce`` (classification), ``cross_entropy``
        (multiclass), ``mse`` (RMSE-scored regression) or ``l1``)."""
        hp = self.hparams
        if hp.get("loss") is not None:
            return hp.loss
        if hp.get("task") == "classification":
            return "bce"
        if hp.get("task") == "multiclass":
            return "cross_entropy"
        return "mse" if hp.get("metric") == "rmse" else "l1"

    @property
    def metric_name(self) -> str:
        """The monitored metric (``metric``, else ``mae`` / ``rocauc`` / ``accuracy``)."""
        if self.hparams.get("metric") is not None:
            return self.hparams.metric
        return default_metric(self.hparams.get("task"))

    @property
    def metric_mode(self) -> str:
        """``"max"`` or ``"min"``: how the monitored metric improves."""
        return "max" if METRICS[self.metric_name].higher_is_better else "min"

    @property
    def target_names(self) -> list[str]:
        """Names of the outputs (``target_names`` or ``y0, y1, ...``)."""
        names = self.hparams.target_names
        if names:
            return list(names)
        return list(default_target_names(self.num_labels))

    # ----------------------------------------------------------------------- setup
    def setup(self, stage: str) -> None:
        """Refuse ``compile=True`` on a CPU run (see the class docstring); at ``fit``: load the
        ``pretrained`` encoder (unless resuming) and, with a graph data module
        (:class:`~graph_urpe.data.facts.GraphData`), :meth:`use_training_statistics` of its
        ``training_statistics()``."""
        if self.hparams.get("compile") and self.trainer.strategy.root_device.type == "cpu":
            raise ValueError(
                "compile=True is not offered on CPU: torch.compile was slower than eager there, "
                "and its compilation alone costs more than a short run (benchmarks/README.md, "
                "section 7). Remove "
                "--model.init_args.compile (or `compile: true` from the config), or train on a GPU."
            )
        pretrained = self.hparams.get("pretrained")
        if stage == "fit" and pretrained and self.trainer.ckpt_path is None:
            for member in self.members:
                pre = finetune.load_pretrained_encoder(member, pretrained,
                                                       self.hparams.get("featurization"))
            rank_zero_info(f"Fine-tuning from the pretrained encoder {pre.source}")
        data = self.trainer.datamodule
        if stage == "fit" and isinstance(data, GraphData):
            self.use_training_statistics(data.training_statistics())

    def use_training_statistics(self, statistics: TrainingStatistics) -> None:
        """Take what is known of the training split once it is loaded
        (:class:`~graph_urpe.data.facts.TrainingStatistics`; :meth:`setup` does it when fitting
        with a graph data module; call it yourself before ``fit`` otherwise): the target mean and
        std (regression with ``standardize``), the positive-class weights
        (``pos_weight="balanced"``: ``n_negative / n_positive`` from the label means), the feature
        vocabulary and the data's source (``dataset_source``, kept in the checkpoint).

        Raises:
            ValueError: statistics of another number of labels than the module's.
        """
        if len(statistics.target_mean) != self.num_labels:
            raise ValueError(
                f"training statistics of {len(statistics.target_mean)} label columns for a module "
                f"of {self.num_labels}: the data module and the model disagree on the labels.")
        self.training_vocabulary = statistics.vocabulary
        self.hparams["dataset_source"] = statistics.source
        if self.hparams.get("pos_weight") == "balanced":
            weights = balanced_pos_weight(statistics.target_mean)  # the mean of 0/1 labels
            self.bce_pos_weight.copy_(torch.tensor(weights))
        if self.hparams.task == "regression" and self.hparams.standardize:
            self.target_mean.copy_(torch.as_tensor(statistics.target_mean, dtype=torch.float32))
            std = torch.as_tensor(statistics.target_std, dtype=torch.float32)
            self.target_std.copy_(std.clamp(min=1e-12))

    # --------------------------------------------------------------------- forward
    def predict_values(self, batch) -> Tensor:
        """Predictions ``[R, num_labels]`` in the labels' units (regression), probabilities
        (classification) or class probabilities (multiclass, softmax)."""
        out = self(batch).float()
        if self.hparams.task == "classification":
            return torch.sigmoid(self.platt_logits(out))
        if self.hparams.task == "multiclass":
            return torch.softmax(out, dim=-1)
        return out[:, :self.num_labels] * self.target_std + self.target_mean

    # ------------------------------------------------------------------------ steps
    def _row_ids(self, batch) -> Tensor:
        """Ids of the output rows: ``sample_id`` per graph, :func:`node_sample_ids` per node."""
        return node_sample_ids(batch) if self.level == "node" else sample_ids(batch)

    def _target(self, batch, rows: int) -> Tensor:
        """``batch.y`` as ``[rows, num_labels]`` float32."""
        y = batch.y
        if y.shape[0] != rows:
            per = "node" if self.level == "node" else "graph"
            raise ValueError(
                f"the network predicts {rows} rows (level={self.level!r}: one per {per}) but "
                f"batch.y has {y.shape[0]}: a {per}-level network needs labels per {per} "
                f"(y [num_{per}s] or [num_{per}s, T]); set the network's level to fit the data."
            )
        return y.reshape(rows, self.num_labels).to(torch.float32)

    def _scaled(self, target: Tensor) -> Tensor:
        if self.hparams.task != "regression":
            return target
        return (target - self.target_mean) / self.target_std

    def _loss(self, pred: Tensor, target: Tensor) -> Tensor:
        """Training-units loss of ``[R, num_outputs]`` outputs against ``[R, num_labels]`` labels."""
        if self.loss_name == "cross_entropy":
            return multiclass_loss(pred, target)
        if self.mve:
            return masked_gaussian_nll(*pred.chunk(2, dim=-1), self._scaled(target))
        return masked_loss(pred, self._scaled(target), self.loss_name,
                           getattr(self, "bce_pos_weight", None))

    def pos_weight_summary(self) -> str | None:
        """The summary's line on the BCE loss's positive-class weights (``pos_weight``), or
        :obj:`None` when the loss is unweighted."""
        weight = getattr(self, "bce_pos_weight", None)
        if weight is None:
            return None
        source = ("balanced: n_negative / n_positive of the training labels"
                  if self.hparams.get("pos_weight") == "balanced" else "given")
        values = ", ".join(f"{name} {w:.3g}" for name, w in zip(self.target_names,
                                                                weight.tolist()))
        return f"Positive-class weights in the BCE loss ({source}): {values}"

    def training_step(self, batch, batch_idx: int) -> Tensor:
        outs = self.member_outputs(batch)  # each member trains on its own loss
        target = self._target(batch, outs.shape[1])
        loss = sum(self._loss(pred, target) for pred in outs)
        pred = outs[0]
        if not torch.isfinite(loss):
            raise non_finite_loss_error(self, loss, outs, target)
        self.log("train/loss", loss / len(outs), prog_bar=True, batch_size=pred.shape[0])
        return loss

    def _eval_step(self, batch, stage: str) -> None:
        pred = self._eval_rows(batch)
        target = self._target(batch, pred.shape[0])
        target = target.expand(-1, self.num_outputs) if self.hparams.task == "multiclass" \
            else target.repeat(1, 2)
        self.epoch_predictions[stage].update(self._row_ids(batch), pred, target)

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
        task = self.hparams.task
        variance = None
        if task == "multiclass":
            target = target[:, :1]
        else:  # (values, variances) with the labels twice: see _eval_rows
            pred, variance, target = pred[:, :self.num_labels], pred[:, self.num_labels:], \
                target[:, :self.num_labels]
        if stage == "test" and task == "classification":  # calibrated (platt_scaling)
            pred = self.platt_logits(pred)
        raw = pred
        if task == "regression":
            raw = (pred - self.target_mean) / self.target_std
            if self.mve:
                raw = torch.cat([raw, variance / self.target_std.square()], dim=-1)
        # Loss over the de-duplicated rows (exact under DDP), in training units.
        loss = self._loss(raw, target)
        if task == "multiclass":
            values = multiclass_metrics(pred, target)
        else:
            values = epoch_metrics(pred, target, task, self.hparams.evaluator)
        values = {f"{stage}/{k}": v for k, v in values.items()}
        values[f"{stage}/loss"] = float(loss)
        graph_ids = ids
        if self.level == "node":
            values[f"{stage}/num_nodes"] = float(ids.numel())
            graph_ids = torch.unique(torch.div(ids, NODE_ID_STRIDE, rounding_mode="floor"))
        values[f"{stage}/num_graphs"] = float(graph_ids.numel())
        if variance is not None:
            values.update(self._uncertainty_epoch(stage, pred, variance, target))
        monitored = f"{stage}/{self.metric_name}"
        for key, value in values.items():
            # Every rank holds the same gathered values: no further reduction needed.
            self.log(key, value, prog_bar=key == monitored, sync_dist=False)
        if stage == "test":
            # What the run's test_predictions.csv is written from (graph_urpe.cli.run): one
            # row per graph (node level: per node, ids from node_sample_ids); outputs as
            # collected (labels' units, or logits).
            self.test_outputs = (ids, pred, target)

    def on_validation_epoch_end(self) -> None:
        self._eval_epoch_end("val")

    def on_test_epoch_end(self) -> None:
        self._eval_epoch_end("test")

    def predict_step(self, batch, batch_idx: int) -> dict[str, Tensor]:
        """``{"sample_id": [R], **predict_outputs(batch)}``: node level one row per node, ids
        from :func:`node_sample_ids`."""
        return {"sample_id": self._row_ids(batch), **self.predict_outputs(batch)}

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Store :attr:`training_vocabulary` (plain lists) for ``predict``'s ``warning`` column."""
        if self.training_vocabulary is not None:
            checkpoint["training_vocabulary"] = self.training_vocabulary

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Restore :attr:`training_vocabulary` (absent in older checkpoints: :obj:`None`); a
        checkpoint written before calibration existed loads as uncalibrated."""
        self.training_vocabulary = checkpoint.get("training_vocabulary")
        self._default_calibration(checkpoint)

    def configure_callbacks(self) -> Sequence[Callback] | Callback:
        """When fitting with ``freeze_encoder``, :class:`~graph_urpe.models.finetune.EncoderFreezing`;
        when testing, the data module's ``test_callbacks()`` (OGB's submission writer for
        PCQM4Mv2's hidden test splits)."""
        trainer = self.trainer
        if trainer.state.fn == "fit":
            fraction = self.hparams.get("freeze_encoder") or 0.0
            return [finetune.EncoderFreezing(fraction)] if fraction > 0 else []
        if trainer.state.fn != "test":
            return []
        data = trainer.datamodule
        return data.test_callbacks() if isinstance(data, GraphData) else []

    def configure_optimizers(self) -> dict[str, Any]:
        """The injected optimizer over :func:`~graph_urpe.models.optim.parameter_groups` (the
        encoder's at ``encoder_lr_factor`` times the rate), and the scheduler stepped every
        update, sized from the run."""
        factor = self.hparams.get("encoder_lr_factor", 1.0)
        groups = None if factor == 1.0 else [
            g for m in self.members for g in finetune.encoder_parameter_groups(m, factor)]
        return configure_optimizers(self, self.optimizer, self.lr_scheduler, groups)
