"""Lightning data modules of the sequence experiments, and the sizes they hand to the model.

Luo et al., "Your Transformer May Not be as Powerful as You Expect", NeurIPS 2022
(arXiv 2205.13401):

* :class:`SyntheticDataModule`: Position Identification and Even Token Prediction (Sec. 5.1),
  samples from :mod:`graph_urpe.data.synthetic_sequences`;
* :class:`WikiTextDataModule`: word-level language modelling (Sec. 5.3) on a WikiText-format
  corpus (:mod:`graph_urpe.data.text`).

The sizes a network needs from the data are static properties of the data modules, computed from
their arguments (and, for a corpus, its cached vocabulary) without generating or batching any
sample. :func:`sequence_links` lists how the CLI links them into the model's arguments
(``parser.link_arguments(source, target, apply_on="instantiate")``); Python users pass them
explicitly, e.g. ``SequenceTransformer(dm.num_tokens, max_length=dm.sequence_length)``. The
property names belong to the sequence family only (graph data modules use other names), so a link
whose source a data module lacks is skipped.
"""

from __future__ import annotations

from lightning.pytorch import LightningDataModule
from torch.utils.data import DataLoader, TensorDataset

from graph_urpe.choices import check_at_least
from graph_urpe.data.synthetic_sequences import SyntheticSequenceDataset, SyntheticTask, num_classes
from graph_urpe.data.text import LMBlockDataset, TokenFileCorpus

__all__ = ["SyntheticDataModule", "WikiTextDataModule", "sequence_links"]


def sequence_links() -> list[tuple[str, str]]:
    """The ``(source, target)`` argument links of the sequence family, for LightningCLI.

    Each source is a property of a data module of this file, each target an argument of the task
    module or of its injected network; apply them with ``apply_on="instantiate"``:

    * ``data.num_tokens`` (:class:`SyntheticDataModule`) -> the input vocabulary ``num_tokens`` of
      :class:`~graph_urpe.nn.SequenceTransformer`;
    * ``data.vocab_size`` (:class:`WikiTextDataModule`) -> ``vocab_size`` of
      :class:`~graph_urpe.nn.TransformerLM`;
    * ``data.sequence_length`` (both) -> ``max_length`` of the network;
    * ``data.num_classes`` (:class:`SyntheticDataModule`) -> ``num_classes`` of
      :class:`~graph_urpe.models.sequence.SyntheticTaskModule` (the size of its output layer).

    Returns:
        list[tuple[str, str]]: the links, in the order to add them.
    """
    net = "model.init_args.model.init_args"
    return [
        ("data.num_tokens", f"{net}.num_tokens"),
        ("data.vocab_size", f"{net}.vocab_size"),
        ("data.sequence_length", f"{net}.max_length"),
        ("data.num_classes", "model.init_args.num_classes"),
    ]


class SyntheticDataModule(LightningDataModule):
    r"""Position Identification / Even Token Prediction data (see :mod:`graph_urpe.data.synthetic_sequences`).

    Training samples are generated on the fly from ``seed``; the validation and test sets are
    fixed (generated once, on first use, from independent streams).

    Args:
        task (str, optional): ``"pi"`` or ``"etp"``. (default: :obj:`"pi"`)
        length (int, optional): sequence length (>= 2). (default: :obj:`32`)
        vocab_size (int, optional): number of input tokens (>= 1). (default: :obj:`100`)
        batch_size (int, optional): training batch size; evaluation uses 4 times as many.
            (default: :obj:`64`)
        train_size (int, optional): samples per training epoch (the official code uses
            512,000). (default: :obj:`512000`)
        val_size (int, optional): validation samples (official: 6,400). (default: :obj:`6400`)
        test_size (int, optional): test samples. (default: :obj:`6400`)
        seed (int, optional): data seed. (default: :obj:`0`)
        num_workers (int, optional): training DataLoader workers. (default: :obj:`0`)

    Shapes:
        - **batch**: ``(tokens [B, n], targets [B, n])``, int64

    Raises:
        ValueError: for an unknown task, ``length < 2``, ``vocab_size < 1``, non-positive sizes or
            a negative seed (at construction).
    """

    def __init__(
        self,
        task: SyntheticTask = "pi",
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
        self.save_hyperparameters()
        check_at_least(1, batch_size=batch_size)
        # Validates task, sizes and seed early; generates nothing.
        self.train_set = SyntheticSequenceDataset(task, length, vocab_size, train_size, seed)
        check_at_least(1, val_size=val_size, test_size=test_size)
        self._eval_sets: dict[str, TensorDataset] = {}

    @property
    def num_tokens(self) -> int:
        """Input vocabulary size (``vocab_size``), for the network's token embedding."""
        return self.hparams.vocab_size

    @property
    def sequence_length(self) -> int:
        """Sequence length ``n`` (``length``)."""
        return self.hparams.length

    @property
    def num_classes(self) -> int:
        """Output classes: ``length`` for ``"pi"``, ``vocab_size + 1`` for ``"etp"``."""
        hp = self.hparams
        return num_classes(hp.task, hp.length, hp.vocab_size)

    def _eval_set(self, split: str) -> TensorDataset:
        if split not in self._eval_sets:
            hp = self.hparams
            size = hp.val_size if split == "val" else hp.test_size
            ds = SyntheticSequenceDataset(hp.task, hp.length, hp.vocab_size, size, hp.seed, split)
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


class WikiTextDataModule(LightningDataModule):
    r"""A WikiText-format corpus (``wiki.{train,valid,test}.tokens``) cut into LM blocks.

    See :mod:`graph_urpe.data.text` for the format, the vocabulary and the blocks. Works for
    WikiText-2/-103 as distributed and for the corpus of ``datasets/build_text_corpus.py``. The
    corpus is read once, on first use (:attr:`vocab_size` or a loader), and cached under
    ``root/processed`` (see :class:`~graph_urpe.data.text.TokenFileCorpus`), so later runs read
    the vocabulary from the cache.

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

    Raises:
        ValueError: for ``seq_len < 1`` or ``batch_size < 1`` (at construction).
        FileNotFoundError: if a token file is missing (on first use of the corpus).
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
        check_at_least(1, seq_len=seq_len, batch_size=batch_size)
        self._corpus: TokenFileCorpus | None = None

    @property
    def corpus(self) -> TokenFileCorpus:
        """The corpus, read (or loaded from cache) on first use."""
        if self._corpus is None:
            hp = self.hparams
            self._corpus = TokenFileCorpus(hp.root, min_count=hp.min_count, cache=hp.cache)
        return self._corpus

    @property
    def vocab_size(self) -> int:
        """Vocabulary size of the training file, ``<unk>`` and ``<eos>`` included."""
        return self.corpus.vocab_size

    @property
    def sequence_length(self) -> int:
        """Block length ``L`` (``seq_len``): the longest input the network sees."""
        return self.hparams.seq_len

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
