"""Softmax on short rows: ATen's CPU kernels against element-wise ops, and the fused URPE block
with and without its short-row path (issue 32; ``graph_urpe/nn/_fused.py``, module doc).

ATen's CPU softmax and softmax-backward kernels take a slow path when the softmax dim is shorter
than one CPU vector (16 float32 with AVX-512, 8 with AVX2). Batches of small molecules have such
attention rows (FreeSolv's size buckets: ``N`` = 4-13 with the graph token). For each ``N`` this
prints, on ``[B, H, N, N]`` float32 scores (one thread, CPU time):

* ``softmax``: ``torch.softmax`` against ``amax``, ``sub_``, ``exp_``, ``sum``, ``div_``;
* ``softmax backward``: ``torch._softmax_backward_data`` against ``(dP - rowsum(dP ⊙ P)) ⊙ P``
  by ``mul``, ``sum``, ``sub_``, ``mul_``;
* ``fused block``: :func:`graph_urpe.nn.functional.urpe_attention` (``backend="fused"``, bias
  and multiplier ``[1, H, N, N]``, a key padding mask, attention dropout 0.1 in training, head dim
  8), forward + backward, as the library runs it (``short-row path``) and with
  ``graph_urpe.nn._fused._short_rows`` patched to return False (``ATen kernels``: the code
  before the short-row path).

Each configuration's calls are interleaved in rounds (``--repeats`` rounds of ``--calls`` calls;
the minimum CPU time per call is kept: on a shared machine load only ever adds time).

Usage::

    OMP_NUM_THREADS=1 python benchmarks/short_rows.py
    OMP_NUM_THREADS=1 python benchmarks/short_rows.py --lengths 4 9 13 16 24 --batch 64 --heads 8
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch
from _common import emit, machine_info, markdown_table, ratio

from graph_urpe.nn import _fused
from graph_urpe.nn.functional import urpe_attention


def elementwise_softmax(x: torch.Tensor) -> torch.Tensor:
    """``softmax(x, -1)`` as ``amax``, ``sub``, ``exp_``, ``sum``, ``div_``."""
    y = x - x.amax(-1, keepdim=True)
    y.exp_()
    return y.div_(y.sum(-1, keepdim=True))


def elementwise_softmax_backward(grad: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:
    """``P ⊙ (dP - rowsum(dP ⊙ P))`` by element-wise ops."""
    return grad.sub((grad * probs).sum(-1, keepdim=True)).mul_(probs)


def cpu_per_call(fns: dict[str, Callable[[], object]], calls: int, repeats: int) -> dict:
    """Minimum CPU seconds per call of each function over ``repeats`` interleaved rounds."""
    best = {name: float("inf") for name in fns}
    for fn in fns.values():
        fn()  # warm-up
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.process_time()
            for _ in range(calls):
                fn()
            best[name] = min(best[name], (time.process_time() - start) / calls)
    return best


def fused_step(n: int, batch: int, heads: int, seed: int = 0) -> Callable[[], None]:
    """One forward + backward of the fused block at ``[batch, heads, n, n]``."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(batch, heads, n, 8, generator=g).requires_grad_() for _ in range(3))
    bias, mult = (torch.randn(1, heads, n, n, generator=g).requires_grad_() for _ in range(2))
    pad = torch.zeros(batch, n, dtype=torch.bool)
    pad[batch // 2:, n - n // 3:] = True  # half the graphs smaller: padded keys
    grad = torch.randn(batch, heads, n, 8, generator=g)

    def step() -> None:
        out = urpe_attention(q, k, v, attn_bias=bias, multiplier=mult, key_padding_mask=pad,
                             dropout_p=0.1, training=True, backend="fused")
        out.backward(grad)

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[4, 7, 9, 13, 15, 16, 17, 24])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    info = machine_info(torch.device("cpu"))
    info["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    emit(info)
    short_rows = _fused._short_rows
    rows = []
    for n in args.lengths:
        g = torch.Generator().manual_seed(n)
        x = torch.randn(args.batch, args.heads, n, n, generator=g)
        dp = torch.randn(x.shape, generator=g)
        p = torch.softmax(x, -1)
        torch.testing.assert_close(elementwise_softmax(x), p)
        torch.testing.assert_close(elementwise_softmax_backward(dp, p),
                                   torch._softmax_backward_data(dp, p, -1, p.dtype))
        step = fused_step(n, args.batch, args.heads)

        def aten_step() -> None:
            _fused._short_rows = lambda t: False
            try:
                step()
            finally:
                _fused._short_rows = short_rows

        t = cpu_per_call({
            "softmax aten": lambda: torch.softmax(x, -1),
            "softmax elementwise": lambda: elementwise_softmax(x),
            "backward aten": lambda: torch._softmax_backward_data(dp, p, -1, p.dtype),
            "backward elementwise": lambda: elementwise_softmax_backward(dp, p),
            "fused aten": aten_step,
            "fused library": step,
        }, args.calls, args.repeats)
        us = {name: round(sec * 1e6, 1) for name, sec in t.items()}
        emit({"n": n, "short_row_path": short_rows(x), **us})
        rows.append([n, "yes" if short_rows(x) else "no",
                     us["softmax aten"], us["softmax elementwise"],
                     ratio(us["softmax aten"], us["softmax elementwise"]),
                     us["backward aten"], us["backward elementwise"],
                     ratio(us["backward aten"], us["backward elementwise"]),
                     us["fused aten"], us["fused library"],
                     ratio(us["fused aten"], us["fused library"])])
    print()
    print(f"[{args.batch}, {args.heads}, N, N] float32, one thread, CPU us per call "
          f"(minimum of {args.repeats} rounds of {args.calls}); "
          f"CPU capability {info['cpu_capability']}")
    print(markdown_table(
        ["N", "short-row path", "softmax ATen", "softmax element-wise", "ratio",
         "backward ATen", "backward element-wise", "ratio",
         "fused block fwd+bwd, ATen kernels", "fused block fwd+bwd, library", "ratio"], rows))


if __name__ == "__main__":
    main()
