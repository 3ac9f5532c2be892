"""Out-of-fold relative weights of the classical members (SVC vs forest) in the pool of
standardised logits, compared offline with the current pool on the runs of peers/chemprop.py
(issue 41; ``benchmarks/README.md`` section 34: not adopted).

Phase 1 (per run, cached to CACHE/<set>-seed<k>.npz): the tested checkpoint predicts its
validation and test rows (graph_urpe.Predictor, as benchmarks/blend_rules.py); the classical model
is refitted on the checkpoint's training rows (ClassicalModel.fit, same seed) and checked against
the in-fit members' validation predictions; then the out-of-fold predictions on the training rows:
the SVC's cross-validated decision values (StratifiedKFold(5, shuffle=True, random_state=seed),
the folds CalibratedClassifierCV uses for Platt, checked by refitting Platt's A, B on them) mapped
to Platt logits, and the forest's out-of-bag probabilities (same trees as Forest.fit).

Phase 2: rules (ROC-AUC on test; every choice from training / validation rows):
  net, svc, rf        each member alone
  pool                the current pool (fit_pool on validation; rule `pool` of blend_rules.py)
  pool_prior          the prior's weights (0.5, 0.25, 0.25)
  oof                 r = (SVC, forest) share from the OOF training rows (pool_weight on the
                      OOF-standardised logits, bagged ROC-AUC, shrunk to 0.5/0.5 by m_train vs 20);
                      network share w0 on validation: pool_weight of [z_net, r.z_members]
                      (bagged ROC-AUC, shrunk to 0.5 by m_valid vs 20);
                      weights (w0, (1-w0) r_svc, (1-w0) r_rf)
  oof_half            r from OOF, w0 = 0.5 (the prior)
  members_oof         diagnostic: r from OOF, w0 = 0 (the members' combination alone)

    python benchmarks/blend_oof.py --out OUT --sets bace bbbp clintox   # OUT of peers/chemprop.py
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from pathlib import Path

import numpy as np
import pandas as pd
from blend_rules import MEMBER_COLUMNS, set_runs, tested_checkpoint

CPU_WEIGHT: list[float] = []
RULES = ("net", "svc", "rf", "pool", "pool_prior", "oof", "oof_half", "members_oof")


def forest_oob(trees, bits: np.ndarray) -> np.ndarray:
    """Out-of-bag probability of class 1 of each training row over ``trees`` (sklearn's
    ``oob_decision_function_`` restricted to these trees; NaN for a row in every bag)."""
    from sklearn.ensemble._forest import _generate_unsampled_indices

    n = len(bits)
    total, count = np.zeros(n), np.zeros(n)
    for tree in trees:
        rows = _generate_unsampled_indices(tree.random_state, n, n, None)
        total[rows] += tree.predict_proba(bits[rows].astype(np.float32))[:, 1]
        count[rows] += 1
    with np.errstate(invalid="ignore"):
        return total / count


def compute_run(log: Path, data: pd.DataFrame, seed: int) -> dict:
    from sklearn.calibration import _SigmoidCalibration
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    from sklearn.svm import SVC

    from graph_urpe import Predictor
    from graph_urpe.data.fingerprints import ecfp4, pack_bits, tanimoto_kernel, unpack_bits
    from graph_urpe.models.classical import ClassicalModel, fit_task
    from graph_urpe.models.forest import Forest

    ckpt = tested_checkpoint(log)
    model = Predictor.from_checkpoint(str(ckpt))
    out: dict = {}
    for split in ("valid", "test"):
        frame = data[data["split"] == split]
        table = model.predict(frame["smiles"].tolist())
        ok = (table["error"].astype(str) == "").to_numpy()
        network = "target_network" if "target_network" in table else "target_pred"
        out[f"{split}_net"] = table.loc[ok, network].to_numpy(float)
        out[f"{split}_members"] = table.loc[ok, list(MEMBER_COLUMNS)].to_numpy(float)
        out[f"{split}_y"] = frame["target"].to_numpy(float)[ok]
        out[f"{split}_smiles"] = np.array(frame["smiles"].to_numpy()[ok], dtype=str)
        out[f"{split}_pred"] = table.loc[ok, "target_pred"].to_numpy(float)
    cm = model.classical
    bits, rows = unpack_bits(cm.train_fingerprints), cm.train_rows
    # the training rows are the run's: splits.csv of its run folder
    run_dir = ckpt.parents[1] if ckpt.parent.name == "checkpoints" else ckpt.parent
    splits = pd.read_csv(run_dir / "splits.csv", keep_default_na=False) \
        if (run_dir / "splits.csv").exists() else None
    if splits is not None:
        assert np.array_equal(np.sort(splits.loc[splits["split"] == "train", "row"]),
                              np.sort(rows)), "training rows differ from splits.csv"
    assert np.array_equal(np.sort(rows), np.flatnonzero(data["split"].to_numpy() == "train"))
    y = data["target"].to_numpy(float)[rows]
    assert np.array_equal(ecfp4(data["smiles"].to_numpy()[rows[:50]]), bits[:50])

    labels = y.astype(np.int64)
    kernel = tanimoto_kernel(bits, bits)
    start = time.process_time()
    entry = fit_task(kernel, y, "classification", seed)
    trees = cm.forests[0].num_trees  # the in-fit forest's size (node budget), checked below
    rf = RandomForestClassifier(trees, random_state=seed, n_jobs=1).fit(bits, labels)
    out["cpu_refit"] = time.process_time() - start
    refit = ClassicalModel("classification", pack_bits(bits), rows, [entry],
                           forests=[Forest.from_estimators(rf.estimators_)])
    valid_bits = ecfp4(out["valid_smiles"])
    again = refit.predict(valid_bits)[:, 0, :]
    out["check_refit_valid"] = np.abs(again[:, 0] - out["valid_members"][:, 0]).max()
    out["check_forest_valid"] = np.abs(again[:, 1] - out["valid_members"][:, 1]).max()
    for key in ("C", "platt_a", "platt_b", "intercept"):
        assert abs(entry[key] - cm.tasks[0][key]) < 1e-9, key

    # --- OOF SVC: the decision values Platt's sigmoid was fitted on
    start = time.process_time()
    folds = min(5, int(np.bincount(labels, minlength=2).min()))
    decision = cross_val_predict(SVC(kernel="precomputed", C=entry["C"]), kernel, labels,
                                 cv=StratifiedKFold(folds, shuffle=True, random_state=seed),
                                 method="decision_function")
    out["cpu_oof_svc"] = time.process_time() - start
    sig = _SigmoidCalibration().fit(decision, labels)
    out["check_platt"] = max(abs(sig.a_ - entry["platt_a"]), abs(sig.b_ - entry["platt_b"]))
    out["oof_svc"] = 1.0 / (1.0 + np.exp(entry["platt_a"] * decision + entry["platt_b"]))

    # --- OOF forest: out-of-bag over the in-fit forest's trees
    start = time.process_time()
    out["oof_rf"] = forest_oob(rf.estimators_, bits)
    out["cpu_oof_rf"] = time.process_time() - start
    if trees == 500 and seed == 0:  # all of sklearn's forest: its own oob_decision_function_ must agree
        ref = RandomForestClassifier(trees, random_state=seed, n_jobs=1, oob_score=True).fit(
            bits, labels)
        out["check_oob_sklearn"] = np.nanmax(np.abs(ref.oob_decision_function_[:, 1]
                                                    - out["oof_rf"]))
    out["trees"] = trees
    out["train_y"] = y
    out["C"] = entry["C"]
    return out


def zscore(raw: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Logits of ``raw`` standardised by the centre / scale of the logits of ``ref``."""
    from graph_urpe.models.logit_pool import SCALE_FLOOR, logits

    lr = logits(ref)
    return (logits(raw) - lr.mean(0)) / np.maximum(lr.std(0), SCALE_FLOOR)


