"""``graph-urpe predict`` against ``chemprop predict`` (2.3.1) on the same MOSES molecules: CPU
seconds, wall seconds and peak RSS of each command, one thread each, side by side (issue 42
item 4).

Both tools get a model trained here on the same small labelled file (``--train`` MOSES molecules
after the first ``--molecules``, RDKit's Crippen logP as the label, two epochs for graph-urpe, three for Chemprop (its warm-up is two): the speed of
``predict`` does not depend on how well the model learned): graph-urpe's CSV template as it ships
(fine-tuned from its encoder, with the in-fit ECFP4 SVM, so its ``predict`` also writes the blend,
the SVM's prediction and the nearest training molecule), Chemprop's defaults (D-MPNN depth 3,
width 300). Then each predicts the first ``--molecules`` MOSES SMILES from one CSV (column
``smiles``), as its documentation says (graph-urpe ``predict --ckpt_path ... --csv ...``;
Chemprop ``predict --test-path ... --model-paths ...``), interleaved ``--repeats`` times;
``graph-urpe, network only`` is the same checkpoint without its classical model (no ECFP4, SVM,
blend or nearest training molecule), to show what those cost.
Each command runs as a child process with ``OMP_NUM_THREADS=1`` / ``MKL_NUM_THREADS=1``; its CPU
time (user + system) and peak RSS come from :func:`os.wait4` (the child and the descendants it
waited for). Prints one JSON line per run and a markdown table with the ratio graph-urpe /
Chemprop.

Usage (Chemprop's virtual environment: ``python benchmarks/peers/chemprop.py --setup --venv
/work/chemprop-venv``; MOSES: see ``benchmarks/scale.py``)::

    python benchmarks/peers/predict_scale.py --moses /tmp/moses/moses/dataset/data/train.csv.gz \\
        --venv /work/chemprop-venv --work /tmp/predict_scale --molecules 100000
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # peers/chemprop.py, benchmarks/_common.py
from _common import markdown_table
from chemprop import ONE_THREAD, ROOT, TEMPLATE


def measured(cmd: list[str], log: Path, env: dict) -> dict:
    """Runs :obj:`cmd` (output to :obj:`log`); its CPU s, wall s and peak RSS (MB)."""
    import subprocess

    start = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"`{' '.join(cmd)}` failed; see {log}")
    return {"cpu_s": usage.ru_utime + usage.ru_stime, "wall_s": wall,
            "peak_rss_mb": usage.ru_maxrss / 1024}


def write_inputs(moses: str, molecules: int, train: int, work: Path) -> tuple[Path, Path]:
    """``query.csv`` (the first :obj:`molecules` SMILES) and ``train.csv`` (the next
    :obj:`train`, with Crippen logP as ``target``)."""
    import pandas as pd
    from rdkit import Chem
    from rdkit.Chem import Crippen

    query, labelled = work / f"query_{molecules}.csv", work / f"train_{train}.csv"
    if not (query.exists() and labelled.exists()):
        frame = pd.read_csv(moses, nrows=molecules + train)
        frame.iloc[:molecules].rename(columns={"SMILES": "smiles"})[["smiles"]].to_csv(
            query, index=False)
        rest = frame.iloc[molecules:].rename(columns={"SMILES": "smiles"})[["smiles"]].copy()
        rest["target"] = [Crippen.MolLogP(Chem.MolFromSmiles(s)) for s in rest["smiles"]]
        rest.to_csv(labelled, index=False)
    return query, labelled


def train_models(labelled: Path, work: Path, venv: Path, env: dict) -> tuple[Path, Path]:
    """Short-trained models of both tools on :obj:`labelled`: graph-urpe's checkpoint, Chemprop's
    model folder."""
    ours = work / "ours" / "run" / "version_0" / "checkpoints" / "last.ckpt"
    if not ours.exists():
        measured([sys.executable, "-m", "graph_urpe.cli", "fit", "--config", str(TEMPLATE),
                  "--data.init_args.path", str(labelled), "--data.init_args.root",
                  str(work / "ours" / "data"), "--name", "run", "--trainer.default_root_dir",
                  str(work / "ours"), "--trainer.max_epochs", "2",
                  "--trainer.enable_progress_bar", "false"], work / "ours_fit.log", env)
    theirs = work / "chemprop"
    if not (theirs / "model_0" / "best.pt").exists():
        measured([str(venv / "bin" / "chemprop"), "train", "--data-path", str(labelled),
                  "--task-type", "regression", "--smiles-columns", "smiles", "--target-columns",
                  "target", "--epochs", "3", "-o", str(theirs)], work / "chemprop_fit.log", env)
    return ours, theirs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--moses", required=True, help="MOSES train.csv.gz")
    parser.add_argument("--venv", type=Path, required=True, help="Chemprop's virtual environment")
    parser.add_argument("--work", type=Path, default=Path("predict_scale"))
    parser.add_argument("--molecules", type=int, default=100_000)
    parser.add_argument("--train", type=int, default=1_000)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--tools", nargs="+", default=["graph-urpe", "graph-urpe, network only",
                                                       "chemprop"],
                        help="which commands to run (default: all three)")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, **ONE_THREAD,
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    query, labelled = write_inputs(args.moses, args.molecules, args.train, args.work)
    ours, theirs = train_models(labelled, args.work, args.venv, env)
    network_only = args.work / "ours_network_only.ckpt"  # no classical model: no blend, no
    if not network_only.exists():                       # ECFP4, no nearest training molecule
        import torch

        ckpt = torch.load(ours, weights_only=True)
        ckpt["callbacks"].pop("ClassicalBaseline", None)
        torch.save(ckpt, network_only)
    commands = {
        "graph-urpe": [sys.executable, "-m", "graph_urpe.cli", "predict", "--ckpt_path",
                       str(ours), "--csv", str(query), "--output",
                       str(args.work / "ours_predictions.csv")],
        "graph-urpe, network only": [
            sys.executable, "-m", "graph_urpe.cli", "predict", "--ckpt_path", str(network_only),
            "--csv", str(query), "--output", str(args.work / "ours_network_predictions.csv")],
        "chemprop": [str(args.venv / "bin" / "chemprop"), "predict", "--test-path", str(query),
                     "--smiles-columns", "smiles", "--model-paths", str(theirs), "-o",
                     str(args.work / "chemprop_predictions.csv")],
    }
    commands = {tool: cmd for tool, cmd in commands.items() if tool in args.tools}
    rows = []
    for repeat in range(args.repeats):
        for tool, cmd in commands.items():
            output = Path(cmd[cmd.index("-o" if tool == "chemprop" else "--output") + 1])
            for stale in (output, Path(f"{output}.parts")):
                if stale.is_file():
                    stale.unlink()
            record = {"tool": tool, "repeat": repeat, "molecules": args.molecules,
                      **measured(cmd, args.work / f"{tool}_predict_{repeat}.log", env)}
            record["output_mb"] = output.stat().st_size / 2**20
            record["load"] = os.getloadavg()[0]
            print(json.dumps(record), flush=True)
            rows.append(record)
    table = []
    for tool in commands:
        mine = [r for r in rows if r["tool"] == tool]
        cpu = min(r["cpu_s"] for r in mine)
        table.append([tool, f"{args.molecules:,}", f"{cpu:.0f}",
                      f"{min(r['wall_s'] for r in mine):.0f}", f"{args.molecules / cpu:.0f}",
                      f"{max(r['peak_rss_mb'] for r in mine):.0f}", f"{mine[0]['output_mb']:.1f}"])
    print(markdown_table(["tool", "molecules", "CPU s (best)", "wall s (best)",
                          "molecules / CPU s", "peak RSS MB", "output MB"], table))
    if {"graph-urpe", "chemprop"} <= set(commands):
        ratio = (min(r["cpu_s"] for r in rows if r["tool"] == "graph-urpe")
                 / min(r["cpu_s"] for r in rows if r["tool"] == "chemprop"))
        print(f"\nCPU graph-urpe / Chemprop: {ratio:.2f}")


if __name__ == "__main__":
    main()
