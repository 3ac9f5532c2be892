"""The argument links of ``graph-urpe``: what the data module states, handed to the model when
LightningCLI instantiates them (``fit``, ``validate``, ``test``; ``predict`` takes the
checkpoint's values instead)."""

from __future__ import annotations

import dataclasses

from lightning.pytorch.cli import LightningArgumentParser

from graph_urpe.models.record import ModelRecord

__all__ = ["GRAPH_LINKS", "add_links", "model_record", "reads_resistance"]

GRAPH_LINKS = (
    ("num_tasks", "model.init_args.model.init_args.num_tasks"),
    ("atom_categories", "model.init_args.model.init_args.atom_categories"),
    ("bond_categories", "model.init_args.model.init_args.bond_categories"),
    ("level", "model.init_args.model.init_args.level"),
)
"""``(field of the data module's facts, network argument)``: the graph data module's one facts
object (:class:`~graph_urpe.data.facts.DatasetFacts`, ``data.facts``) is linked field by field into
the network's sizes at instantiation, and whole into the model's ``record``
(:func:`model_record`). jsonargparse skips the links of a data module without ``facts`` (the
sequence families, with their own links); a field that does not exist fails loudly."""


def _fact(field: str):
    """``facts -> facts.<field>`` (tuples as lists, the model's argument types), named for the
    link's help line."""
    def fact(facts):
        value = getattr(facts, field)
        return list(value) if isinstance(value, tuple) else value
    fact.__name__ = f"facts.{field}"
    return fact


def model_record(facts) -> dict:
    """The model's :class:`~graph_urpe.models.record.ModelRecord` of a data module's facts, as
    the plain dict of its fields (what the checkpoint stores)."""
    return dataclasses.asdict(ModelRecord.from_facts(facts))


def reads_resistance(relations) -> bool:
    """Whether a network's ``relations`` include the resistance distance (what the data module
    then computes for every graph: its ``resistance``)."""
    return "resistance" in (relations or ())


def add_links(parser: LightningArgumentParser) -> None:
    """Link the data module's facts (:data:`GRAPH_LINKS`, and whole as the model's ``record``)
    and the sequence families' sizes into the model, applied at instantiation (``fit``,
    ``validate``, ``test``); and, when parsing, the network's ``relations`` into the data
    module's ``resistance`` (:func:`reads_resistance`: the one switch of the resistance
    distance, as ``predict`` derives it from the network; jsonargparse skips the link for a
    network or data module without those arguments)."""
    parser.link_arguments("model.init_args.model.init_args.relations",
                          "data.init_args.resistance", compute_fn=reads_resistance,
                          apply_on="parse")
    for field, target in GRAPH_LINKS:
        parser.link_arguments("data.facts", target, compute_fn=_fact(field),
                              apply_on="instantiate")
    parser.link_arguments("data.facts", "model.init_args.record", compute_fn=model_record,
                          apply_on="instantiate")
    try:
        from graph_urpe.data.modules.sequence import sequence_links
    except ImportError:  # the sequence family is optional for the graph command
        return
    for source, target in sequence_links():
        parser.link_arguments(source, target, apply_on="instantiate")
