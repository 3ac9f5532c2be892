"""The experiment files and the CLI's argument links, checked against the classes they name.

jsonargparse skips a link whose source property the chosen data module lacks (only a debug log),
so a misspelt link would pass unseen: every link is resolved here by hand, against the facts of
the data modules and the constructor parameters of the modules and networks it feeds.
"""

import dataclasses
import inspect
from pathlib import Path

import pytest
import yaml
from torch.utils.data import DistributedSampler

from graph_urpe.cli.links import GRAPH_LINKS
from graph_urpe.data.facts import DatasetFacts
from graph_urpe.data.modules import (
    CSVDataModule,
    OGBDataModule,
    PCQM4Mv2DataModule,
    SyntheticGraphDataModule,
    ZINCDataModule,
    ZincLikeDataModule,
)
from graph_urpe.data.modules.sequence import SyntheticDataModule, WikiTextDataModule, sequence_links
from graph_urpe.data.synthetic_sequences import SyntheticSequenceDataset
from graph_urpe.models import GraphPropertyModule
from graph_urpe.models.sequence import LanguageModelModule, SyntheticTaskModule
from graph_urpe.nn import Graphormer, SequenceTransformer, TransformerLM

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
GRAPH_DATA = (CSVDataModule, OGBDataModule, PCQM4Mv2DataModule, SyntheticGraphDataModule,
              ZINCDataModule, ZincLikeDataModule)


def _params(cls) -> set[str]:
    params = set(inspect.signature(cls.__init__).parameters)
    if cls is TransformerLM:  # forwards **kwargs to the SequenceTransformer it builds
        params |= _params(SequenceTransformer)
    return params


def _target_owner(target: str, module: type, network: type) -> type:
    """The class whose constructor a link target ``model.init_args[.model.init_args].NAME``
    names."""
    return network if target.startswith("model.init_args.model.init_args.") else module


@pytest.mark.parametrize("field, target", GRAPH_LINKS)
def test_every_graph_link_resolves(field, target):
    assert field in {f.name for f in dataclasses.fields(DatasetFacts)}, field
    for data_module in GRAPH_DATA:
        assert isinstance(data_module.facts, property), data_module  # the one linked source
    owner = _target_owner(target, GraphPropertyModule, Graphormer)
    assert target.rsplit(".", 1)[1] in _params(owner), (owner, target)


@pytest.mark.parametrize("source, target", sequence_links())
def test_every_sequence_link_resolves(source, target):
    prop = source.removeprefix("data.")
    pairs = [(SyntheticDataModule, SyntheticTaskModule, SequenceTransformer),
             (WikiTextDataModule, LanguageModelModule, TransformerLM)]
    linked = [(m, n) for d, m, n in pairs if isinstance(getattr(d, prop, None), property)]
    assert linked, f"no sequence data module has the property {prop!r}"
    for module, network in linked:
        assert target.rsplit(".", 1)[1] in _params(_target_owner(target, module, network))


def _without(config: dict, *paths: tuple[str, ...]) -> dict:
    for path in paths:
        node = config
        for key in path[:-1]:
            node = node[key]
        node.pop(path[-1])
    return config


ATTENTION = ("model", "init_args", "model", "init_args", "attention")


@pytest.mark.parametrize("stem", ["zinc/graphormer-slim", "zinc/graphormer-gd", "graph-synthetic/degree",
                                  "pcqm4mv2/graphormer-base", "ogbg-molhiv/graphormer-slim"])
def test_rpe_twin_differs_only_in_attention_and_name(stem):
    """The RPE baseline of a URPE experiment is a full file (one ``--config`` runs it), so it is
    checked to stay the URPE file with ``attention: rpe`` and its own run name."""
    urpe = yaml.safe_load((CONFIGS / f"{stem}-urpe.yaml").read_text())
    rpe = yaml.safe_load((CONFIGS / f"{stem}-rpe.yaml").read_text())
    assert (urpe["model"]["init_args"]["model"]["init_args"]["attention"],
            rpe["model"]["init_args"]["model"]["init_args"]["attention"]) == ("urpe", "rpe")
    assert urpe["name"] != rpe["name"]
    assert _without(urpe, ("name",), ATTENTION) == _without(rpe, ("name",), ATTENTION)


@pytest.mark.parametrize("base", ["synthetic/base.yaml", "lm/base.yaml"])
def test_sequence_bases_split_batches_across_ranks(base):
    """``default.yaml`` turns Lightning's distributed sampler off (the graph loaders split batches
    across ranks themselves); the sequence loaders do not, so their family bases turn it back on
    and every DDP rank trains on its own share of each epoch."""
    default = yaml.safe_load((CONFIGS / "default.yaml").read_text())
    family = yaml.safe_load((CONFIGS / base).read_text())
    assert default["trainer"]["use_distributed_sampler"] is False
    assert family["trainer"]["use_distributed_sampler"] is True


def test_distributed_sampler_splits_the_synthetic_sequences():
    """What Lightning's distributed sampler does to the synthetic training set: two ranks see
    disjoint halves that together cover it."""
    data = SyntheticSequenceDataset("pi", 8, 10, 20, seed=0)
    ranks = [list(DistributedSampler(data, num_replicas=2, rank=r, shuffle=False))
             for r in range(2)]
    assert not set(ranks[0]) & set(ranks[1])
    assert sorted(ranks[0] + ranks[1]) == list(range(20))
