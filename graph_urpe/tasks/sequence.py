"""Lightning modules and data modules for the sequence experiments of the URPE paper.

Luo et al., "Your Transformer May Not be as Powerful as You Expect", NeurIPS 2022
(arXiv 2205.13401):

* :class:`SyntheticTaskModule` + :class:`SyntheticDataModule`: Position Identification and Even
  Token Prediction (Sec. 5.1) with a bidirectional :class:`~graph_urpe.nn.SequenceTransformer`;
  metric: token accuracy (``val/acc``, ``test/acc``).
* :class:`LanguageModelModule` + :class:`WikiTextDataModule`: word-level causal language
  modelling (Sec. 5.3) with :class:`~graph_urpe.nn.TransformerLM` on a WikiText-format corpus;
  metric: perplexity (``val/ppl``, ``test/ppl``), ``exp`` of the mean per-token negative
  log-likelihood over the whole split (every token counted once, ``<eos>`` included).

Both modules are configured by YAML through ``graph-urpe fit --config configs/...``. Data-dependent
sizes (task, length and vocabulary for the synthetic tasks; vocabulary size and block length for
language modelling) default to :obj:`None` and are read from the data module's
``dataset_info()`` at ``setup``; they are stored in the hyperparameters, so a checkpoint rebuilds
the same model. Optimiser: AdamW with linear warm-up and polynomial (default linear) decay,
stepped every update (the fairseq ``polynomial_decay`` schedule of the official code); no weight
decay on biases, norms, embeddings and the ``B``/``C`` tables.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from lightning.pytorch import LightningDataModule, LightningModule
from torch import Tensor, nn
from torch.utils.data import DataLoader, TensorDataset
from torchmetrics import MeanMetric

from graph_urpe.data.synthetic import SyntheticSequenceDataset, num_classes
from graph_urpe.data.text import IGNORE_INDEX, LMBlockDataset, TokenFileCorpus
from graph_urpe.nn.transformer import SequenceTransformer, TransformerLM
from graph_urpe.tasks.graph_optim import configure_adamw

__all__ = [
    "LanguageModelModule",
    "SyntheticDataModule",
    "SyntheticTaskModule",
    "WikiTextDataModule",
]

_ARCH_KEYS = (
    "embed_dim", "num_layers", "num_heads", "ffn_dim", "position", "max_distance",
    "num_buckets", "share_relations", "dropout", "attention_dropout", "activation", "norm_first",
)


def _datamodule_info(module: LightningModule) -> dict[str, Any] | None:
    trainer = module._trainer
    dm = getattr(trainer, "datamodule", None) if trainer is not None else None
    fn = getattr(dm, "dataset_info", None)
    return fn() if callable(fn) else None


def _fill_from_data(module: LightningModule, keys: tuple[str, ...], owner: str) -> None:
    """Fill ``None`` hyperparameters from the data module; refuse mismatching explicit ones."""
    info = _datamodule_info(module)
    hp = module.hparams
    if info is None:
        missing = [k for k in keys if hp.get(k) is None]
        if missing:
            raise ValueError(
                f"{owner} needs {missing}: pass them, or train with a data module that provides "
                "dataset_info()."
            )
        return
    for key in keys:
        if hp.get(key) is None:
            hp[key] = info[key]
        elif info.get(key) is not None and hp[key] != info[key]:
            raise ValueError(
                f"{owner} was built for {key}={hp[key]!r} but the data module provides "
                f"{key}={info[key]!r}: make model.init_args.{key} match the data (or leave it "
                "unset to take it from the data)."
            )


# ------------------------------------------------------------------------------ synthetic
class SyntheticDataModule(LightningDataModule):
    r"""Position Identification / Even Token Prediction data (see :mod:`graph_urpe.data.synthetic`).

    Training samples are generated on the fly from ``seed``; the validation and test sets are
    fixed (generated once from independent streams).

    Args:
        task (str, optional): ``"pi"`` or ``"etp"``. (default: :obj:`"pi"`)
        length (int, optional): sequence length. (default: :obj:`32`)
        vocab_size (int, optional): number of input tokens. (default: :obj:`100`)
        batch_size (int, optional): batch size. (default: :obj:`64`)
        train_size (int, optional): samples per training epoch (the official code uses
            512,000). (default: :obj:`512000`)
        val_size (int, optional): validation samples (official: 6,400). (default: :obj:`6400`)
        test_size (int, optional): test samples. (default: :obj:`6400`)
        seed (int, optional): data seed. (default: :obj:`0`)
        num_workers (int, optional): training DataLoader workers. (default: :obj:`0`)

    Shapes:
        - **batch**: ``(tokens [B, n], targets [B, n])``, int64
    """

    def __init__(
        self,
        task: str = "pi",
        length: int = 32,
        vocab_size: int = 100,
        batch_size: int = 64,
        train_size: int = 512_000,
        val_size: int = 6_400,
        test_size: int = 6_400,
        seed: int = 0,
        num_workers: int = 0,
    ) -> None:
        super().__init__()
        # The task sizes are attributes, not hyperparameters: Lightning refuses to log a data
        # module and a model whose hyperparameters share keys with different initial values (the
        # model's are None until setup).
        self.save_hyperparameters(ignore=["task", "length", "vocab_size"])
        self.task, self.length, self.vocab_size = task, length, vocab_size
        # Validates the arguments early (bad task, sizes).
        self.train_set = SyntheticSequenceDataset(task, length, vocab_size, train_size, seed)
        self._eval_sets: dict[str, TensorDataset] = {}

    def dataset_info(self) -> dict[str, Any]:
        """``{"task", "length", "vocab_size"}`` for :class:`SyntheticTaskModule`."""
        return {"task": self.task, "length": self.length, "vocab_size": self.vocab_size}

    def _eval_set(self, split: str) -> TensorDataset:
        if split not in self._eval_sets:
            hp = self.hparams
            size = hp.val_size if split == "val" else hp.test_size
            ds = SyntheticSequenceDataset(
                self.task, self.length, self.vocab_size, size, hp.seed, split
            )
            self._eval_sets[split] = TensorDataset(*ds.materialize())
        return self._eval_sets[split]

    def train_dataloader(self) -> DataLoader:
        hp = self.hparams
        return DataLoader(
            self.train_set, batch_size=hp.batch_size, shuffle=False, drop_last=True,
            num_workers=hp.num_workers, persistent_workers=hp.num_workers > 0,
        )

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self._eval_set("val"), batch_size=4 * self.hparams.batch_size)

    def test_dataloader(self) -> DataLoader:
        return DataLoader(self._eval_set("test"), batch_size=4 * self.hparams.batch_size)


class SyntheticTaskModule(LightningModule):
    r"""Token-level classification for the synthetic tasks with a bidirectional Transformer.

    ``logits = Linear(SequenceTransformer(tokens))``, cross-entropy over every position;
    the metric is token accuracy. The defaults are the quick CPU setting of
    ``benchmarks/synthetic.py``; the paper's setting is ``embed_dim=768, num_heads=12,
    num_layers=3``, lr 7e-5, 6,000 warm-up of 40,000 updates, batch 128.

    Args:
        position (str, optional): ``"none"``, ``"ape"``, ``"rpe"`` or ``"urpe"``.
            (default: :obj:`"urpe"`)
        embed_dim (int, optional): width. (default: :obj:`64`)
        num_layers (int, optional): layers. (default: :obj:`3`)
        num_heads (int, optional): heads. (default: :obj:`4`)
        ffn_dim (int, optional): feed-forward width. (default: :obj:`None`, ``4 * embed_dim``)
        max_distance (int, optional): see :class:`~graph_urpe.nn.SequenceTransformer`.
            (default: :obj:`None`)
        num_buckets (int, optional): T5 buckets instead of one id per distance.
            (default: :obj:`None`)
        share_relations (bool, optional): one ``B``/``C`` table for all layers.
            (default: :obj:`True`)
        dropout (float, optional): dropout. (default: :obj:`0.0`)
        attention_dropout (float, optional): attention dropout. (default: :obj:`0.0`)
        activation (str, optional): ``"gelu"`` or ``"relu"``. (default: :obj:`"gelu"`)
        norm_first (bool, optional): pre-LN instead of the official post-LN.
            (default: :obj:`False`)
        task (str, optional): ``"pi"`` or ``"etp"``. (default: from the data)
        length (int, optional): sequence length. (default: from the data)
        vocab_size (int, optional): input vocabulary. (default: from the data)
        lr (float, optional): peak learning rate. (default: :obj:`3e-3`)
        end_lr (float, optional): final learning rate. (default: :obj:`0.0`)
        weight_decay (float, optional): AdamW weight decay on linear weights.
            (default: :obj:`0.0`)
        betas (tuple[float, float], optional): AdamW betas. (default: ``(0.9, 0.999)``)
        eps (float, optional): AdamW epsilon. (default: :obj:`1e-8`)
        warmup_steps (int, optional): warm-up updates. (default: :obj:`100`)
        total_steps (int, optional): updates until ``end_lr``. (default: :obj:`None`, the
            Trainer's estimate)
        power (float, optional): decay exponent. (default: :obj:`1.0`)

    Raises:
        ValueError: for an unknown position/task, or data that do not match explicit sizes.
    """

    def __init__(
        self,
        position: str = "urpe",
        embed_dim: int = 64,
        num_layers: int = 3,
        num_heads: int = 4,
        ffn_dim: int | None = None,
        max_distance: int | None = None,
        num_buckets: int | None = None,
        share_relations: bool = True,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        activation: str = "gelu",
        norm_first: bool = False,
        task: str | None = None,
        length: int | None = None,
        vocab_size: int | None = None,
        lr: float = 3e-3,
        end_lr: float = 0.0,
        weight_decay: float = 0.0,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        warmup_steps: int = 100,
        total_steps: int | None = None,
        power: float = 1.0,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.encoder: SequenceTransformer | None = None
        self.head: nn.Linear | None = None
        self.metrics = nn.ModuleDict({s: MeanMetric() for s in ("val", "test")})
        if None not in (task, length, vocab_size):
            self._build()

    def _build(self) -> None:
        hp = self.hparams
        arch = {k: hp[k] for k in _ARCH_KEYS}
        self.encoder = SequenceTransformer(hp.vocab_size, max_length=hp.length, **arch)
        self.head = nn.Linear(hp.embed_dim, num_classes(hp.task, hp.length, hp.vocab_size))

    def setup(self, stage: str) -> None:
        """Take ``task``, ``length`` and ``vocab_size`` from the data module; build the model."""
        _fill_from_data(self, ("task", "length", "vocab_size"), type(self).__name__)
        if self.encoder is None:
            self._build()

    def forward(self, tokens: Tensor) -> Tensor:
        """Logits ``[B, n, num_classes]`` for tokens ``[B, n]``."""
        if self.encoder is None:
            raise RuntimeError(
                "The model is not built yet: pass task, length and vocab_size, or call "
                "trainer.fit/validate/test with a SyntheticDataModule."
            )
        return self.head(self.encoder(tokens))

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())
        acc = (logits.argmax(-1) == y).float().mean()
        self.log("train/loss", loss, prog_bar=True, batch_size=x.shape[0])
        self.log("train/acc", acc, batch_size=x.shape[0])
        return loss

    def _eval_step(self, batch: tuple[Tensor, Tensor], stage: str) -> None:
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())
        correct = (logits.argmax(-1) == y).float()
        self.metrics[stage].update(correct)
        self.log(f"{stage}/loss", loss, batch_size=x.shape[0], sync_dist=True)
        self.log(f"{stage}/acc", self.metrics[stage], prog_bar=True, on_step=False, on_epoch=True)

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        self._eval_step(batch, "val")

    def test_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        self._eval_step(batch, "test")

    # Metrics are reset at epoch start, so their states are created in the loop's grad mode (a
    # `validate` run leaves inference-mode tensors that a later `fit` cannot update in place).
    def on_validation_epoch_start(self) -> None:
        self.metrics["val"].reset()

    def on_test_epoch_start(self) -> None:
        self.metrics["test"].reset()

    def configure_optimizers(self) -> dict[str, Any]:
        """AdamW + linear warm-up and polynomial decay (see the module docstring)."""
        return configure_adamw(self)


# ----------------------------------------------------------------------- language model
class WikiTextDataModule(LightningDataModule):
    r"""A WikiText-format corpus (``wiki.{train,valid,test}.tokens``) cut into LM blocks.

    See :mod:`graph_urpe.data.text` for the format, the vocabulary and the blocks. Works for
    WikiText-2/-103 as distributed and for the corpus of ``datasets/build_text_corpus.py``.

    Args:
        root (str): folder with the token files.
        seq_len (int, optional): block length (tokens per example). (default: :obj:`128`)
        batch_size (int, optional): training batch size. (default: :obj:`32`)
        eval_batch_size (int, optional): validation/test batch size. (default: :obj:`None`,
            ``batch_size``)
        min_count (int, optional): training count below which words become ``<unk>``.
            (default: :obj:`1`)
        num_workers (int, optional): DataLoader workers. (default: :obj:`0`)
        cache (bool, optional): cache the encoded corpus under ``root/processed``.
            (default: :obj:`True`)

    Shapes:
        - **batch**: ``(inputs [B, L], targets [B, L])``, int64; padded targets are ``-100``
    """

    def __init__(
        self,
        root: str,
        seq_len: int = 128,
        batch_size: int = 32,
        eval_batch_size: int | None = None,
        min_count: int = 1,
        num_workers: int = 0,
        cache: bool = True,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        if seq_len < 1 or batch_size < 1:
            raise ValueError(f"seq_len and batch_size must be >= 1, got {seq_len}, {batch_size}.")
        self._corpus: TokenFileCorpus | None = None

    @property
    def corpus(self) -> TokenFileCorpus:
        """The corpus, read (or loaded from cache) on first use."""
        if self._corpus is None:
            hp = self.hparams
            self._corpus = TokenFileCorpus(hp.root, min_count=hp.min_count, cache=hp.cache)
        return self._corpus

    def dataset_info(self) -> dict[str, Any]:
        """``{"vocab_size", "max_length"}`` for :class:`LanguageModelModule`."""
        return {"vocab_size": self.corpus.vocab_size, "max_length": self.hparams.seq_len}

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        hp = self.hparams
        ds = LMBlockDataset(self.corpus.splits[split], hp.seq_len, pad_id=self.corpus.vocab.eos_id)
        bs = hp.batch_size if split == "train" else (hp.eval_batch_size or hp.batch_size)
        return DataLoader(
            ds, batch_size=bs, shuffle=shuffle, num_workers=hp.num_workers,
            persistent_workers=hp.num_workers > 0,
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("valid", shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", shuffle=False)


class LanguageModelModule(LightningModule):
    r"""Causal word-level language model (:class:`~graph_urpe.nn.TransformerLM`).

    Loss: mean cross-entropy (nats) over the non-padded target tokens. ``val/ppl`` and
    ``test/ppl`` are ``exp(total NLL / total tokens)`` over the whole split (exact under DDP).

    Args:
        position (str, optional): ``"none"``, ``"ape"``, ``"rpe"`` or ``"urpe"``.
            (default: :obj:`"urpe"`)
        embed_dim (int, optional): width. (default: :obj:`256`)
        num_layers (int, optional): layers. (default: :obj:`4`)
        num_heads (int, optional): heads. (default: :obj:`4`)
        ffn_dim (int, optional): feed-forward width. (default: :obj:`None`, ``4 * embed_dim``)
        max_distance (int, optional): largest distinguished distance. (default: :obj:`None`,
            ``max_length - 1``)
        num_buckets (int, optional): T5 buckets. (default: :obj:`None`)
        share_relations (bool, optional): one ``B``/``C`` table for all layers.
            (default: :obj:`True`)
        dropout (float, optional): dropout. (default: :obj:`0.1`)
        attention_dropout (float, optional): attention dropout. (default: :obj:`0.0`)
        activation (str, optional): ``"gelu"`` or ``"relu"``. (default: :obj:`"gelu"`)
        norm_first (bool, optional): pre-LN layers. (default: :obj:`True`)
        tie_weights (bool, optional): tie input and output embeddings (full softmax only).
            (default: :obj:`True`)
        adaptive_cutoffs (list[int], optional): adaptive-softmax cluster boundaries (then
            ``tie_weights`` must be false). (default: :obj:`None`, full softmax)
        vocab_size (int, optional): vocabulary size. (default: from the data)
        max_length (int, optional): longest block (the data's ``seq_len``).
            (default: from the data)
        lr (float, optional): peak learning rate. (default: :obj:`1e-3`)
        end_lr (float, optional): final learning rate. (default: :obj:`1e-5`)
        weight_decay (float, optional): AdamW weight decay on linear weights.
            (default: :obj:`0.01`)
        betas (tuple[float, float], optional): AdamW betas. (default: ``(0.9, 0.98)``)
        eps (float, optional): AdamW epsilon. (default: :obj:`1e-8`)
        warmup_steps (int, optional): warm-up updates. (default: :obj:`200`)
        total_steps (int, optional): updates until ``end_lr``. (default: :obj:`None`, the
            Trainer's estimate)
        power (float, optional): decay exponent. (default: :obj:`1.0`)

    Raises:
        ValueError: for an unknown position, or data that do not match explicit sizes.
    """

    def __init__(
        self,
        position: str = "urpe",
        embed_dim: int = 256,
        num_layers: int = 4,
        num_heads: int = 4,
        ffn_dim: int | None = None,
        max_distance: int | None = None,
        num_buckets: int | None = None,
        share_relations: bool = True,
        dropout: float = 0.1,
        attention_dropout: float = 0.0,
        activation: str = "gelu",
        norm_first: bool = True,
        tie_weights: bool = True,
        adaptive_cutoffs: list[int] | None = None,
        vocab_size: int | None = None,
        max_length: int | None = None,
        lr: float = 1e-3,
        end_lr: float = 1e-5,
        weight_decay: float = 0.01,
        betas: tuple[float, float] = (0.9, 0.98),
        eps: float = 1e-8,
        warmup_steps: int = 200,
        total_steps: int | None = None,
        power: float = 1.0,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.model: TransformerLM | None = None
        self.nll = nn.ModuleDict({s: MeanMetric() for s in ("val", "test")})
        if vocab_size is not None and max_length is not None:
            self._build()

    def _build(self) -> None:
        hp = self.hparams
        arch = {k: hp[k] for k in _ARCH_KEYS}
        self.model = TransformerLM(
            hp.vocab_size, tie_weights=hp.tie_weights, adaptive_cutoffs=hp.adaptive_cutoffs,
            max_length=hp.max_length, **arch,
        )

    def setup(self, stage: str) -> None:
        """Take ``vocab_size`` and ``max_length`` from the data module; build the model."""
        _fill_from_data(self, ("vocab_size", "max_length"), type(self).__name__)
        if self.model is None:
            self._build()

    def forward(self, tokens: Tensor) -> Tensor:
        """Next-token logits ``[B, L, V]`` for tokens ``[B, L]``."""
        if self.model is None:
            raise RuntimeError(
                "The model is not built yet: pass vocab_size and max_length, or call "
                "trainer.fit/validate/test with a WikiTextDataModule."
            )
        return self.model(tokens)

    def _nll(self, batch: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        """Mean NLL over the valid targets and their number."""
        x, y = batch
        if self.model is None:
            self(x)  # raises the "not built" error
        count = (y != IGNORE_INDEX).sum()
        loss = self.model.nll(x, y, ignore_index=IGNORE_INDEX).sum() / count.clamp(min=1)
        return loss, count

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        loss, count = self._nll(batch)
        self.log("train/loss", loss, prog_bar=True, batch_size=int(count))
        return loss

    def _eval_step(self, batch: tuple[Tensor, Tensor], stage: str) -> None:
        loss, count = self._nll(batch)
        self.nll[stage].update(loss, weight=count)

    def _eval_epoch_end(self, stage: str) -> None:
        metric = self.nll[stage]
        nll = metric.compute()  # collective under DDP: every rank calls it
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

    def configure_optimizers(self) -> dict[str, Any]:
        """AdamW + linear warm-up and polynomial decay (see the module docstring)."""
        return configure_adamw(self)
