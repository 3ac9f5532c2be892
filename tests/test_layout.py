"""The package's layering, read from the source with :mod:`ast` (issue 40).

Nodes are the sub-packages of ``graph_urpe`` (``nn``, ``data``, ``models``, ``cli``, ...) and its
top-level modules; an edge ``a -> b`` is any import, at module level or inside a function, of
``graph_urpe.b`` by a file of ``a``. The graph must have no cycle (no folder-level import loop),
and ``nn`` (what a PyG user imports) must not reach ``data``, ``models`` or ``cli``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent / "graph_urpe"


def _node(module: str) -> str | None:
    parts = module.split(".")
    if len(parts) < 2 or parts[0] != "graph_urpe":
        return None
    if (ROOT / parts[1]).is_dir() or (ROOT / f"{parts[1]}.py").is_file():
        return parts[1]
    return None


def _import_graph() -> nx.DiGraph:
    graph = nx.DiGraph()
    for path in ROOT.rglob("*.py"):
        source = _node(".".join(path.relative_to(ROOT.parent).with_suffix("").parts))
        if source is None:  # graph_urpe/__init__.py
            continue
        graph.add_node(source)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for target in filter(None, map(_node, targets)):
                if target != source:
                    graph.add_edge(source, target, file=str(path.relative_to(ROOT.parent)))
    return graph


def test_graph_sees_known_edges():
    graph = _import_graph()
    # hand-checked facts of today's tree: the CLI reads models and data; nn is imported by models
    assert graph.has_edge("cli", "models") and graph.has_edge("cli", "data")
    assert graph.has_edge("models", "nn")
    assert {"nn", "data", "models", "cli", "pretrained"} <= set(graph)


def test_no_folder_level_import_loop():
    graph = _import_graph()
    cycles = list(nx.simple_cycles(graph))
    where = [" -> ".join(c + c[:1]) + " (" + ", ".join(
        graph.edges[a, b]["file"] for a, b in zip(c, c[1:] + c[:1])) + ")" for c in cycles[:5]]
    assert not cycles, "folder-level import loops: " + "; ".join(where)


def test_nn_does_not_reach_upper_floors():
    graph = _import_graph()
    reached = nx.descendants(graph, "nn")
    assert not reached & {"data", "models", "cli"}, sorted(reached)


def test_importing_the_layers_loads_only_torch_and_pyg():
    # what a PyG user imports must not pull the training stack (Lightning, RDKit, scikit-learn,
    # jsonargparse, OGB) nor graph_urpe's data / models / cli floors
    import subprocess
    import sys

    code = ("import sys, graph_urpe.nn, graph_urpe.transforms; "
            "print(' '.join(sorted(sys.modules)))")
    loaded = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                check=True).stdout.split())
    tops = {name.split(".")[0] for name in loaded}
    assert not tops & {"lightning", "pytorch_lightning", "rdkit", "sklearn", "jsonargparse",
                       "ogb", "optuna", "captum"}, sorted(tops)
    assert {"torch", "torch_geometric", "graph_urpe"} <= tops
    floors = {name.split(".")[1] for name in loaded if name.startswith("graph_urpe.")}
    assert not floors & {"data", "models", "cli"}, sorted(floors)


def test_the_layout_page_names_every_module():
    # README's "layout of the package" (docs/layout.md) must match the tree: every module of
    # graph_urpe/ is named there (a new module without its line fails here).
    page = (ROOT.parent / "docs" / "layout.md").read_text()
    unnamed = [str(p.relative_to(ROOT)) for p in sorted(ROOT.rglob("*.py"))
               if p.name not in ("__init__.py", "__main__.py") and p.name not in page]
    assert not unnamed, unnamed
