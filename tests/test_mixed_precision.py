"""Mixed precision on every path: the attention core under CPU autocast (bf16 / fp16) against a
float64 reference, fused AdamW with gradient clipping under ``bf16-mixed`` and ``16-mixed``
(against the unfused optimizer, which Lightning unscales and clips itself), and short
``bf16-mixed`` fits of the default job, the CSV template and a sequence model against the same
fits in float32.

Tolerances: bf16 keeps 8 bits of mantissa (relative rounding 2**-9 = 0.2 %). The attention core's
outputs and gradients are compared at 3 % of their scale; a loss after a few updates of a whole
network, in which every matmul rounds its inputs to bf16, at 3 % relative.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import pandas as pd
import pytest
import torch
from lightning.pytorch import LightningDataModule, LightningModule, Trainer
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.plugins.precision import MixedPrecision

from graph_urpe.cli.configs import DEFAULT_CONFIG
from graph_urpe.cli.lightning_cli import GraphURPECLI
from graph_urpe.models.optim import configure_gradient_clipping
from graph_urpe.nn.functional import urpe_attention

ROOT = Path(__file__).parents[1]


# --------------------------------------------------------------------------- attention core
def _reference(q, k, v, bias, mult, pad):
    """(softmax(QK^T/sqrt(D) + B) ⊙ C) V in float64 with padded keys removed by hand."""
    q, k, v, bias, mult = (t.double() for t in (q, k, v, bias, mult))
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) + bias
    s = s.masked_fill(pad[:, None, None, :], float("-inf"))
    return (torch.softmax(s, -1) * mult) @ v


def _core_inputs(seed=0, B=2, H=3, N=40, D=8):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, H, N, D, generator=g) for _ in range(3))
    bias = torch.randn(1, H, N, N, generator=g)
    mult = 1.0 + 0.5 * torch.randn(B, H, N, N, generator=g)
    pad = torch.zeros(B, N, dtype=torch.bool)
    pad[1, N - 7:] = True
    return q, k, v, bias, mult, pad


def _scaled_close(got, want, tol):
    """``|got - want| <= tol * max|want|`` elementwise (a relative error on the tensor's scale)."""
    got, want = got.double(), want.double()
    err = (got - want).abs().max().item()
    assert err <= tol * want.abs().max().item(), (err, want.abs().max().item())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("chunk_size", [None, 16])
def test_core_under_cpu_autocast_matches_float64_with_float32_statistics(dtype, chunk_size):
    """Under autocast the matmuls run in ``dtype``; the softmax, ``P ⊙ C`` and the gradients of
    ``B`` and ``C`` stay float32 (their dtype is checked): outputs and all five gradients within
    3 % of the float64 reference's scale (fused block, dense and query-chunked)."""
    q, k, v, bias, mult, pad = _core_inputs()
    leaves = [t.clone().requires_grad_() for t in (q, k, v, bias, mult)]
    with torch.autocast("cpu", dtype=dtype):
        # What a model feeds the core under autocast: projections already in the low dtype.
        low = [t.to(dtype) for t in leaves[:3]]
        out = urpe_attention(*low, attn_bias=leaves[3], multiplier=leaves[4],
                             key_padding_mask=pad, chunk_size=chunk_size)
    assert out.dtype == dtype
    g = torch.Generator().manual_seed(1)
    grad_out = torch.randn(out.shape, generator=g)
    grads = torch.autograd.grad(out, leaves, grad_out.to(dtype))
    assert grads[3].dtype == grads[4].dtype == torch.float32

    ref_leaves = [t.double().requires_grad_() for t in (q, k, v, bias, mult)]
    ref = _reference(*ref_leaves, pad)
    ref_grads = torch.autograd.grad(ref, ref_leaves, grad_out.double())
    _scaled_close(out, ref, 0.03)
    for got, want in zip(grads, ref_grads):
        _scaled_close(got, want, 0.03)


# --------------------------------------------------------------- fused AdamW and clipping
class _Regressor(LightningModule):
    """A small MLP regression with the project's clipping hook and an injected AdamW."""

    configure_gradient_clipping = configure_gradient_clipping

    def __init__(self, fused: bool):
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.GELU(),
                                       torch.nn.Linear(32, 1))
        self.fused = fused

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x).float().squeeze(-1), y)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-2, fused=self.fused)


