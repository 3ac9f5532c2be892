"""Which folds should choose the in-fit SVC's C? Plain shuffled stratified 5-fold (the fit's),
three repeats of it, and 5-fold grouped by Bemis-Murcko scaffold (two numberings of the same
groups, which shuffle them differently), each followed by the one-standard-error rule; the
SVC's test ROC-AUC and the pool's (network, SVC, forest; :func:`graph_urpe.models.logit_pool.
fit_pool`) with that SVC, on the runs cached by ``blend_oof.py`` (issue 41;
``benchmarks/README.md`` section 34: not adopted).

    python benchmarks/svm_c_folds.py --out OUT --sets bace bbbp clintox   # after blend_oof.py
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
from blend_oof import run_arguments
from blend_rules import set_runs

FOLDS = ("plain", "repeated", "scaffold", "scaffold-sorted")


def splitter(how: str, seed: int):
    from sklearn.model_selection import (
        RepeatedStratifiedKFold,
        StratifiedGroupKFold,
        StratifiedKFold,
    )

    if how == "plain":
        return StratifiedKFold(5, shuffle=True, random_state=seed)
    if how == "repeated":
        return RepeatedStratifiedKFold(n_splits=5, n_repeats=3, random_state=seed)
    return StratifiedGroupKFold(5, shuffle=True, random_state=seed)


def run(data: pd.DataFrame, cached: dict, seed: int, how: str) -> tuple[float, float, float]:
    """``(C, SVC test ROC-AUC, pool test ROC-AUC)`` of one run with C chosen by ``how``."""
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    from sklearn.svm import SVC

    from graph_urpe.data.csv.splits import murcko_scaffold
    from graph_urpe.data.fingerprints import ecfp4, tanimoto_kernel
    from graph_urpe.models.classical import C_GRID, one_standard_error_index
    from graph_urpe.models.logit_pool import fit_pool, pooled

    train = data[data["split"] == "train"]
    bits = ecfp4(train["smiles"].to_numpy())
    y = train["target"].to_numpy().astype(int)
    kernel = tanimoto_kernel(bits, bits)
    groups = None
    if how.startswith("scaffold"):
        scaffolds = np.array([murcko_scaffold(s) for s in train["smiles"]])
        groups = (np.unique(scaffolds, return_inverse=True)[1] if how.endswith("sorted")
                  else pd.factorize(scaffolds)[0])
    search = GridSearchCV(SVC(kernel="precomputed"), {"C": list(C_GRID)}, scoring="roc_auc",
                          refit=one_standard_error_index, cv=splitter(how, seed))
    c = search.fit(kernel, y, groups=groups).best_params_["C"]
    svc = CalibratedClassifierCV(SVC(kernel="precomputed", C=c), method="sigmoid",
                                 ensemble=False,
                                 cv=StratifiedKFold(5, shuffle=True, random_state=seed))
    svc.fit(kernel, y)
    valid, test = cached["valid_members"].copy(), cached["test_members"].copy()
    for split, members in (("valid", valid), ("test", test)):
        members[:, 0] = svc.predict_proba(
            tanimoto_kernel(ecfp4(cached[f"{split}_smiles"]), bits))[:, 1]
    if how == "plain":  # the fit's own SVC, to the digit
        assert np.abs(valid[:, 0] - cached["valid_members"][:, 0]).max() < 1e-9
    weight, factors = fit_pool(cached["valid_net"][:, None], valid[:, None],
                               cached["valid_y"][:, None])
    pool = pooled(cached["test_net"][:, None], test[:, None], weight, factors)[:, 0]
    return c, roc_auc_score(cached["test_y"], test[:, 0]), roc_auc_score(cached["test_y"], pool)


def main() -> None:
    args = run_arguments(__doc__.splitlines()[0]).parse_args()
    cache = args.cache or args.out / "oof-cache"
    print("| set | folds | C per seed | SVC test ROC-AUC | pool test ROC-AUC (per seed) |")
    print("|---|---|---|---|---|")
    for name in args.sets:
        data, _, logs = set_runs(args.out, name)
        seeds = sorted(int(re.search(r"seed(\d+)", log.name).group(1)) for log in logs)
        cached = {s: dict(np.load(cache / f"{name}-seed{s}.npz")) for s in seeds}
        for how in FOLDS:
            rows = np.array([run(data, cached[s], s, how) for s in seeds])
            print(f"| {name} | {how} | {' '.join(f'{c:g}' for c in rows[:, 0])} | "
                  f"{rows[:, 1].mean():.3f} | {rows[:, 2].mean():.3f} "
                  f"({' '.join(f'{p:.3f}' for p in rows[:, 2])}) |")


if __name__ == "__main__":
    main()
