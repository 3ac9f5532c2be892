"""Word-level language-modelling corpora in the WikiText token-file format.

The format (WikiText-2/-103, Merity et al., 2016): a folder with ``wiki.train.tokens``,
``wiki.valid.tokens`` and ``wiki.test.tokens``, UTF-8 text, already tokenised, tokens separated by
spaces, rare words already replaced by ``<unk>``. As in the fairseq and Transformer-XL pipelines,
every line (also an empty one) is read as its whitespace-separated tokens followed by ``<eos>``;
the three files are concatenated into one token stream per split. The vocabulary comes from the
training file only; tokens of the validation/test files that it lacks map to ``<unk>``. So
WikiText-103 works as downloaded; ``datasets/build_text_corpus.py`` writes a public-domain English
corpus in the same format.

Language-model examples are contiguous non-overlapping blocks of the stream
(:class:`LMBlockDataset`): inputs ``ids[k*L : k*L+L]``, targets shifted by one. Every token
after the first is predicted exactly once; the last block is padded (targets ``-100``, ignored),
so the perplexity covers the whole split. Each block is scored without earlier context (fairseq's
``--context-window 0``; a sliding window lowers perplexity further but is not used here).
"""

from __future__ import annotations

import hashlib
import os
import warnings
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

import torch
from torch import Tensor
from torch.utils.data import Dataset

from graph_urpe.choices import check_at_least
from graph_urpe.data.cache import CorruptCacheError, safe_torch_load
from graph_urpe.files import OutputError, atomic_save

__all__ = [
    "EOS",
    "IGNORE_INDEX",
    "SPLIT_FILES",
    "UNK",
    "LMBlockDataset",
    "TokenFileCorpus",
    "Vocabulary",
    "read_token_lines",
]

#: Unknown-word token (WikiText's spelling).
UNK = "<unk>"
#: End-of-line token appended to every line.
EOS = "<eos>"
#: File names of the WikiText splits.
SPLIT_FILES = {"train": "wiki.train.tokens", "valid": "wiki.valid.tokens", "test": "wiki.test.tokens"}
#: Target value of padded positions (ignored by :func:`torch.nn.functional.cross_entropy`).
IGNORE_INDEX = -100


def read_token_lines(path: str | os.PathLike) -> Iterator[list[str]]:
    """Yield the tokens of each line of a token file, with ``<eos>`` appended to every line.

    Raises:
        FileNotFoundError: if ``path`` does not exist.
    """
    with open(path, encoding="utf-8") as f:
        for line in f:
            yield line.split() + [EOS]


