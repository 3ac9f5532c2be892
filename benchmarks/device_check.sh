#!/usr/bin/env bash
# The GPU device check (issue 19): CUDA tests, then the GPU figures, one JSON line per figure in
# $OUT/device_check.jsonl (default ./device_check_out). See benchmarks/README.md, "Device check".
#
#   benchmarks/device_check.sh                 # on one GPU, at most 8 minutes
#   benchmarks/device_check.sh --cpu-dry-run   # everything on CPU at tiny sizes (about a minute)
#
# Self-contained for a lent machine running a copy of the working tree: it uses $PYTHON (default
# python3, which must hold torch), imports this tree's graph_urpe through PYTHONPATH, and installs
# wheels carried in .whl/ (offline) when a dependency is missing. Extra arguments go to the driver.
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
OUT="${OUT:-$PWD/device_check_out}"
export OUT PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$OUT"
missing=$("$PY" - <<'PY'
import importlib.util
need = ["torch", "torch_geometric", "ogb", "rdkit", "lightning", "scipy", "jsonargparse",
        "pandas", "torchmetrics", "tensorboard", "pytest"]
print(" ".join(n for n in need if importlib.util.find_spec(n) is None))
PY
)
if [ -n "$missing" ] && ls .whl/*.whl >/dev/null 2>&1; then
    echo "device_check: missing $missing; installing the wheels in .whl/ (offline)"
    "$PY" -m pip install -q --no-index --no-deps --no-compile --target /tmp/device_check_site \
        .whl/*.whl && export PYTHONPATH="$PYTHONPATH:/tmp/device_check_site"
elif [ -n "$missing" ]; then
    echo "device_check: missing Python packages: $missing (pip install -e . here, or carry" \
         "wheels in .whl/; see benchmarks/README.md)" >&2
fi
exec "$PY" benchmarks/device_check.py --out "$OUT" "$@"