def _train_regressor(fused: bool, plugin: MixedPrecision, clip: float) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 8, generator=g)
    y = 10.0 * x[:, 0] + torch.randn(64, generator=g)  # gradients above the clip value
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16)
    model = _Regressor(fused)
    trainer = Trainer(accelerator="cpu", plugins=[plugin], max_steps=4, gradient_clip_val=clip,
                      logger=False, enable_checkpointing=False, enable_progress_bar=False,
                      enable_model_summary=False)
    trainer.fit(model, loader)
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def test_torch_still_marks_fused_adamw_as_unscaling_inside_step():
    """The flag :func:`configure_gradient_clipping` and ``GradScaler.step`` read (a private torch
    attribute: this test fails first if an upgrade renames it)."""
    p = [torch.nn.Parameter(torch.zeros(2))]
    assert torch.optim.AdamW(p, fused=True)._step_supports_amp_scaling is True
    assert not getattr(torch.optim.AdamW(p, foreach=True), "_step_supports_amp_scaling", False)


@pytest.mark.parametrize("precision", ["bf16-mixed", "16-mixed"])
def test_fused_adamw_clips_like_the_unfused_one(precision, one_thread):
    """In a Trainer, fused AdamW + clipping ends with the weights of unfused AdamW + clipping
    (Lightning's own unscale-then-clip path) after 4 updates, under bf16 and under fp16 with a
    GradScaler on CPU, and the updates happened (no step skipped for overflow). Adam's update
    hardly depends on a gradient's scale, so what clipping did is checked by hand in the next
    test."""
    plugin = functools.partial(MixedPrecision, precision, "cpu")
    fused = _train_regressor(True, plugin(), clip=0.5)
    unfused = _train_regressor(False, plugin(), clip=0.5)
    torch.testing.assert_close(fused, unfused, rtol=1e-5, atol=1e-6)
    torch.manual_seed(0)
    initial = torch.cat([p.detach().flatten() for p in _Regressor(True).parameters()])
    assert (fused - initial).abs().max() > 1e-3


def _scaled_backward(scaler, w, inf: bool = False):
    """Back-propagate through ``scaler`` a loss whose true gradient for ``w`` is (3, 4) (norm 5)."""
    loss = (w * torch.tensor([3.0, float("inf") if inf else 4.0])).sum()
    scaler.scale(loss).backward()
    return w


def test_16_mixed_clips_the_unscaled_gradient_and_the_fused_step_uses_it():
    """The hook by hand: with a GradScaler (scale 2**16) and fused AdamW, the gradient after the
    hook is the true one clipped to norm 1 ((3, 4) / 5), and the scaler's step applies AdamW to
    exactly that gradient (reference: unfused AdamW given the clipped gradient directly)."""
    plugin = MixedPrecision("16-mixed", "cpu")
    module = type("M", (), {"trainer": type("T", (), {"precision_plugin": plugin})()})()
    w = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
    _scaled_backward(plugin.scaler, w)
    opt = torch.optim.AdamW([w], lr=0.1, fused=True)
    configure_gradient_clipping(module, opt, 1.0, "norm")
    torch.testing.assert_close(w.grad, torch.tensor([0.6, 0.8]))
    plugin.scaler.step(opt)
    plugin.scaler.update()
    ref = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
    ref.grad = torch.tensor([0.6, 0.8])
    torch.optim.AdamW([ref], lr=0.1, foreach=False).step()
    torch.testing.assert_close(w.detach(), ref.detach())

    # An overflowed gradient: the step is skipped and the scale halved, as without clipping.
    scale = plugin.scaler.get_scale()
    before = w.detach().clone()
    opt.zero_grad()
    _scaled_backward(plugin.scaler, w, inf=True)
    configure_gradient_clipping(module, opt, 1.0, "norm")
    plugin.scaler.step(opt)
    plugin.scaler.update()
    torch.testing.assert_close(w.detach(), before)
    assert plugin.scaler.get_scale() == scale / 2


# ------------------------------------------------------------------------- short fits
class _Losses(Callback):
    """The training loss of every update."""

    def __init__(self):
        self.losses: list[float] = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        self.losses.append(float(loss))


