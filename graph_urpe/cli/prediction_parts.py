"""The chunks of a ``graph-urpe predict`` output on disk: written as they are predicted, kept
across a kill, joined into the output file at the end.

``predict`` on a large input works through it in chunks of rows; each predicted chunk is written
at once (atomically) as ``<output>.parts/part-<k>.csv``, beside a ``manifest.json`` holding the
SHA-256 of the input's and the checkpoint's content, the chunk size and the columns. A later run
with the same manifest skips the chunks already written (a killed run resumes where it stopped);
a run with another input (also one with the same size and modification time), checkpoint or chunk
size starts over. When every chunk is written they are joined into ``<output>`` through a
temporary file renamed over it (a reader never sees a half-written output) and the parts folder is
removed. predict makes the parts folder with a marker file (:data:`MARK`) and removes or reuses
only a folder that holds it: a user's folder named ``<output>.parts`` is left as it is and the
command stops with one line. A chunk in which no input became a graph lacks the uncertainty columns a model may give
(``<target>_std`` ...): it gets empty cells there.
"""

from __future__ import annotations

import csv
import errno
import hashlib
import json
import os
import os.path as osp
import re
import shutil

import pandas as pd

from graph_urpe.files import OutputError, atomic_write, atomic_write_csv
from graph_urpe.owned import refuse_links

__all__ = ["MARK", "PredictionParts", "file_identity"]

MARK = "made-by-graph-urpe-predict"
"""The file predict writes into every parts folder it makes: a ``<output>.parts`` without it
(a user's folder of that name) is never removed nor reused."""


def file_identity(path: str | None) -> dict | None:
    """``{"sha256": ...}`` of a file's content (what makes a saved part stale: a copy of another
    file with the same size and modification time, ``cp -p``, is another input), or
    :obj:`None` for no file. One streaming read of the file (about 1 s per GB).

    Args:
        path (str, optional): the file (the input CSV, the checkpoint).

    Raises:
        OSError: the file exists but cannot be read.
    """
    if path is None or not osp.isfile(path):
        return None
    with open(path, "rb") as handle:
        return {"sha256": hashlib.file_digest(handle, "sha256").hexdigest()}


