"""The optional matplotlib import, with the Agg (file-only) backend and one clear error if missing."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

INSTALL_HINT = "pip install 'graph-urpe[plot]'"


def pyplot() -> ModuleType:
    """``matplotlib.pyplot`` on the Agg backend (draws to files; needs no screen).

    Raises:
        ImportError: if matplotlib is not installed; the message says how to install it.
    """
    try:
        import matplotlib
    except ImportError as err:
        raise ImportError(f"graph-urpe's figures need matplotlib: {INSTALL_HINT}") from err
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def save(fig, out_path: str | Path, dpi: int = 120) -> Path:
    """Write ``fig`` to ``out_path`` (PNG; parent folders created) atomically and close it.

    The figure is drawn to a temporary name beside the target and renamed, so a reader never sees a
    half-written file.
    """
    plt = pyplot()
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    try:
        fig.savefig(tmp, dpi=dpi, bbox_inches="tight", format=out.suffix.lstrip(".") or "png")
        tmp.replace(out)
    finally:
        plt.close(fig)
        tmp.unlink(missing_ok=True)
    return out
