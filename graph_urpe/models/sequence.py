"""Lightning modules of the sequence experiments of the URPE paper.

Luo et al., "Your Transformer May Not be as Powerful as You Expect", NeurIPS 2022
(arXiv 2205.13401):

* :class:`SyntheticTaskModule`: Position Identification and Even Token Prediction (Sec. 5.1)
  with a bidirectional :class:`~graph_urpe.nn.SequenceTransformer` and a linear classifier;
  metric: token accuracy (``val/accuracy``, ``test/accuracy``).
* :class:`LanguageModelModule`: word-level causal language modelling (Sec. 5.3) with
  :class:`~graph_urpe.nn.TransformerLM`; metric: perplexity (``val/ppl``, ``test/ppl``), ``exp``
  of the mean per-token negative log-likelihood over the whole split (every token counted once,
  ``<eos>`` included).

The data modules are in :mod:`graph_urpe.data.modules.sequence`. The network, the optimizer and the
learning-rate schedule are injected (Lightning's dependency-injection pattern): in YAML ::

    model:
      class_path: graph_urpe.models.sequence.SyntheticTaskModule
      init_args:
        model:
          class_path: graph_urpe.nn.SequenceTransformer
          init_args: {embed_dim: 64, num_layers: 3, attention: urpe}
        optimizer:
          class_path: torch.optim.AdamW
          init_args: {lr: 3.0e-3, weight_decay: 0.0}

with the data-dependent sizes (``num_tokens``, ``max_length``, ``num_classes``) linked from the
data module by the CLI (:func:`~graph_urpe.data.modules.sequence.sequence_links`); in Python ::

    dm = SyntheticDataModule(task="pi", length=32, vocab_size=100)
    net = SequenceTransformer(dm.num_tokens, max_length=dm.sequence_length, attention="urpe")
    task = SyntheticTaskModule(net, dm.num_classes,
                               optimizer=functools.partial(torch.optim.AdamW, lr=3e-3))

A checkpoint written under the CLI stores the network's class path and arguments, so
``SyntheticTaskModule.load_from_checkpoint(path)`` rebuilds it with no data and no config. When
the network (or the optimizer) was given as a Python object it is not stored (a checkpoint never
pickles code): pass it again, ``load_from_checkpoint(path, model=SequenceTransformer(...))``.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from lightning.pytorch import LightningModule
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import Tensor, nn
from torchmetrics import MeanMetric
from torchmetrics.classification import MulticlassAccuracy

from graph_urpe.choices import check_at_least
from graph_urpe.data.text import IGNORE_INDEX
from graph_urpe.models.hparams import save_configuration
from graph_urpe.models.optim import (
    PolynomialDecayLR,
    configure_gradient_clipping,
    configure_optimizers,
)
from graph_urpe.trust import TrustedLoadMixin

__all__ = ["LanguageModelModule", "SyntheticTaskModule"]


class SyntheticTaskModule(TrustedLoadMixin, LightningModule):
    r"""Token-level classification for the synthetic tasks: ``logits = Linear(model(tokens))``.

    Cross-entropy over every position; the metric is token accuracy (correct tokens / all tokens
    of the split). The paper's setting is ``SequenceTransformer(embed_dim=768, num_heads=12,
    num_layers=3)``, AdamW lr 7e-5, 6,000 warm-up of 40,000 updates, batch 128
    (``configs/synthetic/*-paper.yaml``).

    Args:
        model (nn.Module): the encoder, ``tokens [B, n] -> [B, n, E]`` with an ``embed_dim``
            attribute ``E``, e.g. :class:`~graph_urpe.nn.SequenceTransformer`.
        num_classes (int): output classes (the data module's ``num_classes``: ``length`` for
            Position Identification, ``vocab_size + 1`` for Even Token Prediction).
        optimizer (callable, optional): ``params -> Optimizer``; receives the weight-decay
            groups of :func:`~graph_urpe.models.optim.parameter_groups`.
            (default: :class:`torch.optim.AdamW`)
        lr_scheduler (callable, optional): ``optimizer -> LRScheduler``, stepped every update; a
            ``total_steps`` argument is filled from the Trainer (see
            :func:`~graph_urpe.models.optim.configure_optimizers`). (default:
            :class:`~graph_urpe.models.optim.PolynomialDecayLR`)

    Shapes:
        - **tokens**: ``[B, n]`` int64
        - **output**: ``[B, n, num_classes]`` logits

    Raises:
        TypeError: if ``model`` has no integer ``embed_dim``.
        ValueError: if ``num_classes < 1``.
    """

    def __init__(
        self,
        model: nn.Module,
        num_classes: int,
        optimizer: OptimizerCallable = torch.optim.AdamW,
        lr_scheduler: LRSchedulerCallable | None = PolynomialDecayLR,
    ) -> None:
        super().__init__()
        save_configuration(self, ("model", "optimizer", "lr_scheduler"))
        embed_dim = getattr(model, "embed_dim", None)
        if not isinstance(embed_dim, int):
            raise TypeError(
                f"model must expose its output width as an integer `embed_dim` (as "
                f"graph_urpe.nn.SequenceTransformer does), got {type(model).__name__}."
            )
        check_at_least(1, num_classes=num_classes)
        self.model = model
        self.head = nn.Linear(embed_dim, num_classes)
        self.optimizer, self.lr_scheduler = optimizer, lr_scheduler
        # Token accuracy per stage (keys are not "train": ModuleDict keys become attributes).
        self.accuracy = nn.ModuleDict({
            f"{stage}_accuracy": MulticlassAccuracy(num_classes, average="micro")
            for stage in ("train", "val", "test")
        })

    def forward(self, tokens: Tensor) -> Tensor:
        """Logits ``[B, n, num_classes]`` for tokens ``[B, n]``."""
        return self.head(self.model(tokens))

    def _step(self, batch: tuple[Tensor, Tensor], stage: str) -> Tensor:
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())
        acc = self.accuracy[f"{stage}_accuracy"]
        acc(logits.argmax(-1).flatten(), y.flatten())  # forward: the batch value, and accumulate
        train = stage == "train"
        self.log(f"{stage}/loss", loss, prog_bar=train, batch_size=x.shape[0], sync_dist=not train)
        self.log(f"{stage}/accuracy", acc, prog_bar=not train, on_step=train, on_epoch=not train)
        return loss

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        return self._step(batch, "train")

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        self._step(batch, "val")

    def test_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        self._step(batch, "test")

    # Metrics are reset at epoch start, so their states are created in the loop's grad mode (a
    # `validate` run leaves inference-mode tensors that a later `fit` cannot update in place).
    def on_validation_epoch_start(self) -> None:
        self.accuracy["val_accuracy"].reset()

    def on_test_epoch_start(self) -> None:
        self.accuracy["test_accuracy"].reset()

    metric_name = "accuracy"
    """The monitored validation metric (``val/accuracy``): token accuracy."""
    metric_mode = "max"

    def configure_optimizers(self) -> dict[str, Any] | torch.optim.Optimizer:
        """The injected optimizer and schedule (see :func:`~graph_urpe.models.optim.configure_optimizers`)."""
        return configure_optimizers(self, self.optimizer, self.lr_scheduler)

    #: Gradient clipping that also works for fused optimizers under mixed precision.
    configure_gradient_clipping = configure_gradient_clipping


class LanguageModelModule(TrustedLoadMixin, LightningModule):
    r"""Causal word-level language modelling with an injected :class:`~graph_urpe.nn.TransformerLM`.

    Loss: mean cross-entropy (nats) over the non-padded target tokens of a batch. ``val/ppl`` and
    ``test/ppl`` are ``exp(total NLL / total tokens)`` over the whole split (every target token
    once, ``<eos>`` included; exact under DDP), ``val/loss`` / ``test/loss`` the mean NLL itself.

    Args:
        model (nn.Module): the language model: ``model(tokens [B, L])`` gives next-token scores
            and ``model.nll(tokens, targets, ignore_index)`` the per-token NLL ``[B, L]``, e.g.
            :class:`~graph_urpe.nn.TransformerLM`.
        optimizer (callable, optional): ``params -> Optimizer``. (default:
            :class:`torch.optim.AdamW`)
        lr_scheduler (callable, optional): ``optimizer -> LRScheduler``, stepped every update.
            (default: :class:`~graph_urpe.models.optim.PolynomialDecayLR`)

    Shapes:
        - **tokens**: ``[B, L]`` int64
        - **output**: ``[B, L, V]`` next-token scores (see :class:`~graph_urpe.nn.TransformerLM`)

    Raises:
        TypeError: if ``model`` has no ``nll`` method.
    """

    def __init__(
        self,
        model: nn.Module,
        optimizer: OptimizerCallable = torch.optim.AdamW,
        lr_scheduler: LRSchedulerCallable | None = PolynomialDecayLR,
    ) -> None:
        super().__init__()
        save_configuration(self, ("model", "optimizer", "lr_scheduler"))
        if not callable(getattr(model, "nll", None)):
            raise TypeError(
                "model must have a method nll(tokens, targets, ignore_index) returning per-token "
                f"negative log-likelihoods (as graph_urpe.nn.TransformerLM), got "
                f"{type(model).__name__}."
            )
        self.model = model
        self.optimizer, self.lr_scheduler = optimizer, lr_scheduler
        self.nll = nn.ModuleDict({s: MeanMetric() for s in ("val", "test")})

    def forward(self, tokens: Tensor) -> Tensor:
        """Next-token scores ``[B, L, V]`` for tokens ``[B, L]``."""
        return self.model(tokens)

    def _token_nll(self, batch: tuple[Tensor, Tensor]) -> Tensor:
        """NLL of every valid (non-padded) target token of the batch, ``[num_valid]``."""
        x, y = batch
        return self.model.nll(x, y, ignore_index=IGNORE_INDEX)[y != IGNORE_INDEX]

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        nll = self._token_nll(batch)
        loss = nll.sum() / max(nll.numel(), 1)
        self.log("train/loss", loss, prog_bar=True, batch_size=nll.numel())
        return loss

    def _eval_step(self, batch: tuple[Tensor, Tensor], stage: str) -> None:
        self.nll[stage].update(self._token_nll(batch))

    def _eval_epoch_end(self, stage: str) -> None:
        nll = self.nll[stage].compute()  # collective under DDP: every rank calls it
        self.log(f"{stage}/loss", nll, sync_dist=False)
        self.log(f"{stage}/ppl", torch.exp(nll), prog_bar=True, sync_dist=False)

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        self._eval_step(batch, "val")

    def test_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        self._eval_step(batch, "test")

    # Reset at epoch start (see SyntheticTaskModule); compute() at epoch end.
    def on_validation_epoch_start(self) -> None:
        self.nll["val"].reset()

    def on_test_epoch_start(self) -> None:
        self.nll["test"].reset()

    def on_validation_epoch_end(self) -> None:
        self._eval_epoch_end("val")

    def on_test_epoch_end(self) -> None:
        self._eval_epoch_end("test")

    metric_name = "ppl"
    """The monitored validation metric (``val/ppl``): perplexity."""
    metric_mode = "min"

    def configure_optimizers(self) -> dict[str, Any] | torch.optim.Optimizer:
        """The injected optimizer and schedule (see :func:`~graph_urpe.models.optim.configure_optimizers`)."""
        return configure_optimizers(self, self.optimizer, self.lr_scheduler)

    #: Gradient clipping that also works for fused optimizers under mixed precision.
    configure_gradient_clipping = configure_gradient_clipping
