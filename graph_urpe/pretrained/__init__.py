"""Pretrained encoders shipped with the package (package data, read with
``torch.load(weights_only=True)``: plain tensors, numbers and strings).

``moses-descriptors`` (:data:`DEFAULT`, file ``moses_descriptors_4x64.pt``): a URPE-Graphormer
encoder of the CSV template's size (4 layers x 64, 8 heads, FFN 64, OGB atom and bond features)
pretrained to predict 42 standardised RDKit 2D descriptors (:mod:`graph_urpe.data.descriptors`) of
MOSES ZINC molecules. The CSV template (``configs/csv/template.yaml``) fine-tunes from it. How it
was made (data, command, updates, CPU time, SHA-256, licence): ``datasets/README.md``; rebuild it
with ``configs/pretrain/descriptors.yaml`` and :mod:`graph_urpe.pretrained.export`.

``moses-rdkit`` (file ``moses_rdkit_4x64.pt``, beside the default): the same architecture
pretrained on 428 labels (the full RDKit 2D descriptor set after filtering, fragment counts
included, and 256 Morgan count bits) of 40,000 MOSES molecules, 1,800 updates (issue 27; data:
``datasets/README.md`` section 6b, run and URPE / RPE twin: ``benchmarks/README.md`` section 13b).
Fine-tune from it with ``--model.init_args.finetune.pretrained moses-rdkit`` (plus the attention kind its
metadata names, if not URPE).

``moses-gd-urpe`` and ``moses-gd-rpe`` (files ``moses_gd_urpe_4x64.pt``, ``moses_gd_rpe_4x64.pt``):
the same size reading Graphormer-GD's relations (``relations: [spd, resistance]``), URPE and its
RPE twin, pretrained on 429 labels of 500,000 MOSES
molecules, 8,000 updates of 128 (issue 44; data: ``datasets/README.md`` section 6b, run:
``benchmarks/README.md`` section 13d).
Fine-tune either with ``--model.init_args.finetune.pretrained moses-gd-urpe`` (or ``-rpe`` with
``attention: rpe``), ``relations: [spd, resistance]`` and the data's ``resistance: true``;
on five public sets, 3 seeds, ``moses-gd-urpe`` was ahead of the default on every test set but
not on most validation sets, so the default stays (``benchmarks/README.md`` section 13e).
"""

from __future__ import annotations

import os

__all__ = ["DEFAULT", "ENCODER_FORMAT", "SHIPPED", "available", "resolve"]

SHIPPED: dict[str, str] = {"moses-descriptors": "moses_descriptors_4x64.pt",
                           "moses-rdkit": "moses_rdkit_4x64.pt",
                           "moses-gd-rpe": "moses_gd_rpe_4x64.pt",
                           "moses-gd-urpe": "moses_gd_urpe_4x64.pt"}
"""Shipped encoder names and their files in this folder."""

ENCODER_FORMAT = "graph-urpe-encoder/1"
"""Value of the ``format`` key of an encoder file (written by :mod:`graph_urpe.pretrained.export`,
read by :func:`graph_urpe.models.finetune.read_pretrained_encoder`)."""

DEFAULT = "moses-descriptors"
"""The encoder the CSV template fine-tunes from."""

_HERE = os.path.dirname(os.path.abspath(__file__))


def available() -> list[str]:
    """Names of the shipped encoders whose file is present."""
    return [name for name, file in SHIPPED.items() if os.path.isfile(os.path.join(_HERE, file))]


def resolve(source: str) -> str | None:
    r"""The file of :obj:`source`: an existing path as given, else the file of a shipped name.

    Args:
        source (str): a file path or a name of :data:`SHIPPED`.

    Returns:
        str or None: the path, or :obj:`None` when neither exists.
    """
    if os.path.isfile(source):
        return source
    if source in SHIPPED:
        path = os.path.join(_HERE, SHIPPED[source])
        return path if os.path.isfile(path) else None
    return None
