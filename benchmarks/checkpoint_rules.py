"""Which weights should a CSV fit test and predict with? Checkpoint rules compared on the peer
benchmark's sets (issue 41): the epoch the template tests today against averages of epochs.

Each run is the CSV template as it ships (``graph-urpe fit``, the peer benchmark's prepared set
and scaffold split, ``benchmarks/peers/chemprop.py``, one thread), with one addition for this
measurement only: after every validation pass the module's weights are written to
``<run>/epoch_weights/NN.pt`` (the run's own checkpoints are unchanged). Afterwards the run's
``last.ckpt`` is loaded once (:class:`graph_urpe.Predictor`, which also holds the in-fit ECFP4
SVM and forest), and for each epoch's weights the network predicts the validation and test rows
(``<target>_network``). Rules, each choosing from the validation rows only:

* ``tested``: what the template tests (``test_checkpoint: auto``): the best epoch by the
  validation metric for classification, the last for regression;
* ``last``; ``best``: the best epoch by the validation metric (ROC-AUC, or MAE);
* ``top5_mean``: the predictions of the five best epochs by the validation metric, averaged;
* ``top5_soup``: one network whose weights are the average of those five epochs' weights
  (a uniform "model soup" of checkpoints, Wortsman et al., ICML 2022);
* ``tail10_soup``: the average of the last ten epochs' weights (stochastic weight averaging's
  form, Izmailov et al., UAI 2018, on the template's own decaying schedule);
* ``all_soup``: the average of epochs 5 to the last.

For each rule the network's test metric and that of the blend (for regression also the blend's
test RMSE) (the weights of network, SVM and
forest chosen on the validation rows by the fit's rule with those weights' validation
predictions: :func:`graph_urpe.models.blend.blend_weights` for regression, the pool of
standardised logits for classification, :func:`graph_urpe.models.logit_pool.fit_pool`, since
section 31; section 30c's classification columns used the linear blend of probabilities) are
reported, means over seeds.

Usage::

    python benchmarks/checkpoint_rules.py --out /work/scratch/clintox/out --sets clintox bace bbbp \\
        --seeds 0 1 2 --runs /work/scratch/rules     # OUT: peers/chemprop.py's --out (its sets)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("chemprop_bench", HERE / "peers" / "chemprop.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

RULES = ("tested", "last", "best", "top5_mean", "top5_soup", "tail10_soup", "all_soup")
TOP, TAIL, FIRST = 5, 10, 5


def worker(argv: list[str]) -> None:
    """``graph-urpe fit`` with the epoch weights written after each validation pass."""
    import torch
    from lightning.pytorch.callbacks import Callback

    from graph_urpe.cli import lightning_cli

    class EpochWeights(Callback):
        def __init__(self, folder: str) -> None:
            self.folder = folder

        def on_validation_end(self, trainer, pl_module) -> None:
            if not trainer.sanity_checking:
                os.makedirs(self.folder, exist_ok=True)
                torch.save(pl_module.state_dict(),
                           os.path.join(self.folder, f"{trainer.current_epoch:02d}.pt"))

    own = lightning_cli.fit_callbacks

    def fit_callbacks(config, model, datamodule, run_folder, user_callbacks):
        return own(config, model, datamodule, run_folder, user_callbacks) + [
            EpochWeights(os.path.join(run_folder.run_dir, "epoch_weights"))]

    lightning_cli.fit_callbacks = fit_callbacks
    from graph_urpe.cli import main

    main(argv)


def fit(folder: Path, task: str, seed: int, run_root: Path) -> Path:
    """One template fit with epoch weights (unless its log says it finished); its run folder."""
    import re

    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "fit",
           "--config", str(bench.TEMPLATE), "--data.init_args.path", str(folder / "data.csv"),
           "--data.init_args.target_columns", "[target]", "--data.init_args.task", task,
           "--data.init_args.split", "split", "--data.init_args.root", str(run_root / "data"),
           "--seed_everything", str(seed), "--name", "run",
           "--trainer.default_root_dir", str(run_root), "--trainer.enable_progress_bar", "false"]
    env = dict(os.environ, **bench.ONE_THREAD,
               PYTHONPATH=str(bench.ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    log = run_root.with_suffix(".log")
    run_root.parent.mkdir(parents=True, exist_ok=True)
    if not (log.exists() and re.search(r"^Run folder: ", log.read_text(), re.MULTILINE)):
        bench.run_measured(cmd, log, bench.ROOT, env)  # else: a finished fit, analysed again
    found = re.findall(r"^Run folder: (\S+)", log.read_text(), re.MULTILINE)
    if not found:
        raise SystemExit(f"no 'Run folder:' line in {log}")
    return Path(found[-1])


def analyse(run_dir: Path, folder: Path, task: str, metric: str) -> dict:
    """Every rule's test metric (network and blend) for one run."""
    import torch

    from graph_urpe import Predictor
    from graph_urpe.models.blend import blend, blend_weights
    from graph_urpe.models.logit_pool import fit_pool, pooled

    data, rows = bench.read_split(folder)
    smiles = {s: data["smiles"].iloc[rows[s]].tolist() for s in ("valid", "test")}
    y = {s: data["target"].to_numpy(float)[rows[s]] for s in ("valid", "test")}
    model = Predictor.from_checkpoint(str(run_dir / "checkpoints" / "last.ckpt"))
    members, epochs, tables = {}, {}, {}
    for s in ("valid", "test"):
        tables[s] = model.predict(smiles[s])
        members[s] = np.stack([tables[s][c].to_numpy(float) for c in
                               ("target_ecfp_svm", "target_ecfp_rf") if c in tables[s]], 1)
    files = sorted((run_dir / "epoch_weights").glob("*.pt"))
    weights = [torch.load(f, map_location="cpu", weights_only=True) for f in files]

    # The splits' batches once (featurised by the Predictor, ``_batches``); per weights only the
    # network's forward (``predict_outputs``: the network's prediction, before the blend).
    batches = {s: list(model._batches(smiles[s])[3]) for s in smiles}

    @torch.inference_mode()
    def network(state) -> dict[str, np.ndarray]:
        model.module.load_state_dict(state)
        out = {}
        for s, parts in batches.items():
            pred = np.full(len(smiles[s]), np.nan)
            for batch in parts:
                value = model.module.predict_outputs(batch)["prediction"].float()[:, 0]
                pred[batch.sample_id.cpu().numpy()] = value.cpu().numpy()
            out[s] = pred
        return out

    def soup(chosen) -> dict[str, np.ndarray]:
        return network({k: sum(weights[e][k].double() for e in chosen).div(len(chosen))
                        .to(v.dtype) for k, v in weights[chosen[0]].items()})

    for e, state in enumerate(weights):
        epochs[e] = network(state)
    if not np.allclose(epochs[len(weights) - 1]["test"],  # the last weights are last.ckpt's
                       tables["test"]["target_network"].to_numpy(float), atol=1e-6,
                       equal_nan=True):
        raise SystemExit(f"{run_dir}: the last epoch's weights do not give last.ckpt's network")
    val = np.array([bench.score(metric, y["valid"], epochs[e]["valid"]) for e in epochs])
    order = np.argsort(-val if metric == "rocauc" else val, kind="stable")
    last, best, top = len(weights) - 1, int(order[0]), [int(e) for e in order[:TOP]]
    preds = {"last": epochs[last], "best": epochs[best],
             "top5_mean": {s: np.mean([epochs[e][s] for e in top], 0) for s in y},
             "top5_soup": soup(top), "tail10_soup": soup(list(range(last - TAIL + 1, last + 1))),
             "all_soup": soup(list(range(FIRST, last + 1)))}
    preds["tested"] = preds["best" if task == "classification" else "last"]
    out = {"best_epoch": best, "top5": top}
    for rule in RULES:
        p = preds[rule]
        if task == "classification":  # the pool of standardised logits
            w, factors = fit_pool(p["valid"][:, None], members["valid"][:, None, :],
                                  y["valid"][:, None])
            mixed = pooled(p["test"][:, None], members["test"][:, None, :], w, factors)[:, 0]
        else:
            w = blend_weights(p["valid"][:, None], members["valid"][:, None, :],
                              y["valid"][:, None], task)
            mixed = blend(p["test"][:, None], members["test"][:, None, :], w)[:, 0]
        out[rule] = bench.score(metric, y["test"], p["test"])
        out[f"{rule}+blend"] = bench.score(metric, y["test"], mixed)
        out[f"{rule} val"] = bench.score(metric, y["valid"], p["valid"])
        if task == "regression":
            out[f"{rule}+blend rmse"] = float(np.sqrt(np.mean((mixed - y["test"]) ** 2)))
    return out


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2:])
        return
    from _common import markdown_table

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True,
                        help="peers/chemprop.py's --out (its prepared sets)")
    parser.add_argument("--sets", nargs="+", choices=sorted(bench.SETS), required=True)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--runs", type=Path, required=True, help="where the fits go")
    args = parser.parse_args()
    table, rmse_rows = [], []
    for name in args.sets:
        _, task, metric = bench.SETS[name]
        folder = args.out.resolve() / "sets" / name
        results = []
        for seed in args.seeds:
            record = args.runs / name / f"seed{seed}.json"
            if not record.exists():
                run_dir = fit(folder, task, seed, args.runs.resolve() / name / f"seed{seed}")
                record.write_text(json.dumps(analyse(run_dir, folder, task, metric)))
            results.append(json.loads(record.read_text()))
            print(name, seed, json.dumps(results[-1]), flush=True)
        table.append([name, "MAE" if metric == "mae" else "ROC-AUC", str(len(results))] + [
            f"{statistics.fmean(r[rule] for r in results):.3f} / "
            f"{statistics.fmean(r[f'{rule}+blend'] for r in results):.3f}" for rule in RULES])
        if all(f"{RULES[0]}+blend rmse" in r for r in results) and task == "regression":
            rmse_rows.append((name, results))
    print("\nnetwork / blend, test, means over seeds\n")
    print(markdown_table(["set", "metric", "seeds", *RULES], table))
    rmse = [[name, str(len(rs))] + [f"{statistics.fmean(r[f'{rule}+blend rmse'] for r in rs):.3f}"
                                    for rule in RULES]
            for name, rs in rmse_rows]
    if rmse:
        print("\nblend, test RMSE (regression), means over seeds\n")
        print(markdown_table(["set", "seeds", *RULES], rmse))


if __name__ == "__main__":
    main()