class Vocabulary:
    """A word <-> id mapping with ``<unk>`` (id 0) and ``<eos>`` (id 1).

    Other words are sorted by decreasing count, ties by first occurrence (deterministic).

    Args:
        words (Iterable[str]): the words in id order, *without* the two special tokens.

    Raises:
        ValueError: for duplicate words.
    """

    def __init__(self, words: Iterable[str]) -> None:
        self.itos = [UNK, EOS] + [w for w in words if w not in (UNK, EOS)]
        self.stoi = {w: i for i, w in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            raise ValueError("Vocabulary words must be unique.")
        self.unk_id = 0
        self.eos_id = 1

    @classmethod
    def from_counts(cls, counts: Counter, min_count: int = 1) -> Vocabulary:
        """Build from word counts, keeping words seen at least ``min_count`` times.

        Raises:
            ValueError: if ``min_count < 1``.
        """
        check_at_least(1, min_count=min_count)
        return cls(w for w, c in counts.most_common() if c >= min_count)

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, word: str) -> bool:
        return word in self.stoi

    def encode(self, tokens: Iterable[str]) -> list[int]:
        """Ids of ``tokens``; unknown words give ``unk_id``."""
        get, unk = self.stoi.get, self.unk_id
        return [get(t, unk) for t in tokens]

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Words of ``ids``."""
        return [self.itos[int(i)] for i in ids]

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(size={len(self)})"


class TokenFileCorpus:
    r"""A WikiText-format corpus: vocabulary from the training file, one id stream per split.

    Args:
        root (str or Path): folder holding ``wiki.{train,valid,test}.tokens``.
        min_count (int, optional): training-set count below which words become ``<unk>``
            (WikiText files are already cut off, so 1 keeps their vocabulary as is).
            (default: :obj:`1`)
        cache (bool, optional): store the encoded corpus as ``root/processed/corpus-<key>.pt``
            (key: ``min_count`` and the token files' sizes and modification times) and reuse
            it: written atomically (a temporary file renamed over it), read as the graph caches
            are (tensors and containers only; a damaged cache is rebuilt with a warning); a
            read-only ``root`` gets a warning and no cache. (default: :obj:`True`)

    Attributes:
        vocab (Vocabulary): the vocabulary.
        splits (dict[str, Tensor]): ``"train"``, ``"valid"``, ``"test"`` -> ``[T]`` int64 ids.

    Raises:
        FileNotFoundError: if a split file is missing (the message lists the expected names).
        ValueError: if the training file is empty.
        graph_urpe.data.cache.UnsafeCacheError: if the cache file holds anything but tensors and
            containers (possibly tampered with; nothing in it is run).
    """

    def __init__(self, root: str | os.PathLike, min_count: int = 1, cache: bool = True) -> None:
        self.root = Path(root)
        self.min_count = min_count
        paths = {s: self.root / f for s, f in SPLIT_FILES.items()}
        missing = [str(p) for p in paths.values() if not p.is_file()]
        if missing:
            raise FileNotFoundError(
                f"missing token file(s) {missing}; a WikiText-format corpus folder holds "
                f"{sorted(SPLIT_FILES.values())} (build one with datasets/build_text_corpus.py)."
            )
        cache_path = self.root / "processed" / f"corpus-{self._cache_key(paths)}.pt"
        if cache and cache_path.is_file() and self._read_cache(cache_path):
            return
        counts: Counter = Counter()
        for tokens in read_token_lines(paths["train"]):
            counts.update(tokens)
        if counts[EOS] == 0:
            raise ValueError(f"training file {paths['train']} is empty.")
        self.vocab = Vocabulary.from_counts(counts, min_count=min_count)
        self.splits = {s: self._encode(p) for s, p in paths.items()}
        if cache:
            state = {"words": self.vocab.itos[2:], "splits": self.splits}
            try:  # a temporary file renamed over the cache: a kill never leaves half a cache
                atomic_save(lambda tmp: torch.save(state, tmp), str(cache_path))
            except OutputError as err:  # a read-only corpus folder: work without the cache
                warnings.warn(f"could not cache the encoded corpus: {err}", stacklevel=2)

    def _read_cache(self, path: Path) -> bool:
        """Load the encoded corpus from ``path`` as the graph caches are read
        (:func:`~graph_urpe.data.cache.safe_torch_load`: plain tensors and containers only). A
        truncated, empty or malformed cache is reported (warning naming it), deleted and
        rebuilt: returns :obj:`False` then.

        Raises:
            UnsafeCacheError: if the file holds anything but tensors and containers (nothing in
                it is run; it is left in place as evidence).
        """
        try:
            state = safe_torch_load(str(path))
            words, splits = state["words"], state["splits"]
            if not (isinstance(words, list) and all(isinstance(w, str) for w in words)
                    and isinstance(splits, dict) and set(splits) == set(SPLIT_FILES)
                    and all(isinstance(t, Tensor) and t.dtype == torch.int64 and t.dim() == 1
                            and (t.numel() == 0 or 0 <= int(t.min()) and
                                 int(t.max()) < len(words) + 2) for t in splits.values())):
                raise CorruptCacheError(str(path), "not an encoded corpus of this vocabulary")
        except (CorruptCacheError, KeyError, TypeError) as exc:
            if not isinstance(exc, CorruptCacheError):
                exc = CorruptCacheError(str(path), "not an encoded corpus")
            warnings.warn(f"{exc}; rebuilding it from the token files", stacklevel=3)
            path.unlink(missing_ok=True)
            return False
        self.vocab = Vocabulary(words)
        self.splits = splits
        return True

    def _cache_key(self, paths: dict[str, Path]) -> str:
        stats = [(p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in paths.values()]
        return hashlib.sha256(repr((self.min_count, stats)).encode()).hexdigest()[:16]

    def _encode(self, path: Path) -> Tensor:
        ids = array("q")
        for tokens in read_token_lines(path):
            ids.extend(self.vocab.encode(tokens))
        if not ids:
            return torch.empty(0, dtype=torch.int64)
        return torch.frombuffer(ids, dtype=torch.int64).clone()

    @property
    def vocab_size(self) -> int:
        """Number of words, ``<unk>`` and ``<eos>`` included."""
        return len(self.vocab)

    def __repr__(self) -> str:
        sizes = ", ".join(f"{s}={len(t)}" for s, t in self.splits.items())
        return f"{self.__class__.__name__}({str(self.root)!r}, vocab={len(self.vocab)}, {sizes})"


class LMBlockDataset(Dataset):
    r"""Contiguous non-overlapping language-model blocks of a token stream.

    Block ``k`` has inputs ``ids[kL : kL+L]`` and targets ``ids[kL+1 : kL+L+1]`` (``L`` =
    ``seq_len``); the last block is padded with ``<eos>`` inputs and ``-100`` targets. The
    ``T - 1`` targets of all blocks are exactly ``ids[1:]``.

    Args:
        ids (Tensor): ``[T]`` int64 token ids, ``T >= 2``.
        seq_len (int): block length ``L``.
        pad_id (int, optional): input id used for padding. (default: :obj:`1`, ``<eos>``)

    Shapes:
        - **item**: ``(inputs [L], targets [L])``, int64

    Raises:
        ValueError: for ``seq_len < 1``, or fewer than two tokens.
    """

    def __init__(self, ids: Tensor, seq_len: int, pad_id: int = 1) -> None:
        check_at_least(1, seq_len=seq_len)
        if ids.dim() != 1 or ids.numel() < 2:
            raise ValueError(f"ids must be a 1-D stream of >= 2 tokens, got shape {tuple(ids.shape)}.")
        self.ids = ids
        self.seq_len = seq_len
        self.pad_id = pad_id

    def __len__(self) -> int:
        num_targets = self.ids.numel() - 1
        return (num_targets + self.seq_len - 1) // self.seq_len

    def __getitem__(self, index: int) -> tuple[Tensor, Tensor]:
        if not 0 <= index < len(self):
            raise IndexError(f"block {index} out of range for {len(self)} blocks.")
        start = index * self.seq_len
        x = self.ids[start : start + self.seq_len]
        y = self.ids[start + 1 : start + self.seq_len + 1]
        pad = self.seq_len - y.numel()
        if pad:
            x = torch.cat([x[: y.numel()], x.new_full((pad,), self.pad_id)])
            y = torch.cat([y, y.new_full((pad,), IGNORE_INDEX)])
        return x, y

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(tokens={self.ids.numel()}, seq_len={self.seq_len})"
