"""``python -m graph_urpe.cli``: the same as ``graph-urpe``."""

from graph_urpe.cli import main

main()
