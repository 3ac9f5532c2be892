"""Argument checks written once: string choices as ``typing.Literal`` types, integer bounds.

A ``str`` parameter with a fixed set of values is annotated with a ``Literal[...]`` type, so
jsonargparse (``graph-urpe``'s parser) validates it and lists the choices in ``--help``;
:func:`check_choice` gives Python callers the same one-line error from the same type.
:func:`check_at_least` refuses sizes below their minimum with one message format.
"""

from __future__ import annotations

from typing import Any, get_args

__all__ = ["check_at_least", "check_choice"]


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


def check_at_least(minimum: int, **values: int) -> None:
    """Refuse the keyword ``values`` unless every one is at least ``minimum``.

    Args:
        minimum (int): the smallest allowed value (``1`` for sizes, ``0`` for counts and seeds).
        **values (int): the parameters by name, e.g. ``num_layers=num_layers``.

    Raises:
        ValueError: ``"<names> must be >= <minimum>, got <name>=<value>, ..."`` naming every
            given parameter when any is below ``minimum``.

    Example:
        >>> check_at_least(1, num_layers=2, num_heads=0)
        Traceback (most recent call last):
        ...
        ValueError: num_layers and num_heads must be >= 1, got num_layers=2, num_heads=0.
    """
    if any(v < minimum for v in values.values()):
        *rest, last = values
        names = f"{', '.join(rest)} and {last}" if rest else last
        given = ", ".join(f"{k}={v!r}" for k, v in values.items())
        raise ValueError(f"{names} must be >= {minimum}, got {given}.")
