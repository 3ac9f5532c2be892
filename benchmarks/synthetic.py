"""The paper's synthetic tasks: no PE vs APE vs RPE vs URPE on Position Identification and Even
Token Prediction (Luo et al., NeurIPS 2022, arXiv 2205.13401, Sec. 5.1 and Fig. 2).

Each run trains :class:`graph_urpe.tasks.sequence.SyntheticTaskModule` (a bidirectional
Transformer encoder, no absolute positions unless ``ape``) on fresh random sequences from
:class:`graph_urpe.tasks.sequence.SyntheticDataModule` with a Lightning ``Trainer``, then reports
the token accuracy on a fixed held-out set (the data module's test split, never trained on).

Settings:

* ``--quick`` (default): length 32, vocabulary 100, 3 layers, width 64, 4 heads, batch 64,
  AdamW lr 3e-3 with 10 % linear warm-up then linear decay, 500 updates for PI and 1,500 for ETP,
  1,024 test sequences; runs in parallel processes of one thread each (``--jobs``, default 2).
  All eight runs take a few minutes on two CPU cores.
* ``--paper``: the official setting (``simulate_*.sh`` of lsj2408/URPE): length 128, vocabulary
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
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing as mp
import time
import warnings

import torch
from _common import emit, machine_info, markdown_table

POSITIONS = ("none", "ape", "rpe", "urpe")
TASKS = ("pi", "etp")

QUICK = {
    "length": 32, "vocab_sizes": [100], "embed_dim": 64, "num_layers": 3, "num_heads": 4,
    "ffn_dim": 256, "batch_size": 64, "lr": 3e-3, "warmup_fraction": 0.1,
    "steps": {"pi": 500, "etp": 1500}, "test_size": 1024, "precision": "32-true",
    "num_workers": 0,
}
PAPER = {
    "length": 128, "vocab_sizes": [1000, 10000], "embed_dim": 768, "num_layers": 3,
    "num_heads": 12, "ffn_dim": 3072, "batch_size": 128, "lr": 7e-5, "warmup_fraction": 0.15,
    "steps": {"pi": 40000, "etp": 40000}, "test_size": 6400, "precision": None,
    "num_workers": 4,
}
#: The paper's accuracies (read off its bar chart, +-0.005) for vocab 10 / 1k / 10k at length 128.
PAPER_RESULTS = {
    ("pi", "none"): "0.066 / 0.057 / 0.052", ("pi", "rpe"): "0.123 / 0.104 / 0.100",
    ("pi", "urpe"): "1.00 / 1.00 / 1.00", ("etp", "none"): "0.50 / 0.50 / 0.50",
    ("etp", "rpe"): "0.58 / 0.54 / 0.52", ("etp", "urpe"): "1.00 / 1.00 / 1.00",
}


def run_one(job: dict) -> dict:
    """Train and test one (task, position, vocab, seed) configuration; return its record."""
    import lightning as L

    from graph_urpe.tasks.sequence import SyntheticDataModule, SyntheticTaskModule

    warnings.filterwarnings("ignore")
    logging.getLogger("lightning").setLevel(logging.ERROR)
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    if job["threads"]:
        torch.set_num_threads(job["threads"])
    L.seed_everything(job["seed"], verbose=False)
    steps = job["steps"]
    dm = SyntheticDataModule(
        task=job["task"], length=job["length"], vocab_size=job["vocab_size"],
        batch_size=job["batch_size"], train_size=steps * job["batch_size"],
        val_size=job["batch_size"], test_size=job["test_size"], seed=job["seed"],
        num_workers=job["num_workers"],
    )
    model = SyntheticTaskModule(
        position=job["position"], embed_dim=job["embed_dim"], num_layers=job["num_layers"],
        num_heads=job["num_heads"], ffn_dim=job["ffn_dim"], lr=job["lr"],
        warmup_steps=int(job["warmup_fraction"] * steps), total_steps=steps,
        weight_decay=0.0, end_lr=0.0,
    )
    trainer = L.Trainer(
        max_steps=steps, accelerator=job["accelerator"], devices=1,
        precision=job["precision"], logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
        limit_val_batches=0,
    )
    start, cpu_start = time.perf_counter(), time.process_time()
    trainer.fit(model, dm)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    acc = trainer.test(model, dm, verbose=False)[0]["test/acc"]
    record = {k: v for k, v in job.items() if k not in ("threads",)}
    record.update(
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
    parser.add_argument("--steps", type=int, help="updates per run (override both tasks)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--jobs", type=int, help="parallel runs (default: 2 quick, 1 paper)")
    parser.add_argument("--threads", type=int, help="torch threads per run (default: 1 quick)")
    parser.add_argument("--accelerator", default=None, help="Lightning accelerator")
    parser.add_argument("--precision", default=None, help="Lightning precision")
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
            "task": task, "position": pos, "length": setting["length"], "vocab_size": vocab,
            "steps": args.steps or setting["steps"][task], "seed": seed,
            "embed_dim": setting["embed_dim"], "num_layers": setting["num_layers"],
            "num_heads": setting["num_heads"], "ffn_dim": setting["ffn_dim"],
            "batch_size": setting["batch_size"], "lr": setting["lr"],
            "warmup_fraction": setting["warmup_fraction"], "test_size": setting["test_size"],
            # pool workers are daemonic and cannot start DataLoader workers
            "num_workers": setting["num_workers"] if jobs_n == 1 else 0,
            "accelerator": accelerator, "precision": precision, "threads": threads,
            "setting": "paper" if args.paper else "quick",
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
            cells = []
            for pos in args.positions:
                accs = [r["accuracy"] for r in records
                        if (r["task"], r["vocab_size"], r["position"]) == (task, vocab, pos)]
                cells.append(" / ".join(f"{a:.3f}" for a in accs))
            steps = args.steps or setting["steps"][task]
            chance = f"{1 / setting['length']:.3f}" if task == "pi" else "0.500"
            rows.append([task.upper(), setting["length"], vocab, steps, chance, *cells])
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
