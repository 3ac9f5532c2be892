"""``python -m graph_urpe.cli``: the same as ``graph-urpe``. Importing this module runs nothing
(only ``python -m`` does)."""

from graph_urpe.cli import program

if __name__ == "__main__":
    program()
