"""The search space of ``graph-urpe hpopt``, stated in YAML: each parameter names the ``fit``
options it sets and the values it may take.

::

    lr:                                  # a name of your choice (trials.csv's column)
      options: [model.init_args.optimizer.init_args.lr]   # fit options it sets (one or more)
      low: 1.0e-4                        # a range: float, or int when low and high are ints
      high: 3.0e-3
      log: true                          # optional: sample on a log scale
    width:
      options: [model.init_args.model.init_args.embed_dim, model.init_args.model.init_args.ffn_dim]
      choices: [32, 64, 128]             # or a list of values

Ranges may have a ``step``. :data:`DEFAULT_SPACE` (``graph-urpe hpopt --print-space``) searches
the learning rate, the encoder's learning-rate factor, dropout, width, depth and the number of
epochs. A parameter that sets the encoder's shape (:data:`ENCODER_SHAPE`) is left out when the
configuration fine-tunes a pretrained encoder, whose shape is fixed by its weights. A parameter
that sets only ``trainer.max_epochs`` replaces the configuration's ``max_epochs`` in every trial;
an explicit ``--trainer.max_epochs N`` given to the fits caps it (:func:`cap_epochs`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import yaml

from graph_urpe.cli.messages import CLIError

__all__ = ["DEFAULT_SPACE", "ENCODER_SHAPE", "EPOCHS_OPTION", "SearchParameter", "cap_epochs",
           "parse_space"]

DEFAULT_SPACE = """\
# graph-urpe hpopt's default search space (graph-urpe hpopt --print-space > space.yaml to edit).
# Each parameter: the fit options it sets, and a range (low / high, optional log / step; int
# when low and high are ints) or a list of choices. Width and depth are left out when the
# configuration fine-tunes a pretrained encoder (its shape is fixed by its weights).
lr:                  # the head's (and, times encoder_lr_factor, the encoder's) peak learning rate
  options: [model.init_args.optimizer.init_args.lr]
  low: 2.0e-4
  high: 5.0e-3
  log: true
encoder_lr_factor:   # the encoder's learning rate as a fraction of the head's
  options: [model.init_args.finetune.encoder_lr_factor]
  low: 0.1
  high: 1.0
  log: true
dropout:             # dropout of the encoder's layers and of the head's hidden layer
  options: [model.init_args.model.init_args.dropout, model.init_args.model.init_args.head_dropout]
  low: 0.0
  high: 0.3
width:               # embedding and feed-forward width (a multiple of the 8 heads)
  options: [model.init_args.model.init_args.embed_dim, model.init_args.model.init_args.ffn_dim]
  choices: [32, 64, 128]
depth:               # attention layers
  options: [model.init_args.model.init_args.num_layers]
  low: 2
  high: 6
epochs:              # the schedule's length (warm-up and decay span it)
  options: [trainer.max_epochs]
  low: 10
  high: 50
  step: 10