def apply_rules(run: dict) -> dict[str, tuple[float, np.ndarray]]:
    """Test ROC-AUC and weights (net, svc, rf) of every rule."""
    from sklearn.metrics import roc_auc_score

    from graph_urpe.models.logit_pool import fit_pool, pool_weight, pooled, prior_weight

    vp = np.column_stack([run["valid_net"], run["valid_members"]])
    tp = np.column_stack([run["test_net"], run["test_members"]])
    yv, yt = run["valid_y"], run["test_y"]
    zv, zt = zscore(vp, vp), zscore(tp, vp)
    res: dict[str, tuple[float, np.ndarray]] = {}
    for k, name in enumerate(("net", "svc", "rf")):
        res[name] = (roc_auc_score(yt, tp[:, k]), np.eye(3)[k])
    # (a) the current pool, exactly as the fit / blend_rules
    w, factors = fit_pool(run["valid_net"][:, None], run["valid_members"][:, None],
                          yv[:, None])
    p = pooled(run["test_net"][:, None], run["test_members"][:, None], w, factors)[:, 0]
    res["pool"] = (roc_auc_score(yt, p), w[0])
    assert abs(roc_auc_score(yt, zt @ w[0]) - res["pool"][0]) < 1e-12
    prior = prior_weight(2)
    res["pool_prior"] = (roc_auc_score(yt, zt @ prior), prior)
    # OOF relative weight of the members
    op = np.column_stack([run["oof_svc"], run["oof_rf"]])
    keep = ~np.isnan(op).any(1)
    zo = zscore(op[keep], op[keep])
    start = time.process_time()
    r = pool_weight(zo, run["train_y"][keep])  # [r_svc, r_rf], prior 0.5 / 0.5
    CPU_WEIGHT.append(time.process_time() - start)
    members_v = zv[:, 1:] @ r
    w0 = pool_weight(np.column_stack([zv[:, 0], members_v]), yv)[0]
    for name, share in (("oof", w0), ("oof_half", 0.5), ("members_oof", 0.0)):
        weight = np.concatenate([[share], (1 - share) * r])
        res[name] = (roc_auc_score(yt, zt @ weight), weight)
    return res


