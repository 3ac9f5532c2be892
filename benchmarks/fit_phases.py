"""Where the CPU time of one ``graph-urpe fit`` goes, phase by phase (issue 32).

Runs ``graph-urpe fit ARGS`` (:func:`graph_urpe.cli.program`) in a child process whose functions
of each phase are wrapped with a CPU clock (:func:`time.process_time`, the whole process), and
prints one table: per phase its *exclusive* CPU seconds (time in a wrapped function minus the
wrapped functions it calls), its share of the child's total and how often it ran. The total is
the child's user + system time from :func:`os.wait4`, as ``benchmarks/peers/chemprop.py``
measures a run; ``interpreter start`` is the CPU time before the script's first line,
``interpreter exit`` what the child spent after its exit handlers ran (the total minus all
else), and ``untimed in-process work`` what no wrapper holds (the dispatch, reading the config
files). ``imports`` is what importing ``graph_urpe.cli.lightning_cli`` and the wrapped modules
costs before anything runs, done as the program does it (the cyclic garbage collector paused,
then the objects frozen); modules imported later count in the phase that imports them. On a
checkout from before :func:`graph_urpe.cli.program` (``PYTHONPATH=<checkout>``) the child imports
plainly and runs :func:`graph_urpe.cli.main`, as ``python -m graph_urpe.cli`` did then.

Usage (one thread, as the peer benchmark runs it)::

    OMP_NUM_THREADS=1 python benchmarks/fit_phases.py -- --config configs/csv/template.yaml \\
        --data.init_args.path data.csv --data.init_args.target_columns '[target]' ...

The wrappers cost about 2 µs per call (a few thousand calls per run): well under 1 % of a fit.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import json
import os
import subprocess
import sys
import time

PHASES = [
    # (label, module, attribute path): the function or method wrapped
    ("CLI: parse, configure, instantiate", "graph_urpe.cli.lightning_cli", "_run_cli"),
    ("featurization and cache", "graph_urpe.data.modules.graph", "GraphDataModule.load"),
    ("pretrained encoder load", "graph_urpe.models.finetune", "load_pretrained_encoder"),
    ("training statistics", "graph_urpe.data.modules.graph",
     "BatchedGraphDataModule.training_statistics"),
    ("Lightning fit loop (rest)", "lightning.pytorch.trainer.trainer", "Trainer.fit"),
    ("sanity check", "lightning.pytorch.trainer.trainer", "Trainer._run_sanity_check"),
    ("train: forward + loss", "graph_urpe.models.graph", "GraphPropertyModule.training_step"),
    ("train: backward", "lightning.pytorch.core.module", "LightningModule.backward"),
    ("train: optimizer step, clipping", "lightning.pytorch.core.module",
     "LightningModule.optimizer_step"),
    ("train: zero_grad", "lightning.pytorch.core.module", "LightningModule.optimizer_zero_grad"),
    ("data loader: sampler, get, collate", "torch.utils.data.dataloader",
     "_SingleProcessDataLoaderIter._next_data"),
    ("batch to device", "lightning.pytorch.core.module",
     "LightningModule._apply_batch_transfer_handler"),
    ("logging: self.log", "lightning.pytorch.core.module", "LightningModule.log"),
    ("logging: loggers write",
     "lightning.pytorch.trainer.connectors.logger_connector.logger_connector",
     "_LoggerConnector.log_metrics"),
    ("logging: learning-rate monitor", "lightning.pytorch.callbacks.lr_monitor",
     "LearningRateMonitor.on_train_batch_start"),
    ("validation: forward", "graph_urpe.models.graph", "GraphPropertyModule.validation_step"),
    ("validation: epoch metrics", "graph_urpe.models.graph",
     "GraphPropertyModule.on_validation_epoch_end"),
    ("classical model: fit (SVM's C by CV, Platt, forest)", "graph_urpe.models.classical_baseline",
     "ClassicalBaseline.on_fit_start"),
    ("classical model: validation predictions, blend / pool", "graph_urpe.models.classical_baseline",
     "ClassicalBaseline.on_validation_end"),
    ("soup: keep the best epochs' weights", "graph_urpe.models.soup", "EpochSoup.on_validation_end"),
    ("checkpoint writes", "lightning.pytorch.trainer.trainer", "Trainer.save_checkpoint"),
    ("test (load checkpoint, loop, metrics)", "lightning.pytorch.trainer.trainer", "Trainer.test"),
    ("outputs: predictions, splits, figures", "graph_urpe.cli.lightning_cli", "write_run_outputs"),
    ("summary: bootstrap interval, lines", "graph_urpe.cli.lightning_cli", "print_fit_summary"),
    ("leaderboard record", "graph_urpe.cli.lightning_cli", "trainer_record"),
]


def _child(args: list[str]) -> None:
    import functools

    start = time.process_time()  # the interpreter's start so far
    from graph_urpe import cli

    program = getattr(cli, "program", None)  # None: a checkout from before it existed
    if program is not None:  # imported as the program does: collector paused, then frozen
        gc.disable()
    import graph_urpe.cli.lightning_cli  # noqa: F401  (the imports a fit pays first)

    for _, module, _ in PHASES:
        importlib.import_module(module)
    if program is not None:
        gc.freeze()
        gc.enable()
    spent = {"interpreter start": start, "imports": time.process_time() - start}
    calls: dict[str, int] = {}
    stack: list[float] = []  # CPU time of nested wrapped calls, per open frame

    def wrap(label, fn):
        @functools.wraps(fn)
        def timed(*a, **k):
            t0 = time.process_time()
            stack.append(0.0)
            try:
                return fn(*a, **k)
            finally:
                inner = stack.pop()
                total = time.process_time() - t0
                spent[label] = spent.get(label, 0.0) + total - inner
                calls[label] = calls.get(label, 0) + 1
                if stack:
                    stack[-1] += total
        return timed

    for label, module, path in PHASES:
        owner = importlib.import_module(module)
        *parents, name = path.split(".")
        for part in parents:
            owner = getattr(owner, part)
        setattr(owner, name, wrap(label, getattr(owner, name)))

    def report() -> None:  # an exit handler: the program runs them before it ends
        spent["untimed in-process work (dispatch, config files)"] = \
            time.process_time() - sum(spent.values())
        print("PHASES " + json.dumps({"spent": spent, "calls": calls}), flush=True)

    atexit.register(report)
    sys.argv = ["graph-urpe", "fit", *args]
    if program is not None:
        program()
    cli.main()  # what `python -m graph_urpe.cli` ran before program() existed


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        _child(sys.argv[2:])
        return
    args = sys.argv[1:]
    if args[:1] == ["--"]:
        args = args[1:]
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"),
               MKL_NUM_THREADS=os.environ.get("MKL_NUM_THREADS", "1"))
    proc = subprocess.Popen([sys.executable, __file__, "--child", *args], env=env,
                            stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    line = next((x for x in out.splitlines() if x.startswith("PHASES ")), None)
    if os.waitstatus_to_exitcode(status) != 0 or line is None:
        sys.stdout.write(out)
        raise SystemExit(f"the fit failed (exit {os.waitstatus_to_exitcode(status)})")
    found = json.loads(line[len("PHASES "):])
    total = usage.ru_utime + usage.ru_stime
    spent, calls = found["spent"], found["calls"]
    spent["interpreter exit"] = total - sum(spent.values())
    print(json.dumps({"cpu_s": total, "spent": spent, "calls": calls}))
    print("\n| phase | CPU s | share | calls |\n|---|---|---|---|")
    for label, value in sorted(spent.items(), key=lambda kv: -kv[1]):
        print(f"| {label} | {value:.2f} | {value / total:.1%} | {calls.get(label, '')} |")
    print(f"| **total (user + system of the child)** | **{total:.2f}** | 100 % | |")


if __name__ == "__main__":
    main()
