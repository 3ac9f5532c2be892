"""Sphinx extension: a cross-reference to a ``graph_urpe`` name that does not exist is a warning
(so ``sphinx-build -W`` fails on it), without turning on ``nitpicky`` for every external name.

Sphinx leaves a ``:class:`` / ``:func:`` / ``:mod:`` ... reference it cannot resolve as plain text,
silently: a typo, a renamed function or a role split over two lines would go unnoticed. Here a
reference whose target starts with ``graph_urpe`` (or is relative, ``.name``, to the module it
appears in) is looked up by import; a name the package defines but the API reference does not
document stays plain text, a name that cannot be imported is reported with its place.
"""

from __future__ import annotations

import importlib

from sphinx.util import logging

logger = logging.getLogger(__name__)


def resolves(target: str) -> bool:
    """Whether ``target`` (a dotted name such as ``graph_urpe.nn.conv.URPEGraphConv`` or
    ``graph_urpe.data.sampler.SizeBucketBatchSampler.sampler``) names a module or an attribute of
    one.

    Args:
        target (str): the dotted name.
    """
    parts = target.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not name:
                return False
            try:
                obj = getattr(obj, name)
            except AttributeError:
                return False
        return True
    return False


def check_reference(app, env, node, contnode) -> None:
    """``missing-reference`` handler: warns when a Python-domain target in ``graph_urpe`` does
    not exist (see the module docstring); returns ``None`` so the reference stays plain text."""
    if node.get("refdomain") != "py":
        return
    target = node.get("reftarget", "").lstrip("~")
    if target.startswith("."):
        module = node.get("py:module") or ""
        target = f"{module}{target}"
    if target.startswith("graph_urpe") and not resolves(target):
        logger.warning("broken cross-reference: %s does not exist", node.get("reftarget"),
                       location=node, type="ref", subtype="graph_urpe")


def setup(app) -> dict:
    """Connects the handler (Sphinx's extension entry point)."""
    app.connect("missing-reference", check_reference)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
