"""Lightning module for graph property prediction with (URPE-)Graphormer.

:class:`GraphPropertyModule` trains :class:`~graph_urpe.nn.Graphormer` for graph regression (ZINC,
PCQM4Mv2, your CSV) or multi-task binary classification (OGB ``ogbg-mol*``, your CSV), with missing
labels masked, AdamW with Graphormer's warm-up + polynomial-decay schedule, and epoch-level metrics
that are exact under DDP (:mod:`graph_urpe.tasks.graph_metrics`). Gradient clipping is a Trainer
option (``gradient_clip_val``).

Dataset-dependent settings (number of tasks, task type, feature vocabularies, metric, target names,
featurisation) default to :obj:`None` and are then read from the data module (a
:class:`~graph_urpe.tasks.graph_data.GraphDataModule`) at ``setup``; they are written into the
hyperparameters, so a checkpoint rebuilds the same model without the data.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from lightning.pytorch import LightningModule
from lightning.pytorch.callbacks import Callback
from torch import Tensor

from graph_urpe.nn.graphormer import Graphormer
from graph_urpe.tasks.graph_metrics import LOSSES, compute_metric, gather_unique, masked_loss
from graph_urpe.tasks.graph_optim import configure_adamw

__all__ = ["DATASET_KEYS", "GraphPropertyModule"]

DATASET_KEYS = (
    "num_tasks", "task", "atom_categories", "bond_categories", "metric", "evaluator",
    "target_names", "featurization",
)
"""Hyperparameters that :meth:`GraphPropertyModule.setup` fills from the data module's
:meth:`~graph_urpe.tasks.graph_data.GraphDataModule.dataset_info` when left as :obj:`None`."""

_TASKS = ("regression", "classification")


def _sample_ids(batch) -> Tensor:
    ids = batch.get("sample_id")
    if ids is None:
        raise ValueError(
            "batch has no `sample_id`: wrap the dataset in graph_urpe.tasks.graph_data.IndexedDataset "
            "(the GraphDataModules do), so epoch metrics can de-duplicate and order samples."
        )
    return ids.view(-1)


class GraphPropertyModule(LightningModule):
    r"""Graph-level regression / binary classification with Graphormer and URPE attention.

    Args:
        num_layers (int, optional): Graphormer layers. (default: :obj:`12`)
        embed_dim (int, optional): width. (default: :obj:`80`)
        num_heads (int, optional): attention heads. (default: :obj:`8`)
        ffn_dim (int, optional): feed-forward width. (default: :obj:`80`)
        attention (str, optional): ``"none"``, ``"rpe"`` or ``"urpe"``. (default: :obj:`"urpe"`)
        max_distance (int, optional): largest distinguished SPD. (default: :obj:`36`)
        max_degree (int, optional): largest distinguished degree. (default: :obj:`63`)
        max_hops (int, optional): edges per path in the edge encoding. (default: :obj:`20`)
        edge_encoding (str, optional): ``"multi_hop"`` or ``"none"``. (default: :obj:`"multi_hop"`)
        bias_per_layer (bool, optional): one spatial-bias table per layer. (default: :obj:`False`)
        multiplier_per_layer (bool, optional): one ``C`` table per layer. (default: :obj:`False`)
        directed_degree (bool, optional): in- and out-degree tables. (default: :obj:`False`)
        dropout (float, optional): residual dropout. (default: :obj:`0.1`)
        attention_dropout (float, optional): attention dropout. (default: :obj:`0.1`)
        activation_dropout (float, optional): FFN activation dropout. (default: :obj:`0.0`)
        input_dropout (float, optional): input embedding dropout. (default: :obj:`0.0`)
        num_tasks (int, optional): outputs per graph. (default: from the data)
        task (str, optional): ``"regression"`` or ``"classification"``. (default: from the data)
        atom_categories (list[int], optional): node feature vocabularies. (default: from the data)
        bond_categories (list[int], optional): edge feature vocabularies. (default: from the data)
        metric (str, optional): ``"mae"``, ``"rmse"``, ``"rocauc"`` or ``"ap"``.
            (default: from the data)
        evaluator (str, optional): OGB evaluator name (``"ogbg-molhiv"``, ``"pcqm4mv2"``) or
            :obj:`None`. (default: from the data)
        target_names (list[str], optional): names of the outputs. (default: from the data)
        featurization (str, optional): how SMILES become graphs (``"zinc"``/``"ogb"``), used by
            ``predict``. (default: from the data)
        loss (str, optional): ``"l1"``, ``"mse"`` or ``"bce"``; :obj:`None` picks ``"bce"`` for
            classification, ``"mse"`` for RMSE-scored and ``"l1"`` for other regression.
            (default: :obj:`None`)
        lr (float, optional): peak learning rate. (default: :obj:`2e-4`)
        end_lr (float, optional): final learning rate. (default: :obj:`1e-9`)
        weight_decay (float, optional): AdamW weight decay. (default: :obj:`0.01`)
        betas (tuple[float, float], optional): AdamW betas. (default: ``(0.9, 0.999)``)
        eps (float, optional): AdamW epsilon. (default: :obj:`1e-8`)
        warmup_steps (int, optional): warm-up updates. (default: :obj:`1000`)
        total_steps (int, optional): updates until ``end_lr``; :obj:`None` uses the Trainer's
            estimate of the whole run. (default: :obj:`None`)
        power (float, optional): decay exponent (1 = linear). (default: :obj:`1.0`)
        compile (bool, optional): run the model through :func:`torch.compile`.
            (default: :obj:`False`)

    Raises:
        ValueError: for unknown ``task`` / ``loss`` values, or a classification task with a
            regression loss (and vice versa).
    """

    def __init__(
        self,
        num_layers: int = 12,
        embed_dim: int = 80,
        num_heads: int = 8,
        ffn_dim: int = 80,
        attention: str = "urpe",
        max_distance: int = 36,
        max_degree: int = 63,
        max_hops: int = 20,
        edge_encoding: str = "multi_hop",
        bias_per_layer: bool = False,
        multiplier_per_layer: bool = False,
        directed_degree: bool = False,
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        activation_dropout: float = 0.0,
        input_dropout: float = 0.0,
        num_tasks: int | None = None,
        task: str | None = None,
        atom_categories: int | list[int] | None = None,
        bond_categories: int | list[int] | None = None,
        metric: str | None = None,
        evaluator: str | None = None,
        target_names: list[str] | None = None,
        featurization: str | None = None,
        loss: str | None = None,
        lr: float = 2e-4,
        end_lr: float = 1e-9,
        weight_decay: float = 0.01,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        warmup_steps: int = 1000,
        total_steps: int | None = None,
        power: float = 1.0,
        compile: bool = False,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        if task is not None and task not in _TASKS:
            raise ValueError(f"task must be one of {_TASKS}, got {task!r}.")
        if loss is not None and loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}.")
        self.model: Graphormer | None = None
        self.__dict__["_forward"] = None
        self._outputs: dict[str, list[tuple[Tensor, Tensor, Tensor]]] = {}
        if self._dataset_known():
            self._build()

    # ----------------------------------------------------------------------------- model
    def _dataset_known(self) -> bool:
        hp = self.hparams
        return all(hp.get(k) is not None for k in ("num_tasks", "task", "atom_categories")) and (
            hp.edge_encoding == "none" or hp.get("bond_categories") is not None
        )

    def _build(self) -> None:
        hp = self.hparams
        if hp.task not in _TASKS:
            raise ValueError(f"task must be one of {_TASKS}, got {hp.task!r}.")
        loss = self.loss_name
        if (hp.task == "classification") != (loss == "bce"):
            raise ValueError(
                f"loss {loss!r} does not fit a {hp.task} task: use 'bce' for classification and "
                f"'l1' or 'mse' for regression."
            )
        arch = {
            k: hp[k]
            for k in (
                "num_layers", "embed_dim", "num_heads", "ffn_dim", "attention", "max_distance",
                "max_degree", "max_hops", "edge_encoding", "bias_per_layer",
                "multiplier_per_layer", "directed_degree", "dropout", "attention_dropout",
                "activation_dropout", "input_dropout",
            )
        }
        self.model = Graphormer(hp.num_tasks, hp.atom_categories, hp.bond_categories, **arch)
        # Kept out of the module registry: the compiled wrapper shares the model's parameters and
        # must not add a second copy of them to the state dict.
        self.__dict__["_forward"] = torch.compile(self.model) if hp.compile else self.model

    @property
    def loss_name(self) -> str:
        """The loss in use: the ``loss`` argument, else ``bce`` for classification, ``mse`` for
        regression scored by RMSE, ``l1`` for other regression."""
        if self.hparams.loss is not None:
            return self.hparams.loss
        if self.hparams.task == "classification":
            return "bce"
        return "mse" if self.hparams.get("metric") == "rmse" else "l1"

    @property
    def metric_name(self) -> str:
        """The validation/test metric: the ``metric`` argument, else ``mae`` / ``rocauc``."""
        if self.hparams.get("metric") is not None:
            return self.hparams.metric
        return "rocauc" if self.hparams.task == "classification" else "mae"

    def setup(self, stage: str) -> None:
        """Fill dataset-dependent hyperparameters from the data module and build the model."""
        if self.model is not None:
            if stage != "predict":  # prediction featurises SMILES as the model was trained
                self._check_data_matches()
            return
        info = self._datamodule_info()
        if info is None:
            missing = [k for k in ("num_tasks", "task", "atom_categories") if self.hparams.get(k) is None]
            raise ValueError(
                f"GraphPropertyModule needs {missing}: pass them, or use a GraphDataModule that "
                f"provides dataset_info()."
            )
        for key in DATASET_KEYS:
            if self.hparams.get(key) is None and info.get(key) is not None:
                self.hparams[key] = info[key]
        self._build()

    def _datamodule_info(self) -> dict[str, Any] | None:
        dm = getattr(self._trainer, "datamodule", None) if self._trainer is not None else None
        fn = getattr(dm, "dataset_info", None)
        return fn() if callable(fn) else None

    def _check_data_matches(self) -> None:
        info = self._datamodule_info()
        if not info:
            return
        for key in ("num_tasks", "task", "featurization"):
            mine, theirs = self.hparams.get(key), info.get(key)
            if mine is not None and theirs is not None and mine != theirs:
                raise ValueError(
                    f"The model was built for {key}={mine!r} but the data module provides "
                    f"{key}={theirs!r}: use the data configuration the checkpoint was trained "
                    f"with (or a matching dataset)."
                )

    def forward(self, batch) -> Tensor:
        """Raw model outputs ``[num_graphs, num_tasks]`` (logits for classification)."""
        if self._forward is None:
            raise RuntimeError(
                "The model is not built yet: call trainer.fit/validate/test/predict with a "
                "GraphDataModule, or pass num_tasks, task and atom_categories."
            )
        return self._forward(batch)

    # ---------------------------------------------------------------------------- steps
    def _target(self, batch) -> Tensor:
        y = batch.y
        return y.view(-1, self.hparams.num_tasks).to(torch.float32)

    def training_step(self, batch, batch_idx: int) -> Tensor:
        pred = self(batch)
        loss = masked_loss(pred, self._target(batch), self.loss_name)
        self.log("train/loss", loss, prog_bar=True, batch_size=pred.shape[0], sync_dist=False)
        return loss

    def on_train_epoch_start(self) -> None:
        # Lightning calls set_epoch on a loader's sampler, not on its batch_sampler.
        loader = self.trainer.train_dataloader
        batch_sampler = getattr(loader, "batch_sampler", None)
        if callable(getattr(batch_sampler, "set_epoch", None)):
            batch_sampler.set_epoch(self.current_epoch)

    def _eval_step(self, batch, stage: str) -> None:
        pred = self(batch)
        target = self._target(batch)
        loss = masked_loss(pred, target, self.loss_name)
        self.log(f"{stage}/loss", loss, batch_size=pred.shape[0], sync_dist=True)
        self._outputs.setdefault(stage, []).append((_sample_ids(batch), pred.detach().float(), target))

    def validation_step(self, batch, batch_idx: int) -> None:
        self._eval_step(batch, "val")

    def test_step(self, batch, batch_idx: int) -> None:
        self._eval_step(batch, "test")

    def _eval_epoch_end(self, stage: str) -> None:
        outputs = self._outputs.pop(stage, [])
        if self.trainer.sanity_checking:
            return
        if outputs:
            ids, pred, target = (torch.cat(x) for x in zip(*outputs))
        else:
            n = self.hparams.num_tasks
            ids, pred, target = torch.zeros(0, dtype=torch.long), torch.zeros(0, n), torch.zeros(0, n)
        ids, pred, target = gather_unique(ids, pred, target)
        value = compute_metric(pred, target, self.metric_name, self.hparams.get("evaluator"))
        # Every rank holds the same gathered value: no further reduction needed.
        self.log(f"{stage}/{self.metric_name}", value, prog_bar=True, sync_dist=False)
        self.log(f"{stage}/num_graphs", float(ids.numel()), sync_dist=False)

    def on_validation_epoch_end(self) -> None:
        self._eval_epoch_end("val")

    def on_test_epoch_end(self) -> None:
        self._eval_epoch_end("test")

    def predict_step(self, batch, batch_idx: int) -> dict[str, Tensor]:
        """``{"sample_id": [G], "prediction": [G, T]}``; probabilities for classification."""
        out = self(batch).float()
        if self.hparams.task == "classification":
            out = torch.sigmoid(out)
        return {"sample_id": _sample_ids(batch), "prediction": out}

    def configure_callbacks(self) -> Sequence[Callback] | Callback:
        """When predicting with a data module that names an output CSV, add its writer."""
        trainer = self._trainer
        if trainer is None or trainer.state.fn != "predict":
            return []
        dm = getattr(trainer, "datamodule", None)
        make = getattr(dm, "prediction_writer", None)
        writer = make() if callable(make) else None
        return [writer] if writer is not None else []

    # ------------------------------------------------------------------------ optimizers
    def configure_optimizers(self) -> dict[str, Any]:
        """AdamW with :class:`~graph_urpe.tasks.graph_optim.PolynomialDecayLR`, stepped every
        update. Weight decay applies to the weight matrices of linear layers and the hop weights
        only: not to biases, norms, embeddings, or the ``B`` / ``C`` relation tables (decay would
        pull ``C`` from its initial ones towards 0)."""
        hop = self.model.hop_weight if self.model is not None else None
        return configure_adamw(self, [] if hop is None else [hop])
