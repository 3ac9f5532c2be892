"""Forward + backward cost of the URPE attention core against RPE and PyTorch's fused SDPA.

Measures, for each sequence length ``N`` and a fixed ``batch x heads``, the median wall time of one
forward + backward pass and its peak memory, for:

* ``urpe``: :func:`graph_urpe.nn.functional.urpe_attention` with a learnable bias ``B`` and
  multiplier ``C`` (``[1, H, N, N]`` each, requiring grad), i.e. ``(softmax(QK^T/sqrt(d) + B) ⊙ C) V``;
* ``rpe``: the same core with ``B`` only (plain RPE attention, Luo et al. 2022, Eq. (2));
* ``sdpa``: :func:`torch.nn.functional.scaled_dot_product_attention` with ``B`` as an additive
  float mask that does *not* require grad (what PyTorch's fused CPU / CUDA kernels accept);
* ``sdpa-grad``: the same with a learnable ``B`` (as RPE needs), where PyTorch falls back to
  whichever kernel supports a mask gradient (the JSON records the backend it picked).

``urpe`` and ``rpe`` run with each of ``--backends`` (default ``eager fused compiled``):
``urpe_attention(backend="eager")`` (the readable reference, autograd's graph of plain ops),
``backend="fused"`` (one autograd node with a hand-written backward, the default) and
``compiled`` (``torch.compile(dynamic=False)`` of the eager reference: Inductor's kernels), on the
dense path (the full ``[B, H, N, N]`` scores) and, for eager and fused, on the chunked path
(``chunk_size`` query rows at a time, recomputed in backward); the chunked path is skipped where
``chunk_size >= N`` (it would be the dense path). Queries, keys, values, ``B`` and ``C``
all require grad; the backward pass is ``out.backward(g)`` with a fixed random ``g``.

Method. Timing: one fresh subprocess per length times every configuration, interleaved in
rounds (each round runs each configuration once, in a rotated order, so load changes on a shared
machine hit all configurations alike); ``--warmup`` rounds are dropped, the median and the minimum of
``--repeats`` rounds are kept, as wall time and as the process's CPU time (ratios use the
minimum: on a shared machine load only ever adds time). On CPU the workers
use 1 intra-op thread by default and the ratios use CPU time: with one thread it does not count
time spent waiting for other processes' cores (it still includes page faults and cache misses).
Peak memory: one fresh subprocess per configuration, one warm-up pass, then the median of 3
passes of the memory the pass needs above the inputs already allocated: on CUDA
``torch.cuda.max_memory_allocated`` minus the allocated bytes before the pass; on CPU the
resident-set high-water mark (reset through ``/proc/self/clear_refs``) minus the RSS before the
pass, in a process where glibc returns every freed block above 4 KiB to the kernel (see
``benchmarks/_common.py``). It includes autograd's saved tensors, kernel temporaries and the
gradients of all inputs (also reported separately: the gradients of ``B`` and ``C``,
``[1, H, N, N]`` each, are as large as the inputs and the same on both paths). Page granularity
makes CPU numbers below about 1 MiB (``N = 32``) noise.

Output: one JSON line per configuration, then markdown tables (absolute medians, and ratios
URPE/RPE per backend side by side, URPE/SDPA, chunked/dense) and the issue-6 / issue-13 targets: URPE/RPE time <= 1.05 at
``N >= 128``; at ``N = 2048`` the chunked path within 1/4 of the dense peak memory and 1.5x its
time.

Usage::

    python benchmarks/attention.py                       # full run: N = 32, 128, 512, 2048
    python benchmarks/attention.py --quick               # N = 32, 128, 512; 3 repeats
    python benchmarks/attention.py --lengths 128 256 512 --variants urpe rpe --no-memory
    python benchmarks/attention.py --device cuda --lengths 128 512 2048 8192
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
import warnings

import torch
import torch.nn.functional as F
from _common import (
    PeakMemory,
    emit,
    machine_info,
    markdown_table,
    median,
    ratio,
    run_worker,
    synchronize,
)
from torch.nn.attention import SDPBackend, sdpa_kernel

from graph_urpe.nn.functional import AUTO_CHUNK_ELEMENTS, urpe_attention

VARIANTS = ("urpe", "rpe", "sdpa", "sdpa-grad")
CHUNKED_VARIANTS = ("urpe", "rpe")
BACKENDS = ("eager", "fused", "compiled")
CHUNKED_BACKENDS = ("eager", "fused")
MEMORY_PASSES = 3


def _make_inputs(cfg: dict) -> dict:
    """Inputs shared by every variant at one length (``sdpa`` uses a frozen copy of ``bias``)."""
    device = torch.device(cfg["device"])
    dtype = getattr(torch, cfg["dtype"])
    g = torch.Generator(device="cpu").manual_seed(cfg["seed"])
    b, h, n, d = cfg["batch"], cfg["heads"], cfg["length"], cfg["head_dim"]

    def rand(*shape, scale=1.0, shift=0.0, grad=True):
        t = torch.randn(*shape, generator=g, dtype=dtype) * scale + shift
        return t.to(device).requires_grad_(grad)

    inputs = {
        "q": rand(b, h, n, d), "k": rand(b, h, n, d), "v": rand(b, h, n, d),
        "bias": rand(1, h, n, n, scale=0.02), "mult": rand(1, h, n, n, scale=0.1, shift=1.0),
        "grad_out": rand(b, h, n, d, grad=False),
    }
    inputs["frozen_bias"] = inputs["bias"].detach().clone()
    return inputs


def _pass_fns(variant: str, path: str, backend: str, chunk_size: int, inputs: dict):
    """Closures ``(run, forward)``: one forward + backward pass of a variant, and its forward."""
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    chunk = chunk_size if path == "chunked" else None
    if variant == "sdpa":
        def forward():
            return F.scaled_dot_product_attention(q, k, v, attn_mask=inputs["frozen_bias"])
    elif variant == "sdpa-grad":
        def forward():
            return F.scaled_dot_product_attention(q, k, v, attn_mask=inputs["bias"])
    else:
        mult = inputs["mult"] if variant == "urpe" else None
        core = functools.partial(urpe_attention, chunk_size=chunk,
                                 backend="eager" if backend == "compiled" else backend)
        if backend == "compiled":
            core = torch.compile(core, dynamic=False)

        def forward():
            return core(q, k, v, attn_bias=inputs["bias"], multiplier=mult)
    leaves = [t for t in inputs.values() if t.requires_grad]

    def run():
        for t in leaves:
            t.grad = None
        forward().backward(inputs["grad_out"])

    return run, forward


def _sdpa_backend(forward) -> str:
    """Name the SDPA kernel PyTorch uses here: a fused one if it accepts the inputs, else math."""
    fused = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for backend in fused:
            try:
                with sdpa_kernel([backend]):
                    forward()
                return backend.name.lower()
            except RuntimeError:
                continue
    return "math"


def _configs(cfg: dict) -> list[tuple[str, str, str]]:
    """(variant, path, backend) triples measured at ``cfg["length"]`` (SDPA: backend "-")."""
    out = []
    for variant in cfg["variants"]:
        if variant.startswith("sdpa"):
            out.append((variant, "dense", "-"))
            continue
        for backend in cfg["backends"]:
            out.append((variant, "dense", backend))
            if (variant in CHUNKED_VARIANTS and backend in CHUNKED_BACKENDS
                    and cfg["chunk_size"] < cfg["length"]):
                out.append((variant, "chunked", backend))
    return out


def _check_dense_fits(cfg: dict) -> None:
    b, h, n = cfg["batch"], cfg["heads"], cfg["length"]
    if b * h * n * n > AUTO_CHUNK_ELEMENTS:
        raise ValueError(
            f"B*H*N*N = {b * h * n * n} > AUTO_CHUNK_ELEMENTS: urpe_attention would chunk the "
            "dense measurement; lower --batch/--heads at this length."
        )


def time_worker(cfg: dict) -> list[dict]:
    """Time every (variant, path) at one length in this process, interleaved round-robin.

    Each round runs every configuration once, in an order rotated from round to round, so a
    change in machine load affects all configurations alike. The first ``warmup`` rounds are
    not recorded. Both wall time and this process's CPU time (``time.process_time``) are kept.
    """
    if cfg.get("threads"):
        torch.set_num_threads(cfg["threads"])
    device = torch.device(cfg["device"])
    _check_dense_fits(cfg)
    inputs = _make_inputs(cfg)
    configs = _configs(cfg)
    fns = {c: _pass_fns(*c, cfg["chunk_size"], inputs) for c in configs}
    wall = {c: [] for c in configs}
    cpu = {c: [] for c in configs}
    for rnd in range(cfg["warmup"] + cfg["repeats"]):
        shift = rnd % len(configs)
        for c in configs[shift:] + configs[:shift]:
            synchronize(device)
            w0, c0 = time.perf_counter(), time.process_time()
            fns[c][0]()
            synchronize(device)
            if rnd >= cfg["warmup"]:
                wall[c].append(time.perf_counter() - w0)
                cpu[c].append(time.process_time() - c0)
    recs = []
    for c in configs:
        rec = {"variant": c[0], "path": c[1], "backend": c[2], "length": cfg["length"],
               "wall_ms": 1000 * median(wall[c]), "cpu_ms": 1000 * median(cpu[c]),
               "wall_ms_min": 1000 * min(wall[c]), "cpu_ms_min": 1000 * min(cpu[c]),
               "wall_ms_all": [round(1000 * t, 3) for t in wall[c]]}
        if c[0].startswith("sdpa"):
            rec["sdpa_backend"] = _sdpa_backend(fns[c][1])
        recs.append(rec)
    return recs


def memory_worker(cfg: dict) -> dict:
    """Peak memory of one (variant, path) in this process: median of 3 passes after 1 warm-up."""
    if cfg.get("threads"):
        torch.set_num_threads(cfg["threads"])
    device = torch.device(cfg["device"])
    _check_dense_fits(cfg)
    inputs = _make_inputs(cfg)
    if cfg["variant"] == "sdpa":
        # Free what this variant does not use, so it is not counted in the baseline RSS.
        for name in ("bias", "mult"):
            inputs[name] = inputs[name].detach().requires_grad_(False)
    elif cfg["variant"] != "urpe":
        inputs["mult"] = inputs["mult"].detach().requires_grad_(False)
    run, _ = _pass_fns(cfg["variant"], cfg["path"], cfg["backend"], cfg["chunk_size"], inputs)
    run()
    peaks, method = [], None
    for _ in range(MEMORY_PASSES):
        for t in inputs.values():
            t.grad = None
        with PeakMemory(device) as pm:
            run()
        peaks.append(pm.peak_bytes / 2**20)
        method = pm.method
    grads = sum(t.grad.numel() * t.grad.element_size() for t in inputs.values()
                if t.grad is not None)
    return {"variant": cfg["variant"], "path": cfg["path"], "backend": cfg["backend"],
            "length": cfg["length"],
            "peak_mib": median(peaks), "peak_mib_all": [round(p, 2) for p in peaks],
            "input_grads_mib": grads / 2**20, "memory_method": method}


def measure_length(cfg: dict) -> list[dict]:
    """All configurations at one length: one timing subprocess, one memory subprocess each."""
    times = run_worker(__file__, {**cfg, "mode": "time"}, memory_env=False)["records"]
    if not cfg["memory"]:
        return times
    recs = []
    for t in times:
        mem = run_worker(__file__, {**cfg, "mode": "memory", "variant": t["variant"],
                                    "path": t["path"], "backend": t["backend"]},
                         memory_env=cfg["device"] == "cpu")
        recs.append({**t, **mem})
    return recs


def report(records: list[dict], lengths: list[int], clock: str) -> str:
    """Markdown: absolute times, ratios (minimum ``clock`` time: "cpu" or "wall"), targets."""
    key = f"{clock}_ms_min"
    by = {(r["length"], r["variant"], r["path"], r["backend"]): r for r in records}
    backends = [b for b in BACKENDS if any(r["backend"] == b for r in records)]
    has_mem = any("peak_mib" in r for r in records)

    def get(n, variant, path, field, backend="fused"):
        r = by.get((n, variant, path, "-" if variant.startswith("sdpa") else backend))
        return None if r is None else r.get(field)

    def act(n, variant, path, backend="fused"):  # peak memory without the inputs' gradients
        p = get(n, variant, path, "peak_mib", backend)
        g = get(n, variant, path, "input_grads_mib", backend)
        return None if p is None else p - g

    rows = []
    for r in records:
        kernel = r.get("sdpa_backend", r["path"])
        mem = ([f"{r['peak_mib']:.1f}", f"{r['peak_mib'] - r['input_grads_mib']:.1f}"]
               if "peak_mib" in r else ["-", "-"])
        rows.append([r["length"], r["variant"], r["backend"], kernel, f"{r['wall_ms']:.2f}",
                     f"{r['cpu_ms']:.2f}", f"{r['cpu_ms_min']:.2f}", *mem])
    out = ["### Absolute", "", markdown_table(
        ["N", "variant", "backend", "path / kernel", "wall ms (median)", "CPU ms (median)",
         "CPU ms (min)", "peak MiB", "peak - input grads MiB"], rows), ""]

    rows = []
    for n in lengths:
        row = [n]
        for b in backends:
            row.append(ratio(get(n, "urpe", "dense", key, b), get(n, "rpe", "dense", key, b)))
        for b in backends:
            row.append(ratio(get(n, "urpe", "dense", key, b), get(n, "rpe", "dense", key, "eager")))
        for variant in ("urpe", "rpe"):
            row.append(ratio(get(n, variant, "dense", key, "fused"),
                             get(n, variant, "dense", key, "eager")))
        rows.append(row)
    out += [f"### URPE/RPE by backend (minimum {clock} time, dense)", "", markdown_table(
        ["N", *(f"URPE/RPE {b}" for b in backends), *(f"URPE {b} / RPE eager" for b in backends),
         "URPE fused/eager", "RPE fused/eager"], rows), ""]

    rows = []
    for n in lengths:
        def t(v, p="dense", n=n):
            return get(n, v, p, key)

        def m(v, p="dense", n=n):
            return get(n, v, p, "peak_mib")

        rows.append([
            n, ratio(m("urpe"), m("rpe")),
            ratio(t("urpe"), t("sdpa")), ratio(m("urpe"), m("sdpa")),
            ratio(t("urpe"), t("sdpa-grad")), ratio(m("urpe"), m("sdpa-grad")),
            ratio(t("urpe", "chunked"), t("rpe", "chunked")),
            ratio(t("urpe", "chunked"), t("urpe")), ratio(m("urpe", "chunked"), m("urpe")),
            ratio(act(n, "urpe", "chunked"), act(n, "urpe", "dense")),
        ])
    out += [f"### Fused backend: memory, SDPA and chunking (minimum {clock} time)", "",
            markdown_table(
                ["N", "URPE/RPE mem", "URPE/SDPA time", "URPE/SDPA mem", "URPE/SDPA-grad time",
                 "URPE/SDPA-grad mem", "URPE/RPE time (chunked)", "URPE chunked/dense time",
                 "URPE chunked/dense mem", "URPE chunked/dense mem w/o input grads"], rows), ""]

    out += ["### Targets (issues 6 and 13)", ""]
    for n in lengths:
        if n < 128:
            continue
        for b in backends:
            for path in ("dense", "chunked"):
                x, y = get(n, "urpe", path, key, b), get(n, "rpe", path, key, b)
                if x is not None and y is not None:
                    ok = "met" if x / y <= 1.05 else "MISSED"
                    out.append(f"- N={n} {b} {path}: URPE/RPE time {x / y:.3f} <= 1.05: {ok}")
    if 2048 in lengths and has_mem:
        for variant in CHUNKED_VARIANTS:
            tc, td = get(2048, variant, "chunked", key), get(2048, variant, "dense", key)
            mc, md = get(2048, variant, "chunked", "peak_mib"), get(2048, variant, "dense", "peak_mib")
            if None in (tc, td, mc, md):
                continue
            ok_m = "met" if mc / md <= 0.25 else "MISSED"
            ok_t = "met" if tc / td <= 1.5 else "MISSED"
            out.append(f"- N=2048 {variant}: chunked/dense peak memory {mc / md:.3f} <= 0.25: "
                       f"{ok_m} (without the inputs' gradients, which both paths hold: "
                       f"{ratio(act(2048, variant, 'chunked'), act(2048, variant, 'dense'))})")
            out.append(f"- N=2048 {variant}: chunked/dense time {tc / td:.3f} <= 1.5: {ok_t}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lengths", type=int, nargs="+", default=None,
                   help="sequence lengths (default: 32 128 512 2048; with --quick 32 128 512)")
    p.add_argument("--repeats", type=int, default=10, help="timed rounds (default: 10)")
    p.add_argument("--warmup", type=int, default=2, help="untimed rounds first (default: 2)")
    p.add_argument("--quick", action="store_true",
                   help="lengths 32 128 512, 3 repeats, 1 warm-up round (a smoke run)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtype", default="float32",
                   choices=["float32", "float64", "bfloat16", "float16"])
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--chunk-size", type=int, default=128,
                   help="query rows per block on the chunked path (default: 128)")
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    p.add_argument("--threads", type=int, default=None,
                   help="torch intra-op threads in the workers (default: 1 on CPU, where the "
                        "machine may be shared; torch's default elsewhere)")
    p.add_argument("--clock", choices=["cpu", "wall"], default=None,
                   help="time used for ratios and targets (default: cpu on CPU, robust to "
                        "other processes' load with 1 thread; wall elsewhere)")
    p.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS,
                   help="urpe_attention backends for urpe / rpe (default: eager fused compiled)")
    p.add_argument("--no-memory", action="store_true",
                   help="time only (skip the per-configuration peak-memory subprocesses)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        cfg = json.loads(args.worker)
        if cfg["mode"] == "time":
            emit({"records": time_worker(cfg)})
        else:
            emit(memory_worker(cfg))
        return
    if args.quick:
        args.repeats, args.warmup = 3, 1
    if args.lengths is None:
        args.lengths = [32, 128, 512] if args.quick else [32, 128, 512, 2048]
    on_cpu = torch.device(args.device).type == "cpu"
    threads = args.threads if args.threads is not None else (1 if on_cpu else None)
    clock = args.clock or ("cpu" if on_cpu else "wall")

    base = {"device": args.device, "dtype": args.dtype, "batch": args.batch,
            "heads": args.heads, "head_dim": args.head_dim, "chunk_size": args.chunk_size,
            "warmup": args.warmup, "repeats": args.repeats, "threads": threads,
            "seed": args.seed, "variants": args.variants, "backends": args.backends,
            "memory": not args.no_memory}
    emit({"bench": "attention", "event": "start", "clock": clock,
          "machine": machine_info(torch.device(args.device)), **base})
    records = []
    for n in args.lengths:
        for rec in measure_length({**base, "length": n}):
            rec["bench"] = "attention"
            emit(rec)
            records.append(rec)
    emit({"bench": "attention", "event": "end",
          "machine": machine_info(torch.device(args.device))})
    print()
    print(report(records, args.lengths, clock))


if __name__ == "__main__":
    main(sys.argv[1:])
