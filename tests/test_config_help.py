"""Issue 43 item 3: help that agrees with the run (:mod:`graph_urpe.cli.config_help`).

``fit --config csv/template --help`` showed the package base's data module, and ``--data.help
CSVDataModule`` the class's ``split: random`` where the template trains with ``scaffold``.
"""

from __future__ import annotations

import pytest
import yaml

from graph_urpe.cli import main
from graph_urpe.cli.config_help import (
    class_help_option,
    configured_values_note,
    help_config_files,
    help_epilog,
)
from graph_urpe.cli.configs import DEFAULT_CONFIG, resolve_config


def _help(args, capsys, monkeypatch):
    monkeypatch.setenv("GRAPH_URPE_HELP_CACHE", "0")  # built live, not read from a cache
    with pytest.raises(SystemExit) as stop:
        main(args)
    assert stop.value.code in (0, None)
    return capsys.readouterr().out


def test_template_help_shows_its_defaults_and_the_commands_for_its_classes(capsys, monkeypatch):
    out = _help(["fit", "--config", "csv/template", "--help"], capsys, monkeypatch)
    data = out[out.index("  --data CONFIG"):]
    data = " ".join(data[:data.index("known")].split())  # the --data entry, unwrapped
    assert "'class_path': 'graph_urpe.data.modules.molecule.CSVDataModule'" in data
    assert "'split': 'scaffold'" in data and "'batch_size': 64" in data
    assert "ZincLikeDataModule'" not in data  # the package base's data module, shown before
    assert out.rstrip().splitlines()[-5:] == [
        "(graph_urpe.data.modules.molecule.CSVDataModule) and its values for them:",
        "  graph-urpe fit --config csv/template --data.help CSVDataModule",
        "The model options of this configuration",
        "(graph_urpe.models.graph.GraphPropertyModule) and its values for them:",
        "  graph-urpe fit --config csv/template --model.help GraphPropertyModule",
    ]


def test_class_help_after_a_config_names_the_values_it_sets(capsys, monkeypatch):
    out = _help(["fit", "--config", "csv/template", "--data.help", "CSVDataModule"], capsys,
                monkeypatch)
    note, rest = out.split("\n\n", 1)
    note = " ".join(note.split())
    # The template's values that differ from CSVDataModule's defaults, and only those.
    assert note == ("--config csv/template sets these options of graph_urpe.data.modules."
                    "molecule.CSVDataModule, which replace the defaults listed below: path: "
                    "my_molecules.csv; split: scaffold; batch_size: 64; max_graph_nodes: 1448. "
                    "(The whole configuration: graph-urpe fit --config csv/template "
                    "--print_config)")
    assert rest.startswith("usage: graph-urpe --data.path PATH")


def test_the_pieces(tmp_path):
    template = resolve_config("csv/template")
    assert help_config_files(["fit", "--config", template, "--help"]) == [template]
    assert help_config_files(["fit", "--help", "--config", template]) == []  # after: not read
    assert help_config_files(["fit", "--config", template]) == []  # no help asked
    assert help_config_files(["fit", "--config", "{name: x}", "--help"]) == []  # inline
    assert class_help_option(["fit", "--data.help", "CSVDataModule"]) == ("data", "CSVDataModule")
    assert class_help_option(["fit", "--model.init_args.model.help=Graphormer"]) == (
        "model.init_args.model", "Graphormer")
    assert class_help_option(["fit", "--help"]) is None
    mine = tmp_path / "mine.yaml"
    zinc = "graph_urpe.data.modules.ZINCDataModule"
    mine.write_text(yaml.safe_dump({"data": {"class_path": zinc}}))
    assert help_epilog([DEFAULT_CONFIG, str(mine)], ["fit", "--config", "mine.yaml", "-h"]) \
        .splitlines()[-3:] == [
            "The model options of this configuration",
            "(graph_urpe.models.graph.GraphPropertyModule) and its values for them:",
            "  graph-urpe fit --config mine.yaml --model.help GraphPropertyModule"]
    # Another class than the configuration's: no note (its values are not that class's).
    printed = yaml.safe_dump({"data": {"class_path": zinc, "init_args": {"subset": False}}})
    assert configured_values_note(["fit", "--config", str(mine), "--data.help", "CSVDataModule"],
                                  ["fit"], lambda args: printed) is None
    assert configured_values_note(["fit", "--data.help", "CSVDataModule"], ["fit"],
                                  lambda args: printed) is None  # no --config
