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
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing as mp
import time
import warnings

import torch
from _common import emit, machine_info, markdown_table

PAPER = {"rpe": (23.1, 24.0), "urpe": (22.4, 23.2)}  # (valid, test), WikiText-103, Transformer-XL


def run_one(job: dict) -> dict:
    """Train one (position, seed) model; return its record with val/test perplexity."""
    import lightning as L

    from graph_urpe.tasks.sequence import LanguageModelModule, WikiTextDataModule

    warnings.filterwarnings("ignore")
    logging.getLogger("lightning").setLevel(logging.ERROR)
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    if job["threads"]:
        torch.set_num_threads(job["threads"])
    L.seed_everything(job["seed"], verbose=False)
    dm = WikiTextDataModule(job["root"], seq_len=job["seq_len"], batch_size=job["batch_size"],
                            eval_batch_size=4 * job["batch_size"])
    model = LanguageModelModule(
        position=job["position"], embed_dim=job["embed_dim"], num_layers=job["num_layers"],
        num_heads=job["num_heads"], ffn_dim=4 * job["embed_dim"], dropout=job["dropout"],
        norm_first=True, tie_weights=job["adaptive_cutoffs"] is None,
        adaptive_cutoffs=job["adaptive_cutoffs"], lr=job["lr"], end_lr=1e-5,
        weight_decay=0.01, warmup_steps=job["warmup_steps"], total_steps=job["steps"],
    )
    trainer = L.Trainer(
        max_steps=job["steps"], accelerator=job["accelerator"], devices=1, logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        num_sanity_val_steps=0, limit_val_batches=0,
    )
    start, cpu_start = time.perf_counter(), time.process_time()
    trainer.fit(model, dm)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    evaluator = L.Trainer(accelerator=job["accelerator"], devices=1, logger=False,
                          enable_progress_bar=False, enable_model_summary=False)
    val = evaluator.validate(model, dm, verbose=False)[0]
    test = evaluator.test(model, dm, verbose=False)[0]
    record = {k: v for k, v in job.items() if k != "threads"}
    record.update(
        val_ppl=round(val["val/ppl"], 2), test_ppl=round(test["test/ppl"], 2),
        train_seconds=round(seconds, 1), train_cpu_seconds=round(cpu_seconds, 1),
        params=sum(p.numel() for p in model.parameters()),
        vocab_size=model.hparams.vocab_size,
        train_tokens_seen=job["steps"] * job["batch_size"] * job["seq_len"],
    )
    return record


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default="data/shakespeare", help="WikiText-format folder")
    parser.add_argument("--positions", nargs="+", default=["rpe", "urpe"],
                        choices=["none", "ape", "rpe", "urpe"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--warmup-steps", type=int, default=100)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--embed-dim", type=int, default=128)
    parser.add_argument("--num-layers", type=int, default=3)
    parser.add_argument("--num-heads", type=int, default=4)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--adaptive-cutoffs", nargs="*", type=int, default=[2000, 6000],
                        help="adaptive-softmax cutoffs; none given = full tied softmax")
    parser.add_argument("--jobs", type=int, default=2, help="parallel runs")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per run (0: all)")
    parser.add_argument("--accelerator", default="cpu")
    args = parser.parse_args(argv)

    from graph_urpe.data.text import TokenFileCorpus

    corpus = TokenFileCorpus(args.root)  # builds the cache once, before the workers start
    print(f"# corpus {corpus!r}; machine: {machine_info(torch.device('cpu'))}", flush=True)
    jobs = [
        {
            "position": pos, "seed": seed, "root": args.root, "steps": args.steps,
            "warmup_steps": args.warmup_steps, "seq_len": args.seq_len,
            "batch_size": args.batch_size, "embed_dim": args.embed_dim,
            "num_layers": args.num_layers, "num_heads": args.num_heads,
            "dropout": args.dropout, "lr": args.lr,
            "adaptive_cutoffs": args.adaptive_cutoffs or None,
            "accelerator": args.accelerator, "threads": args.threads,
        }
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
            pos, runs[0]["params"], args.steps,
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
