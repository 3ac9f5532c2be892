"""The GPU device check (issue 19): CUDA tests, then every GPU figure, in one short run.

Run through ``benchmarks/device_check.sh`` (which sets up the environment); on one GPU it is sized
to finish in at most 8 minutes. Sections, in this order, each writing JSON lines (one per figure)
to ``<out>/device_check.jsonl`` and never stopping the run when one fails (the line then holds
``"error"``; a section that cannot run here holds ``"skipped"`` with the reason):

1. ``tests``: ``pytest`` of the files whose tests need CUDA (FlexAttention's backward, the Triton
   kernel compiled for real, the fused block on CUDA); log in ``<out>/tests.log``.
2. ``core``: one forward + backward of the attention core, ``[B, H, N, D]`` bfloat16 inputs, shared
   ``B`` and ``C`` ``[1, H, N, N]``, everything requiring grad, for URPE and RPE on the Triton
   kernel, FlexAttention and the fused block, and PyTorch's SDPA with ``B`` as a learnable float
   mask (RPE only: SDPA has no ``C``), ``N`` = 128 ... 4096; interleaved rounds (each round times
   every configuration once, rotated order), median and minimum of the rounds, wall time with the
   device synchronised. Ratio lines: URPE/RPE per backend, Triton URPE / SDPA RPE.
3. ``step``: one Graphormer-slim training step (12 layers, width 80, 8 heads, the default job's
   model: no dropout; collate excluded, forward + L1 loss + backward + AdamW) on fixed batches of
   the embedded ZINC-like validation split, URPE vs RPE, bfloat16 autocast, eager vs ``torch.compile``;
   interleaved; graphs/s and the URPE/RPE ratio per mode.
4. ``peer``: graph-urpe's Graphormer-slim against Hugging Face ``transformers``' Graphormer of the
   same size (``benchmarks/peers/hf_graphormer.py``'s configuration, its collator and
   preprocessing) on the same batches, float32, training step time; skipped where
   ``transformers`` has no Graphormer (it was removed in 5.0; carry ``transformers==4.57.6``).
5. ``default_job``: ``graph-urpe fit`` (the default job) for a fixed number of updates with
   ``--trainer.precision bf16-mixed``: wall time of the process, updates/s, and its exit status.

``--cpu-dry-run`` runs all of it on CPU at tiny sizes (the Triton kernel in its interpreter, the
tests not run (the suite runs them on CPU), FlexAttention forward only), so a lent GPU's first minute is not spent on a
typo; it exits with status 1 when any figure failed (``.ci/run`` runs it). Usage: see
``benchmarks/README.md`` (section "Device check").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DRY = "--cpu-dry-run" in sys.argv
if DRY:  # before triton is first imported (the kernels run in Triton's interpreter on CPU)
    os.environ["TRITON_INTERPRET"] = "1"

import torch
import torch.nn.functional as F

sys.path[:0] = [HERE, os.path.join(HERE, "peers")]
from _common import median

from graph_urpe.nn.functional import urpe_attention

#: Scratch folder for the dataset cache and the default job's run folder (not under ``--out``: only
#: the JSON lines and two logs go there).
WORK = os.environ.get("DEVICE_CHECK_WORK",
                      os.path.join(tempfile.gettempdir(), "graph_urpe_device_check"))

#: Test files run in section 1 (their CUDA tests skip elsewhere).
CUDA_TESTS = ["tests/test_triton_attention.py", "tests/test_flex_attention.py",
              "tests/test_fused_attention.py"]

SIZES = {  # per mode: what each section runs at
    "gpu": {"lengths": [128, 512, 1024, 2048, 4096], "batch": 8, "heads": 8, "dim": 32,
            "rounds": 5, "warmup": 2, "step_batch": 128, "step_batches": 3, "step_rounds": 4,
            "fit_updates": 100, "layers": 12, "compile_backend": "inductor"},
    "dry": {"lengths": [40], "batch": 1, "heads": 2, "dim": 8, "rounds": 1, "warmup": 0,
            "step_batch": 4, "step_batches": 1, "step_rounds": 1, "fit_updates": 2, "layers": 2,
            "compile_backend": "eager"},  # dynamo's tracing without Inductor's minutes on CPU
}


class Report:
    """Appends one JSON line per figure to ``<out>/device_check.jsonl`` (and echoes it)."""

    def __init__(self, out: str, device: torch.device) -> None:
        os.makedirs(out, exist_ok=True)
        self.path = os.path.join(out, "device_check.jsonl")
        self.out = out
        self.base = {"device": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu",
                     "torch": torch.__version__, "dry_run": DRY}

        self.errors: list[str] = []

    def __call__(self, section: str, **fields) -> None:
        if "error" in fields:
            self.errors.append(f"{section} {fields.get('config', '')}: {fields['error']}")
        line = json.dumps({"section": section, **fields, **self.base})
        print(line, flush=True)
        with open(self.path, "a") as f:
            f.write(line + "\n")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def interleaved(fns: dict, rounds: int, warmup: int, device: torch.device) -> dict:
    """Seconds per call of each ``fns[name]()``: ``warmup + rounds`` rounds, each calling every
    function once in a rotated order; returns ``{name: {"median_s", "min_s"} or {"error"}}``."""
    names, times, errors = list(fns), {n: [] for n in fns}, {}
    for r in range(warmup + rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            if name in errors:
                continue
            try:
                _sync(device)
                t0 = time.perf_counter()
                fns[name]()
                _sync(device)
                if r >= warmup:
                    times[name].append(time.perf_counter() - t0)
            except Exception as e:  # noqa: BLE001 -- one failing must not stop the rest
                errors[name] = f"{type(e).__name__}: {e}"[:500]
    return {n: {"error": errors[n]} if n in errors else
            {"median_s": median(times[n]), "min_s": min(times[n])} for n in names}


def section_tests(rep: Report, device: torch.device) -> None:
    missing = [f for f in CUDA_TESTS if not os.path.exists(os.path.join(REPO, f))]
    if DRY or missing:  # on CPU the suite runs these files (their CUDA tests skip)
        rep("tests", files=CUDA_TESTS, skipped="CPU dry run: files checked, not run"
            if not missing else f"missing test files {missing}")
        return
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *CUDA_TESTS]
    t0 = time.perf_counter()
    res = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    with open(os.path.join(rep.out, "tests.log"), "w") as f:
        f.write(res.stdout + res.stderr)
    last = (res.stdout.strip().splitlines() or [""])[-1]
    rep("tests", files=CUDA_TESTS, rc=res.returncode, summary=last,
        seconds=time.perf_counter() - t0)


def _core_fns(n: int, size: dict, device: torch.device, dtype: torch.dtype) -> dict:
    """Forward + backward closures of every core configuration at length ``n``."""
    g = torch.Generator(device="cpu").manual_seed(n)
    b, h, d = size["batch"], size["heads"], size["dim"]

    def leaf(*shape):
        return torch.randn(*shape, generator=g).to(device, dtype).requires_grad_(True)

    q, k, v = leaf(b, h, n, d), leaf(b, h, n, d), leaf(b, h, n, d)
    bias = leaf(1, h, n, n)
    mult = (torch.rand(1, h, n, n, generator=g) + 0.5).to(device, dtype).requires_grad_(True)
    grad = torch.randn(b, h, n, d, generator=g).to(device, dtype)
    train = device.type == "cuda"  # CPU dry run: flex is inference-only there

    def core(backend, c):
        ins = (q, k, v, bias, c)
        if backend == "flex" and not train:  # forward only, on inputs without grad
            ins = tuple(None if t is None else t.detach() for t in ins)

        def run():
            out = urpe_attention(*ins[:3], attn_bias=ins[3], multiplier=ins[4], backend=backend)
            if out.requires_grad:
                out.backward(grad)
        return run

    def sdpa():
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        out.backward(grad)

    fns = {f"{be}-{kind}": core(be, c) for be in ("triton", "flex", "fused")
           for kind, c in (("urpe", mult), ("rpe", None))}
    fns["sdpa-rpe"] = sdpa
    return fns


def section_core(rep: Report, size: dict, device: torch.device, deadline: float) -> None:
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    for n in size["lengths"]:
        if time.perf_counter() > deadline:
            rep("core", n=n, skipped="time budget of the section spent")
            continue
        try:
            res = interleaved(_core_fns(n, size, device, dtype), size["rounds"], size["warmup"],
                              device)
        except Exception as e:  # noqa: BLE001 -- e.g. out of memory building the inputs
            rep("core", n=n, error=f"{type(e).__name__}: {e}"[:500])
            continue
        shape = {"n": n, "batch": size["batch"], "heads": size["heads"], "dim": size["dim"],
                 "dtype": str(dtype).removeprefix("torch.")}
        for name, r in res.items():
            rep("core", config=name, **shape, **r)
        for a, b in [(f"{be}-urpe", f"{be}-rpe") for be in ("triton", "flex", "fused")] + [
                ("triton-urpe", "sdpa-rpe"), ("triton-rpe", "sdpa-rpe")]:
            if "min_s" in res[a] and "min_s" in res[b]:
                rep("core", ratio=f"{a}/{b}", n=n, value=res[a]["min_s"] / res[b]["min_s"])
        if device.type == "cuda":
            torch.cuda.empty_cache()


def _dataset():
    """The embedded ZINC-like validation split (1,000 molecules, enough for the fixed batches;
    quicker to preprocess than the training split) with shortest paths, cached under :data:`WORK`."""
    from graph_urpe.data.zinc import ZincLikeDataset
    from graph_urpe.transforms import AddShortestPathDistance

    return ZincLikeDataset(os.path.join(WORK, "zinc_like"), split="val", log=False,
                           pre_transform=AddShortestPathDistance(max_distance=None, paths=True))


def _zinc_batches(size: dict, device: torch.device) -> list:
    """``step_batches`` fixed PyG batches of ``step_batch`` graphs on ``device``."""
    from torch_geometric.data import Batch

    ds, bs = _dataset(), size["step_batch"]
    return [Batch.from_data_list([ds[i] for i in range(j * bs, (j + 1) * bs)]).to(device)
            for j in range(size["step_batches"])]


def section_step(rep: Report, size: dict, device: torch.device) -> None:
    from graph_urpe.nn import Graphormer

    batches = _zinc_batches(size, device)
    fns = {}
    for attention in ("rpe", "urpe"):
        for mode in ("eager", "compile"):
            torch.manual_seed(0)
            model = Graphormer.slim(attention=attention, dropout=0.0, attention_dropout=0.0,
                                    num_layers=size["layers"]).to(device).train()
            opt = torch.optim.AdamW(model.parameters(), lr=2e-4, weight_decay=0.01)
            run = (torch.compile(model, backend=size["compile_backend"]) if mode == "compile"
                   else model)

            def step(run=run, opt=opt):
                for batch in batches:
                    opt.zero_grad(set_to_none=True)
                    with torch.autocast(device.type, dtype=torch.bfloat16):
                        loss = F.l1_loss(run(batch).float(), batch.y)
                    loss.backward()
                    opt.step()
            fns[f"{attention}-{mode}"] = step
    res = interleaved(fns, size["step_rounds"], 1, device)
    graphs = size["step_batch"] * size["step_batches"]
    for name, r in res.items():
        extra = {"graphs_per_s": graphs / r["min_s"]} if "min_s" in r else {}
        rep("step", config=name, batch=size["step_batch"], layers=size["layers"],
            precision="bf16 autocast", **r, **extra)
    for mode in ("eager", "compile"):
        a, b = res[f"urpe-{mode}"], res[f"rpe-{mode}"]
        if "min_s" in a and "min_s" in b:
            rep("step", ratio=f"urpe/rpe {mode}", value=a["min_s"] / b["min_s"])
    a, b = res["urpe-compile"], res["urpe-eager"]
    if "min_s" in a and "min_s" in b:
        rep("step", ratio="urpe compile/eager", value=a["min_s"] / b["min_s"])


def section_peer(rep: Report, size: dict, device: torch.device) -> None:
    try:
        from _hf_worker import HFAdapter
    except Exception as e:  # noqa: BLE001 -- no transformers, or one without Graphormer (>= 5.0)
        rep("peer", skipped=f"transformers' Graphormer not importable ({type(e).__name__}: "
            f"{e}); carry transformers==4.57.6 (benchmarks/README.md, Device check)"[:500])
        return
    from _ours_worker import OursAdapter
    from _protocol import to_hf_item
    from hf_graphormer import hf_config

    ds, bs = _dataset(), size["step_batch"]
    items = [to_hf_item(g.x.numpy(), g.edge_index.numpy(), g.edge_attr.numpy(), g.y.numpy())
             for g in (ds[i] for i in range(bs * size["step_batches"]))]
    fns = {}
    for adapter, cfg in ((OursAdapter(), {"attentions": ["rpe", "urpe"]}),
                         (HFAdapter(), hf_config())):
        graphs = [adapter.preprocess(adapter.prepare(it)) for it in items]
        batches = [_to(adapter.collate(graphs[j * bs:(j + 1) * bs]), device)
                   for j in range(size["step_batches"])]
        for name, model in adapter.build(cfg, seed=0).items():
            model = model.to(device).train()
            opt = torch.optim.AdamW(model.parameters(), lr=2e-4, weight_decay=0.01)

            def step(model=model, opt=opt, adapter=adapter, batches=batches):
                for batch in batches:
                    opt.zero_grad(set_to_none=True)
                    adapter.loss(model, batch).backward()
                    opt.step()
            fns[name] = step
    res = interleaved(fns, size["step_rounds"], 1, device)
    for name, r in res.items():
        rep("peer", config=name, batch=bs, precision="float32", **r)
    for ours in ("rpe", "urpe"):
        if "min_s" in res[ours] and "min_s" in res["hf"]:
            rep("peer", ratio=f"hf/{ours}", value=res["hf"]["min_s"] / res[ours]["min_s"])


def _to(batch, device):
    """A PyG batch or ``transformers``' dict of tensors on ``device``."""
    if isinstance(batch, dict):
        return {k: v.to(device) if torch.is_tensor(v) else v for k, v in batch.items()}
    return batch.to(device)


