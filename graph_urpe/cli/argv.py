"""Reading an option's values off a command line before any parser runs: the one scanner of
``--NAME VALUE`` / ``--NAME=VALUE`` that the CLI's early steps share (resolving ``--config``
names, finding ``--ckpt_path``, the ``--config`` files behind ``--help``). Standard library
only, so ``graph-urpe fit --help`` stays free of torch.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["OptionValue", "option_values", "split_passthrough"]


class OptionValue(NamedTuple):
    """One value of an option in ``argv``.

    Attributes:
        position (int): the index in ``argv`` of the option (``--NAME`` or ``--NAME=VALUE``).
        value (str): its value.
        inline (bool): written as ``--NAME=VALUE`` (the value is in ``argv[position]``), else
            it is ``argv[position + 1]``.
    """

    position: int
    value: str
    inline: bool


def option_values(argv: list[str], name: str) -> list[OptionValue]:
    """Every value of option ``name`` (e.g. ``"--config"``) in ``argv``, in order: ``--NAME
    VALUE`` (when a value follows) and ``--NAME=VALUE``.

    Args:
        argv (list[str]): the arguments.
        name (str): the option, with its dashes.

    Returns:
        list[OptionValue]: position, value and form of each.
    """
    found = []
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            found.append(OptionValue(i, argv[i + 1], False))
        elif arg.startswith(name + "="):
            found.append(OptionValue(i, arg.split("=", 1)[1], True))
    return found


def split_passthrough(argv: list[str]) -> tuple[list[str], list[str]]:
    """``argv`` cut at its first ``--``: the command's own arguments and those it passes on to
    every ``graph-urpe fit`` it runs (``seeds``, ``hpopt``); no ``--``: nothing passed on."""
    if "--" not in argv:
        return list(argv), []
    cut = argv.index("--")
    return argv[:cut], argv[cut + 1:]
