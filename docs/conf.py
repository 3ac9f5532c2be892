"""Sphinx configuration of graph-urpe's documentation (``sphinx-build -W --keep-going -b html docs
OUT``; built by ``tests/test_docs.py`` and on Read the Docs by ``.readthedocs.yaml``).

Sphinx, as PyG and Lightning use it: autodoc + autosummary read the API reference from the
docstrings, napoleon their Google-style ``Args:`` / ``Returns:`` / ``Shapes:`` sections, MyST the
Markdown pages (the former README's text), and the local extension ``_ext/cli_help.py`` writes the
CLI reference from the ``graph-urpe`` parsers at build time.
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))
sys.path.insert(0, str(DOCS.parent))  # the checkout's graph_urpe, installed or not

import graph_urpe

project = "graph-urpe"
author = "graph-urpe contributors"
copyright = "2026, graph-urpe contributors"
release = version = graph_urpe.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "myst_parser",
    "cli_help",
    "api_refs",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
templates_path = ["_templates"]

# MyST: `#`-anchors for headings (cross-page links to sections), $...$ maths, ::: fences.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "dollarmath"]

# autodoc / autosummary: one page per public object, members in source order.
autosummary_generate = True
autosummary_imported_members = False
autodoc_default_options = {"members": True, "member-order": "bysource", "show-inheritance": True}
autodoc_typehints = "description"
autodoc_typehints_description_target = "documented_params"
autodoc_class_signature = "separated"
autoclass_content = "class"
add_module_names = False

# napoleon: Google style, as PyG writes it; `Shapes:` (input / output shapes) as its own section.
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_custom_sections = ["Shapes"]
napoleon_use_rtype = False

html_theme = "furo"
html_title = f"graph-urpe {release}"
html_static_path = ["_static"]
html_css_files = ["wide.css"]  # 100-column code and help fit
autodoc_inherit_docstrings = False  # document graph-urpe, not the Lightning / torch parents