def section_default_job(rep: Report, size: dict, device: torch.device) -> None:
    updates = size["fit_updates"]
    root = os.path.join(WORK, "runs")
    cmd = [sys.executable, "-m", "graph_urpe.cli", "fit", "--trainer.max_steps", str(updates),
           "--trainer.precision", "bf16-mixed", "--trainer.default_root_dir", root,
           "--data.init_args.root", os.path.join(WORK, "data"),
           "--trainer.limit_val_batches", "2", "--trainer.enable_progress_bar", "false"]
    if DRY:
        cmd += ["--trainer.accelerator", "cpu"]
    t0 = time.perf_counter()
    res = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=420, check=False)
    seconds = time.perf_counter() - t0
    with open(os.path.join(rep.out, "fit.log"), "w") as f:
        f.write(res.stdout + res.stderr)
    tail = (res.stderr.strip().splitlines() or [""])[-1][:300]
    rep("default_job", updates=updates, rc=res.returncode, seconds=seconds,
        updates_per_s=updates / seconds, precision="bf16-mixed",
        **({"error": f"exit status {res.returncode}: {tail}"} if res.returncode else {}))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpu-dry-run", action="store_true",
                    help="everything on CPU at tiny sizes (checks the script, measures nothing)")
    ap.add_argument("--out", default=os.environ.get("OUT") or "device_check_out",
                    help="folder for device_check.jsonl and logs (default: $OUT or "
                         "./device_check_out)")
    ap.add_argument("--sections", nargs="+",
                    default=["tests", "core", "step", "peer", "default_job"],
                    choices=["tests", "core", "step", "peer", "default_job"])
    ap.add_argument("--core-budget-s", type=float, default=120.0,
                    help="lengths left when the core section has run this long are skipped")
    ap.add_argument("--budget-s", type=float, default=450.0,
                    help="sections not started after this many seconds are skipped")
    args = ap.parse_args(argv)
    if not args.cpu_dry_run and not torch.cuda.is_available():
        raise SystemExit("device_check: no CUDA device; run with --cpu-dry-run to check the "
                         "script on CPU.")
    device = torch.device("cpu" if args.cpu_dry_run else "cuda")
    size = SIZES["dry" if args.cpu_dry_run else "gpu"]
    rep = Report(os.path.abspath(args.out), device)
    torch.manual_seed(0)
    start = time.perf_counter()
    for name in args.sections:
        t0 = time.perf_counter()
        if t0 - start > args.budget_s and not args.cpu_dry_run:
            rep(name, skipped=f"the run's {args.budget_s:.0f} s budget is spent")
            continue
        try:
            if name == "tests":
                section_tests(rep, device)
            elif name == "core":
                section_core(rep, size, device, t0 + args.core_budget_s)
            elif name == "step":
                section_step(rep, size, device)
            elif name == "peer":
                section_peer(rep, size, device)
            else:
                section_default_job(rep, size, device)
        except Exception as e:  # noqa: BLE001 -- report and go on with the next section
            rep(name, error=f"{type(e).__name__}: {e}"[:500])
        rep(name, section_seconds=time.perf_counter() - t0)
    if args.cpu_dry_run and rep.errors:  # a dry run exists to catch these before the GPU does
        raise SystemExit("device_check dry run failed:\n" + "\n".join(rep.errors))
    print(f"device_check: {rep.path} ({len(rep.errors)} figures with errors)")


if __name__ == "__main__":
    main()
