"""Graphormer with several relations (Graphormer-GD: SPD and resistance distance): batched output
equals each graph alone, URPE starts as RPE, the resistance terms change the output once trained,
missing relations are named, and the relations are plain typed values of the constructor."""

import networkx as nx
import pytest
import torch
from torch_geometric.data import Batch, Data
from torch_geometric.transforms import Compose

from graph_urpe.nn import Graphormer
from graph_urpe.transforms import AddResistanceDistance, AddShortestPathDistance

PRE = Compose([AddShortestPathDistance(), AddResistanceDistance()])


def _data(graph: nx.Graph, seed: int) -> Data:
    gen = torch.Generator().manual_seed(seed)
    edges = list(graph.edges()) + [(v, u) for u, v in graph.edges()]
    edge_index = torch.tensor(edges, dtype=torch.long).t().reshape(2, -1)
    n = graph.number_of_nodes()
    return PRE(Data(x=torch.randint(0, 5, (n, 2), generator=gen), edge_index=edge_index,
                    edge_attr=torch.randint(0, 3, (edge_index.shape[1], 1), generator=gen),
                    num_nodes=n))


def _graphs() -> list[Data]:
    return [_data(g, s) for s, g in enumerate([
        nx.lollipop_graph(4, 3), nx.disjoint_union(nx.cycle_graph(4), nx.path_graph(2)),
        nx.empty_graph(1), nx.barbell_graph(3, 1)])]


def _model(**kw) -> Graphormer:
    torch.manual_seed(0)
    cfg = {"num_layers": 2, "embed_dim": 16, "num_heads": 2, "ffn_dim": 16, "max_distance": 4,
           "num_kernels": 8, "dropout": 0.0, "attention_dropout": 0.0, "max_degree": 6}
    cfg.update(kw)
    return Graphormer(1, [5, 5], [3], **cfg).eval()


@pytest.mark.parametrize("relations", [["resistance"], ["spd", "resistance"]], ids="+".join)
@pytest.mark.parametrize("per_layer", [False, True])
def test_batched_equals_each_graph_alone(relations, per_layer):
    model = _model(relations=relations, bias_per_layer=per_layer, multiplier_per_layer=per_layer)
    with torch.no_grad():  # a trained-looking model: the resistance C terms are not zero
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    graphs = _graphs()
    with torch.no_grad():
        together = model(Batch.from_data_list(graphs))
        alone = torch.cat([model(Batch.from_data_list([g])) for g in graphs])
        single = model(graphs[0])  # a Data, no batch vector
    torch.testing.assert_close(together, alone, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(single, alone[:1], atol=1e-5, rtol=1e-5)


def test_urpe_starts_as_rpe_and_resistance_matters_once_trained():
    batch = Batch.from_data_list(_graphs())
    urpe = _model(relations=["spd", "resistance"], attention="urpe")
    rpe = _model(relations=["spd", "resistance"], attention="rpe")
    missing = rpe.load_state_dict(urpe.state_dict(), strict=False)
    assert all(k.startswith(("encoder.multiplier", "encoder.continuous_multiplier"))
               for k in missing.unexpected_keys) and not missing.missing_keys
    with torch.no_grad():
        torch.testing.assert_close(urpe(batch), rpe(batch))
        out = rpe(batch)
        rpe.encoder.continuous_bias.embeddings["resistance"].out.weight.mul_(50.0)
        assert not torch.allclose(rpe(batch), out)


def test_missing_relation_is_named_and_config_values_are_plain():
    data = _graphs()[0]
    del data.resistance
    with pytest.raises(ValueError, match="'resistance' is missing"):
        _model(relations=["spd", "resistance"])(Batch.from_data_list([data]))
    model = _model(relations=("spd", "resistance"))
    assert model.encoder.relations == ["spd", "resistance"]
    assert "relations=['spd', 'resistance']" in repr(model)
    with pytest.raises(ValueError, match="relations entry"):
        _model(relations=["rd"])


def test_prediction_inputs_carry_both_relations():
    """``graph-urpe predict`` featurizes with both relations, so a Graphormer-GD checkpoint
    predicts through a data module built without ``resistance``."""
    from graph_urpe.data.predict_inputs import featurize_inputs
    from graph_urpe.transforms import pair_pre_transform

    graphs, _ = featurize_inputs(["CCO", "c1ccccc1"], "ogb", None,
                                 pair_pre_transform(resistance=True), 0)
    graph = graphs[1]
    assert graph.resistance.shape == graph.spd.shape == (36,)
    assert graph.resistance.view(6, 6)[0, 3].item() == pytest.approx(1.5)  # 6-ring: 3 || 3
