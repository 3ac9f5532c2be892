"""String options are Literal types: one message in Python, validated by the CLI's parser."""

from __future__ import annotations

import pytest

from graph_urpe.choices import check_choice
from graph_urpe.cli import main
from graph_urpe.nn import Graphormer, SequenceTransformer, URPEGraphConv
from graph_urpe.nn.layers import Attention


def test_check_choice_names_the_option_and_its_values():
    check_choice("attention", "rpe", Attention)
    with pytest.raises(ValueError, match=r"^attention must be one of \('none', 'rpe', 'urpe'\), "
                                         r"got 'alibi'\.$"):
        check_choice("attention", "alibi", Attention)


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
