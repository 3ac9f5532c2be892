"""The paper's synthetic tasks: no PE vs APE vs RPE vs URPE on Position Identification and Even
Token Prediction (Luo et al., NeurIPS 2022, arXiv 2205.13401, Sec. 5.1 and Fig. 2).

Each run is the shipped config ``configs/synthetic/base.yaml`` + ``<task>-<position>[-paper].yaml``
(parsed as ``graph-urpe fit`` parses it, see ``_sequence.py``): it trains
:class:`graph_urpe.models.sequence.SyntheticTaskModule` (a bidirectional
:class:`graph_urpe.nn.SequenceTransformer`, no absolute positions unless ``ape``) on fresh random
sequences from :class:`graph_urpe.data.modules.sequence.SyntheticDataModule`, then reports the token
accuracy on a fixed held-out set (the data module's test split, never trained on). The model,
optimizer and schedule are the config's; the script only overrides steps, vocabulary, seeds,
device and, with ``--set KEY=VALUE``, any other key.

Settings:

* ``--quick`` (default; ``configs/synthetic/<task>-<position>.yaml``): length 32, vocabulary 100, 3 layers, width 64, 4 heads, batch 64,
  AdamW lr 3e-3 with 10 % linear warm-up then linear decay, 500 updates for PI and 1,500 for ETP,
  1,024 test sequences; runs in parallel processes of one thread each (``--jobs``, default 2).
  All eight runs take a few minutes on two CPU cores.
* ``--paper`` (``<task>-<position>-paper.yaml``; none/ape: the URPE file with the position
  changed): the official setting (``simulate_*.sh`` of lsj2408/URPE): length 128, vocabulary
  1,000 and 10,000, 3 layers, width 768, 12 heads, FFN 3,072, post-LN, batch 128, Adam lr 7e-5,
  6,000 warm-up of 40,000 updates (linear decay), no dropout, 6,400 test sequences; one run at a
  time on the accelerator (bf16 mixed precision on a GPU).

Chance levels: PI ``1/length``; ETP 0.5 (predicting the filler for the second half is free).
The paper (length 128): no PE 0.066/0.057/0.052 (PI, vocab 10/1k/10k), 0.50 (ETP); RPE
0.123/0.104/0.100 (PI), 0.58/0.54/0.52 (ETP); URPE 1.00 on both.

Output: one JSON line per run (task, position, length, vocab_size, steps, accuracy, seconds and
the settings), then a markdown table.

Usage::

    python benchmarks/synthetic.py --quick
    python benchmarks/synthetic.py --quick --seeds 0 1 2 --jobs 2
    python benchmarks/synthetic.py --paper --vocab-sizes 1000 10000
    python benchmarks/synthetic.py --tasks pi --positions urpe --steps 50 \
        --set model.init_args.model.init_args.num_layers=2
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time

import torch
from _common import emit, machine_info, markdown_table

POSITIONS = ("none", "ape", "rpe", "urpe")
TASKS = ("pi", "etp")
#: What the script sets beyond the configs: evaluation and parallelism of each setting.
QUICK = {"vocab_sizes": [100], "num_workers": 0, "precision": "32-true"}
PAPER = {"vocab_sizes": [1000, 10000], "num_workers": 4, "precision": None}
#: Warm-up fraction of the paper's schedule (6,000 of 40,000), used when --steps changes its length.
PAPER_WARMUP_FRACTION = 0.15
#: The paper's accuracies (read off its bar chart, +-0.005) for vocab 10 / 1k / 10k at length 128.
PAPER_RESULTS = {
    ("pi", "none"): "0.066 / 0.057 / 0.052", ("pi", "rpe"): "0.123 / 0.104 / 0.100",
    ("pi", "urpe"): "1.00 / 1.00 / 1.00", ("etp", "none"): "0.50 / 0.50 / 0.50",
    ("etp", "rpe"): "0.58 / 0.54 / 0.52", ("etp", "urpe"): "1.00 / 1.00 / 1.00",
}


def run_one(job: dict) -> dict:
    """Train and test one (task, position, vocab, seed) configuration; return its record."""
    from _sequence import QUIET_TRAINER, experiment_args, sequence_cli

    if job["threads"]:
        torch.set_num_threads(job["threads"])
    suffix = "-paper" if job["setting"] == "paper" else ""
    args = experiment_args("synthetic", f"{job['task']}-{job['position']}{suffix}",
                           job["position"])
    args += QUIET_TRAINER + [
        f"--seed_everything={job['seed']}", f"--data.init_args.seed={job['seed']}",
        f"--data.init_args.vocab_size={job['vocab_size']}",
        f"--data.init_args.num_workers={job['num_workers']}",
        f"--trainer.accelerator={job['accelerator']}", f"--trainer.precision={job['precision']}",
    ]
    if job["steps"]:
        # Samples are generated on access (sample k is a function of (seed, k)), so a long epoch
        # costs nothing; it only has to hold the run's updates at any batch size of the configs.
        args += [f"--trainer.max_steps={job['steps']}",
                 f"--data.init_args.train_size={job['steps'] * 1024}"]
        if job["setting"] == "paper":
            warmup = int(PAPER_WARMUP_FRACTION * job["steps"])
            args += [f"--model.init_args.lr_scheduler.init_args.warmup_steps={warmup}"]
    args += [f"--{kv}" for kv in job["set"]]
    cli = sequence_cli(args)
    trainer, model, dm = cli.trainer, cli.model, cli.datamodule
    steps = trainer.max_steps
    start, cpu_start = time.perf_counter(), time.process_time()
    trainer.fit(model, dm)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    acc = trainer.test(model, dm, verbose=False)[0]["test/accuracy"]
    net = cli.config["model"]["init_args"]["model"]["init_args"]
    record = {k: v for k, v in job.items() if k not in ("threads", "steps")}
    record.update(
        length=dm.sequence_length, steps=steps, embed_dim=net["embed_dim"],
        num_layers=net["num_layers"], num_heads=net["num_heads"],
        batch_size=dm.hparams.batch_size, test_size=dm.hparams.test_size,
        config=[a.split("configs/")[-1] for a in args if a.endswith(".yaml")],
        accuracy=round(float(acc), 4), train_seconds=round(seconds, 1),
        train_cpu_seconds=round(cpu_seconds, 1),
        params=sum(p.numel() for p in model.parameters()),
        device=str(trainer.strategy.root_device),
    )
    return record


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="small CPU setting (default)")
    mode.add_argument("--paper", action="store_true", help="the paper's setting (GPU)")
    parser.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS))
    parser.add_argument("--positions", nargs="+", choices=POSITIONS, default=list(POSITIONS))
    parser.add_argument("--vocab-sizes", nargs="+", type=int, help="override the setting's")
    parser.add_argument("--steps", type=int, help="updates per run (default: the config's)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--jobs", type=int, help="parallel runs (default: 2 quick, 1 paper)")
    parser.add_argument("--threads", type=int, help="torch threads per run (default: 1 quick)")
    parser.add_argument("--accelerator", default=None, help="Lightning accelerator")
    parser.add_argument("--precision", default=None, help="Lightning precision")
    parser.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE",
                        help="more config overrides, e.g. model.init_args.model.init_args.ffn_dim=128")
    args = parser.parse_args(argv)

    setting = dict(PAPER if args.paper else QUICK)
    gpu = torch.cuda.is_available()
    accelerator = args.accelerator or ("auto" if args.paper else "cpu")
    precision = args.precision or setting["precision"] or (
        "bf16-mixed" if gpu and accelerator != "cpu" else "32-true"
    )
    jobs_n = args.jobs or (1 if args.paper else 2)
    threads = args.threads if args.threads is not None else (0 if args.paper else 1)
    jobs = [
        {
            "task": task, "position": pos, "vocab_size": vocab, "steps": args.steps,
            "seed": seed,
            # pool workers are daemonic and cannot start DataLoader workers
            "num_workers": setting["num_workers"] if jobs_n == 1 else 0,
            "accelerator": accelerator, "precision": precision, "threads": threads,
            "setting": "paper" if args.paper else "quick", "set": args.set,
        }
        for task in args.tasks
        for vocab in (args.vocab_sizes or setting["vocab_sizes"])
        for seed in args.seeds
        for pos in args.positions
    ]
    print(f"# {len(jobs)} runs, {jobs_n} at a time; machine: {machine_info(torch.device('cpu'))}",
          flush=True)
    start = time.perf_counter()
    records = []
    if jobs_n == 1:
        for job in jobs:
            records.append(run_one(job))
            emit(records[-1])
    else:
        with mp.get_context("spawn").Pool(jobs_n) as pool:
            for rec in pool.imap_unordered(run_one, jobs):
                records.append(rec)
                emit(rec)
    total = time.perf_counter() - start

    rows = []
    for task in args.tasks:
        for vocab in args.vocab_sizes or setting["vocab_sizes"]:
            cells, runs = [], []
            for pos in args.positions:
                found = [r for r in records
                         if (r["task"], r["vocab_size"], r["position"]) == (task, vocab, pos)]
                runs += found
                cells.append(" / ".join(f"{r['accuracy']:.3f}" for r in found))
            length = runs[0]["length"]
            chance = f"{1 / length:.3f}" if task == "pi" else "0.500"
            rows.append([task.upper(), length, vocab, runs[0]["steps"], chance, *cells])
    for task in args.tasks:
        rows.append([f"{task.upper()} (paper)", 128, "10 / 1k / 10k", 40000,
                     "", *[PAPER_RESULTS.get((task, p), "-") for p in args.positions]])
    print()
    print(markdown_table(
        ["task", "length", "vocab", "updates", "chance", *args.positions], rows
    ))
    cpu = sum(r["train_cpu_seconds"] for r in records)
    print(f"\nTotal wall time: {total:.0f} s ({jobs_n} parallel runs); training CPU time of all "
          f"runs: {cpu:.0f} s.")


if __name__ == "__main__":
    main()
