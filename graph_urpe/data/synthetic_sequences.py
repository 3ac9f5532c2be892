"""The paper's synthetic sequence tasks: Position Identification and Even Token Prediction.

Luo et al., "Your Transformer May Not be as Powerful as You Expect", NeurIPS 2022
(arXiv 2205.13401), Sec. 5.1. Both tasks are sequence-to-sequence of the same length ``n``; the
input is ``n`` tokens drawn independently and uniformly from ``{0, ..., vocab_size - 1}``:

* **Position Identification** (``"pi"``): the target at position ``i`` is ``i`` (0-based), so the
  model must output each token's index; ``n`` classes. A model without absolute positions and
  with RPE attention (whose attention matrices are right-stochastic) cannot do this in general.
* **Even Token Prediction** (``"etp"``): the target at position ``i`` is the input token at
  position ``2i + 1`` (0-based, i.e. the ``(i+1)``-th *even* token in 1-based counting) for
  ``i < n // 2``, and the filler token :func:`filler_token` ``= vocab_size`` afterwards;
  ``vocab_size + 1`` classes.

Token conventions (differ harmlessly from the official fairseq code, which shifts token ids by 11
for its special symbols and uses ``vocab_size - 2`` as filler while drawing inputs from
``vocab_size - 20`` values): here inputs use the full range ``[0, vocab_size)`` and the filler is
the extra class ``vocab_size``, which never occurs as an input.

Randomness: sample ``k`` of a split is drawn from NumPy's counter-based Philox4x64 generator with
key ``(seed, k)`` and counter ``(0, stream, 0, 0)`` (stream 0 = train, 1 = validation), so every
sample is a pure function of ``(seed, split, k)``: training data are generated on the fly (any
worker count, any order, resumable) and never collide with the fixed validation set.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import Dataset

from graph_urpe.choices import check_at_least, check_choice

__all__ = [
    "TASKS",
    "SyntheticSequenceDataset",
    "even_token_prediction_targets",
    "filler_token",
    "num_classes",
    "position_identification_targets",
]

#: Task names: ``"pi"`` (Position Identification) and ``"etp"`` (Even Token Prediction).
SyntheticTask = Literal["pi", "etp"]
TASKS = get_args(SyntheticTask)

_Split = Literal["train", "val", "test"]
_STREAMS = {"train": 0, "val": 1, "test": 2}


def _check_task(task: str) -> None:
    check_choice("task", task, SyntheticTask)


def filler_token(vocab_size: int) -> int:
    """The Even Token Prediction filler class (``vocab_size``; never an input token)."""
    return vocab_size


def num_classes(task: str, length: int, vocab_size: int) -> int:
    """Number of output classes: ``length`` for ``"pi"``, ``vocab_size + 1`` for ``"etp"``.

    Raises:
        ValueError: for an unknown ``task``.
    """
    _check_task(task)
    return length if task == "pi" else vocab_size + 1


def position_identification_targets(tokens: Tensor) -> Tensor:
    """Position Identification targets: position ``i`` -> ``i``.

    Shapes:
        - **tokens**: ``[..., n]`` (int64)
        - **output**: ``[..., n]`` int64, ``out[..., i] = i``
    """
    n = tokens.shape[-1]
    return torch.arange(n, device=tokens.device).expand(tokens.shape).clone()


def even_token_prediction_targets(tokens: Tensor, vocab_size: int) -> Tensor:
    """Even Token Prediction targets: ``out[i] = tokens[2i + 1]`` for ``i < n // 2``, else filler.

    Shapes:
        - **tokens**: ``[..., n]`` (int64, values in ``[0, vocab_size)``)
        - **output**: ``[..., n]`` int64; the filler is ``vocab_size``
    """
    n = tokens.shape[-1]
    out = torch.full_like(tokens, filler_token(vocab_size))
    half = n // 2
    out[..., :half] = tokens[..., 1 : 2 * half : 2]
    return out


@dataclass(eq=False)
class SyntheticSequenceDataset(Dataset):
    r"""Map-style dataset of ``num_samples`` synthetic (input, target) pairs, generated on access.

    Sample ``k`` is a deterministic function of ``(seed, split, k)`` (see the module docstring),
    so no data are stored: training sets can be large (the official code uses 512,000 samples)
    and validation sets are fixed.

    Args:
        task (str): ``"pi"`` or ``"etp"``.
        length (int): sequence length ``n`` (>= 2).
        vocab_size (int): number of input tokens (>= 1; with 1, every input is the same
            token, the setting of the paper's negative result for RPE).
        num_samples (int): dataset size.
        seed (int, optional): base seed (>= 0). (default: :obj:`0`)
        split (str, optional): ``"train"``, ``"val"`` or ``"test"``; selects an independent
            random stream. (default: :obj:`"train"`)

    Shapes:
        - **item**: ``(tokens [n], targets [n])``, both int64

    Raises:
        ValueError: for an unknown task or split, or non-positive sizes.
    """

    task: SyntheticTask
    length: int
    vocab_size: int
    num_samples: int
    seed: int = 0
    split: _Split = "train"

    def __post_init__(self) -> None:
        _check_task(self.task)
        check_choice("split", self.split, _Split)
        check_at_least(2, length=self.length)
        check_at_least(1, vocab_size=self.vocab_size, num_samples=self.num_samples)
        check_at_least(0, seed=self.seed)

    @property
    def num_classes(self) -> int:
        """Number of target classes (see :func:`num_classes`)."""
        return num_classes(self.task, self.length, self.vocab_size)

    def __len__(self) -> int:
        return self.num_samples

    def tokens(self, index: int) -> Tensor:
        """The input tokens of sample ``index``: ``[n]`` int64 in ``[0, vocab_size)``."""
        if not 0 <= index < self.num_samples:
            raise IndexError(f"index {index} out of range for {self.num_samples} samples.")
        bitgen = np.random.Philox(key=[self.seed, index], counter=[0, _STREAMS[self.split], 0, 0])
        draws = np.random.Generator(bitgen).integers(0, self.vocab_size, self.length)
        return torch.from_numpy(draws.astype(np.int64))

    def targets(self, tokens: Tensor) -> Tensor:
        """Targets for ``tokens`` ``[..., n]`` under this dataset's task."""
        if self.task == "pi":
            return position_identification_targets(tokens)
        return even_token_prediction_targets(tokens, self.vocab_size)

    def __getitem__(self, index: int) -> tuple[Tensor, Tensor]:
        x = self.tokens(int(index))
        return x, self.targets(x)

    def materialize(self) -> tuple[Tensor, Tensor]:
        """All samples as two ``[num_samples, n]`` int64 tensors (for a fixed validation set)."""
        x = torch.stack([self.tokens(k) for k in range(self.num_samples)])
        return x, self.targets(x)
