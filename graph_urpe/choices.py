"""String choices as ``typing.Literal`` types, checked in one place.

A ``str`` parameter with a fixed set of values is annotated with a ``Literal[...]`` type, so
jsonargparse (``graph-urpe``'s parser) validates it and lists the choices in ``--help``;
:func:`check_choice` gives Python callers the same one-line error from the same type.
"""

from __future__ import annotations

from typing import Any, get_args

__all__ = ["check_choice"]


def check_choice(name: str, value: Any, choices: Any) -> None:
    """Refuse ``value`` unless it is one of the values of the ``Literal`` type ``choices``.

    Args:
        name (str): the parameter's name, for the message.
        value: the value given.
        choices: a ``typing.Literal[...]`` type (or a tuple of allowed values).

    Raises:
        ValueError: ``"<name> must be one of (...), got <value>."``
    """
    allowed = choices if isinstance(choices, tuple) else get_args(choices)
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}.")