class PredictionParts:
    """The parts folder of one output file.

    Under DDP one process owns the folder (rank 0: it alone removes stale parts, writes the
    manifest, the chunks and the output); the other ranks only read it, and count a chunk as
    written only under their own manifest, so no two processes write or remove the same file and
    every rank skips the same chunks.

    Args:
        output (str): the final CSV.
        manifest (dict): what the parts depend on (plain JSON data: input and checkpoint
            content hashes, :func:`file_identity`; chunk size, columns). Parts written under
            another manifest are removed.
        owner (bool, optional): whether this process writes (:obj:`False`: the other DDP
            ranks; :meth:`write`, :meth:`finish` and :meth:`discard` are refused).
            (default: :obj:`True`)

    Attributes:
        folder (str): ``<output>.parts``.
        resumed (int): parts found from an earlier run with the same manifest.

    Raises:
        graph_urpe.files.OutputError: (the owner) ``<output>.parts`` exists without :data:`MARK`
            (a folder or file predict did not make: never removed nor reused), or is or holds a
            symbolic link (:func:`graph_urpe.owned.refuse_links`).
        RuntimeError: :meth:`write`, :meth:`finish` or :meth:`discard` called by a reader.
    """

    def __init__(self, output: str, manifest: dict, owner: bool = True) -> None:
        self.output = output
        self.folder = f"{output}.parts"
        self.manifest = json.loads(json.dumps(manifest))
        self.owner = bool(owner)
        if self.owner:
            self._claim()
        path = osp.join(self.folder, "manifest.json")
        previous = None
        if self._marked() and osp.isfile(path):
            try:
                with open(path, encoding="utf-8") as handle:
                    previous = json.load(handle)
            except (OSError, ValueError):
                previous = None
        # A reader trusts parts only under its own manifest: stale ones are (being) removed.
        self._trusted = self.owner or previous == self.manifest
        if self.owner and previous != self.manifest:
            shutil.rmtree(self.folder)  # its own, of another input, checkpoint or chunk size
            self._claim()
            with atomic_write(path) as handle:
                json.dump(self.manifest, handle, indent=1)
        self.resumed = len(self._written()) if self._trusted and self._marked() else 0

    def _marked(self) -> bool:
        """Whether the parts folder exists and holds :data:`MARK` (predict made it)."""
        return osp.isdir(self.folder) and osp.isfile(osp.join(self.folder, MARK))

    def _claim(self) -> None:
        """Make the parts folder with its :data:`MARK`, or check that the existing one has it."""
        if not osp.lexists(self.folder):
            try:
                os.makedirs(self.folder)
                with open(osp.join(self.folder, MARK), "x", encoding="utf-8") as handle:
                    handle.write(f"made by graph-urpe predict for {osp.abspath(self.output)}: "
                                 "its chunks, removed with this folder once the output is "
                                 "written\n")
            except OSError as err:
                raise OutputError(err.errno, f"cannot make {self.folder}: {err.strerror}; "
                                  "choose another --output") from None
            return
        refuse_links(self.folder, depth=0, what="parts folder")
        if not self._marked():
            raise OutputError(errno.EEXIST, (
                f"{self.folder} exists but predict did not make it (no {MARK} file in it): it "
                "is neither removed nor reused; move it away or choose another --output"))

    def _written(self) -> list[int]:
        return sorted(int(m.group(1)) for name in os.listdir(self.folder)
                      if (m := re.fullmatch(r"part-(\d+)\.csv", name)))

    def path(self, index: int) -> str:
        """The file of chunk ``index``."""
        return osp.join(self.folder, f"part-{index:07d}.csv")

    def done(self, index: int) -> bool:
        """Whether chunk ``index`` was written (by this run or a killed earlier one)."""
        return self._trusted and osp.isfile(self.path(index))

    def _own(self, what: str) -> None:
        if not self.owner:
            raise RuntimeError(f"only the owner of {self.folder} (DDP rank 0) may {what}")

    def write(self, index: int, table: pd.DataFrame) -> None:
        """Write chunk ``index`` atomically (a kill leaves it whole or absent).

        Raises:
            graph_urpe.files.OutputError: file-system errors (names the path).
        """
        self._own("write chunks")
        atomic_write_csv(table, self.path(index))

    def read(self, index: int) -> pd.DataFrame:
        """Chunk ``index`` as written (text columns as text, empty cells as ``""``)."""
        return pd.read_csv(self.path(index), keep_default_na=False, dtype=str)

    def discard(self) -> None:
        """Remove the parts folder (nothing to join); only a folder predict made (with its
        :data:`MARK`), checked again."""
        self._own("remove the parts")
        if self._marked():
            shutil.rmtree(self.folder, ignore_errors=True)

    def finish(self, count: int) -> None:
        """Join chunks ``0 .. count - 1`` into the output (header once), atomically, and remove
        the parts folder.

        Raises:
            RuntimeError: if a chunk is missing.
            graph_urpe.files.OutputError: file-system errors (names the path).
        """
        self._own("join the parts")
        if not self._marked():
            raise RuntimeError(f"{self.folder} lost its {MARK} file: not joined nor removed")
        missing = [i for i in range(count) if not self.done(i)]
        if missing:
            raise RuntimeError(f"prediction chunks {missing[:5]} are missing in {self.folder}")
        headers = []
        for i in range(count):
            with open(self.path(i), "rb") as part:
                headers.append(part.readline())
        # A chunk without any graph has no uncertainty columns (the model never ran on it):
        # the widest header is every chunk's, the narrower chunks get empty cells.
        widest = max(headers, key=lambda h: len(next(csv.reader([h.decode()]))))
        columns = next(csv.reader([widest.decode()]))
        with atomic_write(self.output, "wb") as out:
            out.write(widest)
            for i in range(count):
                if headers[i] != widest:
                    table = self.read(i).reindex(columns=columns, fill_value="")
                    out.write(table.to_csv(index=False, header=False).encode())
                    continue
                with open(self.path(i), "rb") as part:
                    part.readline()
                    shutil.copyfileobj(part, out, 1 << 20)
        shutil.rmtree(self.folder)
