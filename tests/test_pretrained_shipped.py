"""Every shipped encoder is package data that loads as plain tensors and builds its encoder."""

import os

import pytest
import torch

from graph_urpe.pretrained import ENCODER_FORMAT, SHIPPED, available, resolve


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_encoder_is_plain_data_with_provenance(name):
    assert name in available()  # package data: its absence is a packaging bug, not a skip
    path = resolve(name)
    blob = torch.load(path, map_location="cpu", weights_only=True)  # refuses any code object
    assert blob["format"] == ENCODER_FORMAT
    assert all(t.dtype == torch.float32 for t in blob["encoder_state"].values())
    assert blob["metadata"]["labels"] and blob["metadata"]["global_step"] > 0
    assert os.path.getsize(path) < 5 * 2**20  # a few MB at most


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_encoder_builds_its_network_and_loads_into_it(name):
    """The encoder's recorded arguments build a Graphormer whose encoder takes every tensor."""
    from graph_urpe.models.finetune import load_pretrained_encoder, read_pretrained_encoder
    from graph_urpe.nn import Graphormer

    pre = read_pretrained_encoder(name)
    blob = torch.load(resolve(name), map_location="cpu", weights_only=True)
    network = Graphormer(1, **blob["encoder_args"])
    load_pretrained_encoder(network, pre, featurization=blob["featurization"])
    for key, value in network.encoder.state_dict().items():
        assert torch.equal(value, blob["encoder_state"][key]), key
