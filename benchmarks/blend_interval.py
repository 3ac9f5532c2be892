"""The blend's 95 % interval against the network's on the public regression sets (issue 41
item 2: ``<target>_pred`` became the blend, so its interval must be the blend's), offline on the
run folders of ``peers/chemprop.py`` or ``finetune_encoders.py``.

For each run's tested checkpoint: the network's own validation and test predictions and
calibrated intervals (:class:`graph_urpe.Predictor` on the checkpoint with its blend removed),
the in-fit classical model's (``<target>_ecfp_svm``); then what the fit does
(:func:`graph_urpe.models.blend.blend_weights` and
:func:`~graph_urpe.models.blend.fit_blend_calibration` on the validation rows) and what
``predict`` writes (:func:`~graph_urpe.models.blend.blended_outputs`) on the test rows. Printed
per set, means over the runs: test MAE, the coverage of the 95 % intervals and their mean
width, network against blend.

    python benchmarks/blend_interval.py --out /work/scratch/partB/out \\
        --sets freesolv lipophilicity bace_pic50 --runs 'ours-enc-moses-descriptors-seed*.log'
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from _common import markdown_table
from blend_rules import set_runs, tested_checkpoint


def network_only(path: Path, folder: str) -> str:
    """A copy of the checkpoint without its blend: ``predict`` writes the network's own."""
    ckpt = torch.load(path, weights_only=True)
    state = ckpt["callbacks"]["ClassicalBaseline"]
    for key in ("blend_weight", "blend_calibration"):
        state.pop(key, None)
    out = str(Path(folder) / "network_only.ckpt")
    torch.save(ckpt, out)
    return out


def one_run(checkpoint: Path, data: pd.DataFrame) -> dict[str, float]:
    """Test MAE, coverage and mean width of the network's and the blend's intervals."""
    from graph_urpe import Predictor
    from graph_urpe.models.blend import blend, blend_weights, blended_outputs, fit_blend_calibration

    with tempfile.TemporaryDirectory() as folder:
        model = Predictor.from_checkpoint(network_only(checkpoint, folder))
        parts = {}
        for split in ("valid", "test"):
            frame = data[data["split"] == split]
            table = model.predict(frame["smiles"].tolist())
            ok = (table["error"].astype(str) == "").to_numpy()
            parts[split] = ({"prediction": table.loc[ok, ["target_pred"]].to_numpy(float),
                             "lower": table.loc[ok, ["target_lower"]].to_numpy(float),
                             "upper": table.loc[ok, ["target_upper"]].to_numpy(float)},
                            table.loc[ok, ["target_ecfp_svm"]].to_numpy(float)[..., None],
                            frame[["target"]].to_numpy(float)[ok])
    network, svm, y = parts["valid"]
    weight = blend_weights(network["prediction"], svm, y, "regression")
    calibration = fit_blend_calibration(blend(network["prediction"], svm, weight), network, y)
    network, svm, y = parts["test"]
    mixed = blended_outputs(network, svm, weight, calibration)
    out = {"w": float(weight[0, 0]), "q": float(calibration[1, 0])}
    for name, rows in (("network", network), ("blend", mixed)):
        inside = (rows["lower"] <= y) & (y <= rows["upper"])
        out.update({f"{name}_mae": float(np.abs(rows["prediction"] - y).mean()),
                    f"{name}_coverage": float(inside.mean()),
                    f"{name}_width": float((rows["upper"] - rows["lower"]).mean())})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the benchmark's --out")
    parser.add_argument("--sets", nargs="+", required=True, help="regression sets")
    parser.add_argument("--runs", default="ours-default-seed*.log",
                        help="glob of the runs' logs in runs/<set>/ (default: %(default)s)")
    args = parser.parse_args()
    rows = []
    for name in args.sets:
        data, _, logs = set_runs(args.out, name, args.runs)
        runs = [one_run(tested_checkpoint(log), data) for log in logs]
        mean = {k: statistics.fmean(r[k] for r in runs) for k in runs[0]}
        rows.append([name, str(len(runs)), f"{mean['w']:.2f}",
                     f"{mean['network_mae']:.3f}", f"{mean['blend_mae']:.3f}",
                     f"{mean['network_coverage']:.3f} / {mean['network_width']:.2f}",
                     f"{mean['blend_coverage']:.3f} / {mean['blend_width']:.2f}"])
    print(markdown_table(["set", "runs", "w", "network MAE", "blend MAE",
                          "network: coverage / mean width", "blend: coverage / mean width"],
                         rows))


if __name__ == "__main__":
    main()
