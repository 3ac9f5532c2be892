"""String options are Literal types: one message in Python, validated by the CLI's parser; sizes
below their minimum get one message too."""

from __future__ import annotations

import pytest

from graph_urpe.choices import check_at_least, check_choice
from graph_urpe.cli import main
from graph_urpe.nn import Graphormer, SequenceTransformer, URPEGraphConv
from graph_urpe.nn.conv import Attention


def test_check_choice_names_the_option_and_its_values():
    check_choice("attention", "rpe", Attention)
    with pytest.raises(ValueError, match=r"^attention must be one of \('none', 'rpe', 'urpe'\), "
                                         r"got 'alibi'\.$"):
        check_choice("attention", "alibi", Attention)


def test_check_at_least_names_every_size_and_its_minimum():
    check_at_least(1, num_layers=1, num_heads=4)
    with pytest.raises(ValueError, match=r"^num_layers, num_heads and max_hops must be >= 1, got "
                                         r"num_layers=2, num_heads=0, max_hops=3\.$"):
        check_at_least(1, num_layers=2, num_heads=0, max_hops=3)
    with pytest.raises(ValueError, match=r"^seed must be >= 0, got seed=-1\.$"):
        check_at_least(0, seed=-1)


@pytest.mark.parametrize("build", [
    lambda: URPEGraphConv(8, 2, attention="alibi"),
    lambda: Graphormer(1, 4, attention="alibi", edge_encoding="none", num_layers=1),
    lambda: SequenceTransformer(5, attention="alibi"),
])
def test_graph_and_sequence_models_share_the_attention_switch(build):
    with pytest.raises(ValueError, match="attention must be one of"):
        build()


def test_cli_refuses_a_wrong_choice_while_parsing_and_lists_the_choices(capsys):
    with pytest.raises(SystemExit) as info:
        main(["fit", "--model.init_args.model.init_args.attention", "alibi", "--print_config"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "alibi" in err and "urpe" in err and "rpe" in err