"""
"""The default search space (YAML, in the format of the module docstring)."""

ENCODER_SHAPE = ("num_layers", "embed_dim", "num_heads", "ffn_dim", "attention", "max_distance",
                 "max_degree", "max_hops")
"""The network options (``model.init_args.model.init_args.<name>``) a pretrained encoder fixes."""

EPOCHS_OPTION = "trainer.max_epochs"
"""The option of the epochs parameter, which :func:`cap_epochs` caps."""


@dataclass(frozen=True)
class SearchParameter:
    """One parameter of the search space.

    Args:
        name (str): its name (a column of ``trials.csv``).
        options (tuple[str, ...]): the dotted ``fit`` options it sets, e.g.
            ``model.init_args.optimizer.init_args.lr``.
        low (float or int, optional): the range's lower end. (default: :obj:`None`)
        high (float or int, optional): the range's upper end. (default: :obj:`None`)
        log (bool, optional): sample the range on a log scale. (default: :obj:`False`)
        step (float or int, optional): the range's step. (default: :obj:`None`)
        choices (tuple, optional): the values to choose from (instead of a range).
            (default: :obj:`None`)
    """

    name: str
    options: tuple[str, ...]
    low: float | int | None = None
    high: float | int | None = None
    log: bool = False
    step: float | int | None = None
    choices: tuple | None = None

    @property
    def sets_encoder_shape(self) -> bool:
        """Whether it sets an option a pretrained encoder fixes (:data:`ENCODER_SHAPE`)."""
        prefix = "model.init_args.model.init_args."
        return any(o.startswith(prefix) and o[len(prefix):] in ENCODER_SHAPE
                   for o in self.options)

    def suggest(self, trial) -> Any:
        """The value of this parameter for an Optuna ``trial`` (``suggest_categorical``,
        ``suggest_int`` when ``low`` and ``high`` are ints, else ``suggest_float``)."""
        if self.choices is not None:
            return trial.suggest_categorical(self.name, list(self.choices))
        if isinstance(self.low, int) and isinstance(self.high, int):
            return trial.suggest_int(self.name, self.low, self.high, step=self.step or 1,
                                     log=self.log)
        return trial.suggest_float(self.name, float(self.low), float(self.high), step=self.step,
                                   log=self.log)


_KEYS = {"options", "low", "high", "log", "step", "choices"}


def parse_space(text: str, source: str = "the search space") -> list[SearchParameter]:
    """The parameters of a search space given as YAML (module docstring).

    Args:
        text (str): the YAML text.
        source (str, optional): where it came from, for messages. (default: ``"the search
            space"``)

    Returns:
        list[SearchParameter]: in the file's order.

    Raises:
        CLIError: for a file that is not a mapping of parameters, a parameter without
            ``options``, with unknown keys, with both or neither of a range and ``choices``, or
            with ``low >= high`` or a non-positive ``low`` on a log scale.
    """
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise CLIError(f"{source} is not valid YAML: {str(err).splitlines()[0]}") from None
    if not isinstance(data, dict) or not data:
        raise CLIError(f"{source} must map parameter names to their options and values "
                       "(`graph-urpe hpopt --print-space` shows the format).")
    params = []
    for name, spec in data.items():
        where = f"{source}, parameter {name!r}"
        if not isinstance(spec, dict):
            raise CLIError(f"{where}: give a mapping with options and low/high or choices.")
        unknown = sorted(set(spec) - _KEYS)
        if unknown:
            raise CLIError(f"{where}: unknown key(s) {unknown}; use {sorted(_KEYS)}.")
        options = spec.get("options")
        if isinstance(options, str):
            options = [options]
        if not options or not all(isinstance(o, str) and o for o in options):
            raise CLIError(f"{where}: `options` must list the fit options it sets, e.g. "
                           "[model.init_args.optimizer.init_args.lr].")
        options = tuple(o.removeprefix("--") for o in options)
        choices = spec.get("choices")
        has_range = "low" in spec or "high" in spec
        if (choices is None) == (not has_range) or (has_range and not {"low", "high"} <= set(spec)):
            raise CLIError(f"{where}: give either low and high (a range) or choices (a list).")
        if choices is not None:
            if not isinstance(choices, list) or not choices:
                raise CLIError(f"{where}: `choices` must be a non-empty list.")
            params.append(SearchParameter(name, options, choices=tuple(choices)))
            continue
        low, high, log = spec["low"], spec["high"], bool(spec.get("log", False))
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (low, high))
        if not numbers or low >= high:
            raise CLIError(f"{where}: low ({low!r}) and high ({high!r}) must be numbers with "
                           "low < high.")
        if log and low <= 0:
            raise CLIError(f"{where}: a log scale needs low > 0, got {low!r}.")
        params.append(SearchParameter(name, options, low, high, log, spec.get("step")))
    return params


def cap_epochs(space: list[SearchParameter], max_epochs: int
               ) -> tuple[list[SearchParameter], str | None]:
    """``space`` with its epochs parameters (those that set only :data:`EPOCHS_OPTION`) capped
    at ``max_epochs``, the most a trial may train: a range ends at ``max_epochs`` (on its
    ``step`` grid: the largest ``low + k * step`` not above it), choices above it are dropped; a
    parameter left with one value or none is taken out of the search, so every trial trains
    ``max_epochs`` epochs.

    Args:
        space (list[SearchParameter]): the search space.
        max_epochs (int): the cap (the user's ``--trainer.max_epochs``).

    Returns:
        tuple[list[SearchParameter], str or None]: the space, and a sentence saying what changed
        (:obj:`None` when nothing did).
    """
    out, notes = [], []
    for param in space:
        if param.options != (EPOCHS_OPTION,):
            out.append(param)
            continue
        if param.choices is not None:
            kept = tuple(c for c in param.choices if c <= max_epochs)
            capped = replace(param, choices=kept) if len(kept) > 1 else None
            shown = f"choices {list(kept)}"
        else:
            high = min(param.high, max_epochs)
            if param.step and high < param.high:
                high = param.low + (high - param.low) // param.step * param.step
            capped = replace(param, high=high) if high > param.low else None
            shown = f"{param.low} to {high}"
        if capped == param:
            out.append(param)
        elif capped is None:
            notes.append(f"{param.name} is fixed at {max_epochs} (--trainer.max_epochs leaves "
                         "no range to search)")
        else:
            out.append(capped)
            notes.append(f"{param.name} is searched within {shown} (capped by "
                         f"--trainer.max_epochs {max_epochs})")
    return out, ("; ".join(notes) or None)
