"""Word-level language modelling: RPE vs URPE attention, same model, budget and seed.

The paper (Luo et al., NeurIPS 2022, arXiv 2205.13401, Sec. 5.3) reports WikiText-103 test
perplexity 24.0 -> 23.2 (valid 23.1 -> 22.4) when URPE replaces RPE in Transformer-XL base
(151M parameters, 200k updates on GPUs). WikiText-103 is not available here, so this script trains
a small causal :class:`graph_urpe.nn.TransformerLM` on the WikiText-format Shakespeare corpus of
``datasets/build_text_corpus.py`` (1.19M training tokens with ``<eos>``, vocabulary 13,759, split
by play) on CPU, and reports validation and test perplexity of the final model for each
attention variant. Every variant gets the same initial weights where they coincide (same seed;
URPE's ``C`` starts at ones, so URPE starts as exactly the RPE model), the same data order and the
same number of updates.

Each run is the shipped config ``configs/lm/base.yaml`` + ``shakespeare-<position>.yaml`` (parsed
as ``graph-urpe fit`` parses it, see ``_sequence.py``; none/ape: the URPE file with the position
changed), so the model, optimizer and schedule below are the config's; the script overrides the
corpus folder, steps, seeds and device, and any other key with ``--set KEY=VALUE``.

Default model: 3 pre-LN layers, width 128, 4 heads, FFN 512, dropout 0.1, blocks of 128 tokens,
batch 8 blocks, one ``B``/``C`` table per head shared by the layers with one id per distance
(0..127, causal), adaptive softmax with cutoffs 2,000 / 6,000 (as Transformer-XL on WikiText-103;
exact log-probabilities), AdamW lr 1e-3 (betas 0.9/0.98, weight decay 0.01), 100 warm-up updates
then linear decay to 1e-5 over ``--steps`` (default 1,000: about 0.86 epoch) updates.
Evaluation: non-overlapping 128-token blocks, each scored without earlier context; perplexity =
exp(mean NLL over all tokens of the split, ``<eos>`` included).

Output: one JSON line per run, then a markdown table (and the URPE - RPE difference per seed).

Usage::

    python datasets/build_text_corpus.py --out data/shakespeare   # once
    python benchmarks/lm.py                                        # rpe and urpe, 2 processes
    python benchmarks/lm.py --steps 3000 --seeds 0 1 2
    python benchmarks/lm.py --steps 20 --set model.init_args.model.init_args.num_layers=1
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time

import torch
from _common import emit, machine_info, markdown_table

PAPER = {"rpe": (23.1, 24.0), "urpe": (22.4, 23.2)}  # (valid, test), WikiText-103, Transformer-XL


def run_one(job: dict) -> dict:
    """Train one (position, seed) model; return its record with val/test perplexity."""
    import lightning as L
    from _sequence import QUIET_TRAINER, experiment_args, sequence_cli

    if job["threads"]:
        torch.set_num_threads(job["threads"])
    args = experiment_args("lm", f"shakespeare-{job['position']}", job["position"])
    args += QUIET_TRAINER + [
        f"--seed_everything={job['seed']}", f"--data.init_args.root={job['root']}",
        f"--trainer.accelerator={job['accelerator']}",
    ]
    if job["steps"]:
        args += [f"--trainer.max_steps={job['steps']}"]
    args += [f"--{kv}" for kv in job["set"]]
    cli = sequence_cli(args)
    trainer, model, dm = cli.trainer, cli.model, cli.datamodule
    start, cpu_start = time.perf_counter(), time.process_time()
    trainer.fit(model, dm)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    evaluator = L.Trainer(accelerator=job["accelerator"], devices=1, logger=False,
                          enable_progress_bar=False, enable_model_summary=False)
    val = evaluator.validate(model, dm, verbose=False)[0]
    test = evaluator.test(model, dm, verbose=False)[0]
    net = cli.config["model"]["init_args"]["model"]["init_args"]
    record = {k: v for k, v in job.items() if k not in ("threads", "steps")}
    record.update(
        steps=trainer.max_steps, seq_len=dm.sequence_length, batch_size=dm.hparams.batch_size,
        embed_dim=net["embed_dim"], num_layers=net["num_layers"],
        adaptive_cutoffs=net["adaptive_cutoffs"],
        config=[a.split("configs/")[-1] for a in args if a.endswith(".yaml")],
        val_ppl=round(val["val/ppl"], 2), test_ppl=round(test["test/ppl"], 2),
        train_seconds=round(seconds, 1), train_cpu_seconds=round(cpu_seconds, 1),
        params=sum(p.numel() for p in model.parameters()), vocab_size=dm.vocab_size,
        train_tokens_seen=trainer.max_steps * dm.hparams.batch_size * dm.sequence_length,
    )
    return record


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default="data/shakespeare", help="WikiText-format folder")
    parser.add_argument("--positions", nargs="+", default=["rpe", "urpe"],
                        choices=["none", "ape", "rpe", "urpe"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--steps", type=int, help="updates per run (default: the config's)")
    parser.add_argument("--jobs", type=int, default=2, help="parallel runs")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per run (0: all)")
    parser.add_argument("--accelerator", default="cpu")
    parser.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE",
                        help="more config overrides, e.g. model.init_args.model.init_args.dropout=0.2")
    args = parser.parse_args(argv)

    from graph_urpe.data.text import TokenFileCorpus

    corpus = TokenFileCorpus(args.root)  # builds the cache once, before the workers start
    print(f"# corpus {corpus!r}; machine: {machine_info(torch.device('cpu'))}", flush=True)
    jobs = [
        {"position": pos, "seed": seed, "root": args.root, "steps": args.steps,
         "accelerator": args.accelerator, "threads": args.threads, "set": args.set}
        for seed in args.seeds
        for pos in args.positions
    ]
    start = time.perf_counter()
    records = []
    if args.jobs == 1:
        for job in jobs:
            records.append(run_one(job))
            emit(records[-1])
    else:
        with mp.get_context("spawn").Pool(args.jobs) as pool:
            for rec in pool.imap_unordered(run_one, jobs):
                records.append(rec)
                emit(rec)
    total = time.perf_counter() - start

    rows = []
    for pos in args.positions:
        runs = sorted((r for r in records if r["position"] == pos), key=lambda r: r["seed"])
        paper = PAPER.get(pos)
        rows.append([
            pos, runs[0]["params"], runs[0]["steps"],
            " / ".join(f"{r['val_ppl']:.2f}" for r in runs),
            " / ".join(f"{r['test_ppl']:.2f}" for r in runs),
            f"{paper[0]} / {paper[1]}" if paper else "-",
        ])
    print()
    print(markdown_table(
        ["attention", "params", "updates", "valid ppl (per seed)", "test ppl (per seed)",
         "paper WT-103 valid / test"], rows,
    ))
    if {"rpe", "urpe"} <= set(args.positions):
        by = {(r["position"], r["seed"]): r for r in records}
        diffs = [
            (by["urpe", s]["val_ppl"] - by["rpe", s]["val_ppl"],
             by["urpe", s]["test_ppl"] - by["rpe", s]["test_ppl"])
            for s in args.seeds
        ]
        print("\nURPE - RPE perplexity (valid, test) per seed: "
              + ", ".join(f"({v:+.2f}, {t:+.2f})" for v, t in diffs)
              + "   (paper: -0.7, -0.8)")
    cpu = sum(r["train_cpu_seconds"] for r in records)
    print(f"\nTotal wall time: {total:.0f} s ({args.jobs} parallel runs); training CPU time of all "
          f"runs: {cpu:.0f} s.")


if __name__ == "__main__":
    main()