def _fit_losses(args: list[str], precision: str, default_config: bool = True) -> list[float]:
    """Build a run as ``graph-urpe fit`` would (its base config first) and train it; the losses."""
    cli = GraphURPECLI(
        LightningModule, LightningDataModule, subclass_mode_model=True, subclass_mode_data=True,
        parser_kwargs={"default_config_files": [DEFAULT_CONFIG] if default_config else []},
        args=[*args, f"--trainer.precision={precision}", "--trainer.accelerator=cpu",
              "--trainer.logger=false", "--trainer.enable_checkpointing=false",
              "--trainer.enable_progress_bar=false", "--trainer.enable_model_summary=false",
              "--trainer.num_sanity_val_steps=0", "--trainer.limit_val_batches=0"],
        run=False, save_config_callback=None,
    )
    recorder = _Losses()
    cli.trainer.callbacks.append(recorder)
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    assert cli.trainer.global_step == len(recorder.losses) > 0
    return recorder.losses


def _assert_bf16_tracks_fp32(args, **kwargs):
    """bf16-mixed's training losses within 3 % of float32's, update by update."""
    fp32 = _fit_losses(args, "32-true", **kwargs)
    bf16 = _fit_losses(args, "bf16-mixed", **kwargs)
    assert all(math.isfinite(x) for x in bf16)
    torch.testing.assert_close(torch.tensor(bf16), torch.tensor(fp32), rtol=0.03, atol=0.0)


@pytest.fixture(scope="module")
def zinc_like_root(tmp_path_factory):
    """One processed copy of the default job's data for this module's fits."""
    return tmp_path_factory.mktemp("zinc_like_data")


def test_default_job_trains_in_bf16_mixed_with_fused_adamw_and_clipping(
        zinc_like_root, tmp_path, monkeypatch, one_thread):
    """The default job as shipped (fused AdamW, gradient_clip_val 5) for 3 updates."""
    monkeypatch.chdir(tmp_path)
    _assert_bf16_tracks_fp32([f"--data.init_args.root={zinc_like_root}",
                              "--trainer.max_steps=3"])


def test_csv_template_trains_in_bf16_mixed(tmp_path, monkeypatch, one_thread):
    """The CSV template as shipped (dropout off so both runs see the same network) for 3 updates."""
    monkeypatch.chdir(tmp_path)
    smiles = ["CCO", "CCN", "CCCC", "c1ccccc1", "CC(=O)O", "CCOC", "c1ccncc1", "CC(C)O",
              "OCCO", "CC#N", "C1CCCCC1", "CCCl", "Cc1ccccc1", "COC(=O)C", "NCCN", "CCS"] * 4
    csv = tmp_path / "mols.csv"
    pd.DataFrame({"smiles": smiles, "target": [len(s) / 4.0 for s in smiles]}).to_csv(
        csv, index=False)
    net = "--model.init_args.model.init_args"
    _assert_bf16_tracks_fp32([
        "--config", str(ROOT / "graph_urpe" / "configs" / "csv" / "template.yaml"),
        f"--data.init_args.path={csv}", f"--data.init_args.root={tmp_path / 'data'}",
        "--data.init_args.split=random", "--trainer.max_steps=3",
        f"{net}.dropout=0.0", f"{net}.attention_dropout=0.0",
    ])


def test_sequence_model_trains_in_bf16_mixed_with_fused_adamw_and_clipping(
        tmp_path, monkeypatch, one_thread):
    """The synthetic permutation task's shipped URPE config (sizes shrunk), with fused AdamW and
    gradient clipping added, for 3 updates."""
    monkeypatch.chdir(tmp_path)
    configs = ROOT / "graph_urpe" / "configs" / "synthetic"
    _assert_bf16_tracks_fp32([
        "--config", str(configs / "base.yaml"), "--config", str(configs / "pi-urpe.yaml"),
        "--trainer.max_steps=3", "--trainer.gradient_clip_val=1.0",
        "--model.init_args.optimizer.init_args.fused=true",
        "--data.init_args.length=16", "--data.init_args.batch_size=16",
        "--data.init_args.train_size=64", "--data.init_args.val_size=16",
        "--data.init_args.test_size=16", "--data.init_args.num_workers=0",
    ], default_config=False)
