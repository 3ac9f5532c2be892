"""How every Lightning module of the package saves its hyperparameters: the configuration of its
``__init__`` arguments, never an injected Python object.

Under LightningCLI a module's network, optimizer and scheduler arrive as objects, but LightningCLI
also hands Lightning their *configuration* (class path and arguments, linked sizes included),
which :meth:`~lightning.pytorch.core.LightningModule.save_hyperparameters` then stores: a
checkpoint rebuilds them. Given in plain Python (a network instance, an optimizer class or
:func:`functools.partial`) they are left out, so a checkpoint holds data only
(``torch.load(weights_only=True)`` reads it) and is loaded with ``load_from_checkpoint(path,
model=net)``.

LightningCLI says it is instantiating through a private context variable of Lightning's (no public
flag in Lightning 2.6; fenced by ``tests/test_private_apis.py``): this module is its one reader.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Sequence

from lightning.pytorch import LightningModule
from lightning.pytorch.core.mixins.hparams_mixin import _given_hyperparameters

__all__ = ["save_configuration"]


def save_configuration(module: LightningModule, injected: Sequence[str]) -> None:
    """``module.save_hyperparameters()`` of the caller's ``__init__`` arguments; the arguments
    named in ``injected`` are kept only as LightningCLI's configuration, never as objects.

    Call it from ``__init__`` (after ``super().__init__()``), as ``save_hyperparameters``.
    Arguments given as dataclasses (option groups such as
    :class:`~graph_urpe.models.record.ModelRecord`) are kept as the dict of their fields.

    Args:
        module (LightningModule): the module being built.
        injected (Sequence[str]): ``__init__`` arguments that take objects (network, optimizer,
            scheduler).
    """
    frame = inspect.currentframe().f_back
    under_cli = _given_hyperparameters.get() is not None
    module.save_hyperparameters(ignore=None if under_cli else list(injected), frame=frame)
    for name, value in list(module.hparams.items()):
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            module.hparams[name] = dataclasses.asdict(value)