def run_arguments(description: str) -> argparse.ArgumentParser:
    """``--out`` (of peers/chemprop.py), ``--sets`` and ``--cache`` (this script's per-run
    predictions, default ``OUT/oof-cache``), shared with ``svm_c_folds.py``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", type=Path, required=True, help="--out of peers/chemprop.py")
    parser.add_argument("--sets", nargs="+", required=True)
    parser.add_argument("--cache", type=Path, default=None,
                        help="per-run predictions (default: OUT/oof-cache)")
    return parser


def main() -> None:
    parser = run_arguments(__doc__.splitlines()[0])
    parser.add_argument("--table", type=Path, default=None,
                        help="also write the tables here (markdown)")
    args = parser.parse_args()
    args.cache = args.cache or args.out / "oof-cache"
    from sklearn.metrics import roc_auc_score

    args.cache.mkdir(parents=True, exist_ok=True)
    lines = []
    mean_rows, weight_rows, check_rows = [], [], []
    for name in args.sets:
        data, _, logs = set_runs(args.out, name)
        scores = {r: [] for r in RULES}
        for log in logs:
            seed = int(re.search(r"seed(\d+)", log.name).group(1))
            path = args.cache / f"{name}-seed{seed}.npz"
            if not path.exists():
                run = compute_run(log, data, seed)
                np.savez(path, **run)
            run = dict(np.load(path))
            res = apply_rules(run)
            recorded = roc_auc_score(run["test_y"], run["test_pred"])
            assert abs(recorded - res["pool"][0]) < 1e-9, (recorded, res["pool"][0])
            for r in RULES:
                scores[r].append(res[r][0])
            keep = ~np.isnan(run["oof_rf"])
            oof_auc = [roc_auc_score(run["train_y"][keep], run[k][keep])
                       for k in ("oof_svc", "oof_rf")]
            val_auc = [roc_auc_score(run["valid_y"], run["valid_members"][:, k]) for k in (0, 1)]
            val_net = roc_auc_score(run["valid_y"], run["valid_net"])
            from graph_urpe.models.logit_pool import effective_rows
            weight_rows.append([name, str(seed)] + [
                " ".join(f"{x:.2f}" for x in res[r][1]) for r in ("pool", "oof", "oof_half")] + [
                f"{oof_auc[0]:.3f} / {oof_auc[1]:.3f}",
                f"{val_net:.3f} / {val_auc[0]:.3f} / {val_auc[1]:.3f}",
                f"{effective_rows(run['train_y']):.0f} / {effective_rows(run['valid_y']):.0f}"])
            check_rows.append([name, str(seed), f"{float(run['check_refit_valid']):.1e}",
                               f"{float(run['check_forest_valid']):.1e}",
                               f"{float(run['check_platt']):.1e}",
                               f"{float(run.get('check_oob_sklearn', np.nan)):.1e}",
                               str(int(run["trees"])), f"{int(keep.sum())}/{len(keep)}",
                               f"{float(run['cpu_refit']):.1f}",
                               f"{float(run['cpu_oof_svc']):.2f}",
                               f"{float(run['cpu_oof_rf']):.2f}", f"{CPU_WEIGHT[-1]:.2f}"])
        mean_rows.append([name] + [f"{statistics.fmean(scores[r]):.3f} ("
                                   + " ".join(f"{s:.3f}" for s in scores[r]) + ")"
                                   for r in RULES])

    def md(header, rows):
        return "\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
                         + ["| " + " | ".join(r) + " |" for r in rows])

    # rules as rows, sets as columns
    t = [[r] + [row[1 + i] for row in mean_rows] for i, r in enumerate(RULES)]
    lines.append("## Test ROC-AUC, mean of seeds (per seed)\n")
    lines.append(md(["rule"] + [row[0] for row in mean_rows], t))
    lines.append("\n## Weights (net svc rf) and the rows they were chosen on\n")
    lines.append(md(["set", "seed", "pool", "oof", "oof_half", "OOF ROC-AUC svc / rf (train)",
                     "val ROC-AUC net / svc / rf", "m train / valid"], weight_rows))
    lines.append("\n## Checks and CPU seconds (one thread)\n")
    lines.append(md(["set", "seed", "refit vs in-fit valid (max abs)", "forest prefix vs in-fit",
                     "Platt A,B from OOF vs stored", "OOB vs sklearn oob", "trees",
                     "rows with OOB", "CPU refit", "CPU OOF SVC", "CPU OOB forest", "CPU OOF weight"], check_rows))
    text = "\n".join(lines)
    print(text)
    if args.table:
        args.table.write_text(text + "\n")


if __name__ == "__main__":
    main()
