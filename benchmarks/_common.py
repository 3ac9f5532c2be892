"""Shared helpers for the benchmark scripts: timing, peak memory, worker subprocesses, output.

Every benchmark prints one JSON line per configuration (machine-readable; parse the lines that
start with ``{``) followed by a markdown table of medians and ratios. Import it from a script in
this folder with ``from _common import ...`` (a script's own folder is on ``sys.path``).

Peak memory (:class:`PeakMemory`):

* **CUDA** (and other accelerators with a ``torch.<device>.max_memory_allocated``): the caching
  allocator's peak of allocated bytes during the block minus the bytes allocated on entry.
* **CPU**: the kernel's resident-set high-water mark. On entry the mark is reset (writing ``5``
  to ``/proc/self/clear_refs``, Linux >= 4.0) and the current RSS is recorded; on exit the peak is
  ``VmHWM - VmRSS(entry)`` from ``/proc/self/status``. This counts every byte the process touched
  (autograd's saved tensors, gradients, temporaries inside kernels, allocator overhead), not only
  tensor storages. It is faithful only if freed memory goes back to the kernel, so run the
  measured code in a process started with :func:`cpu_memory_env` (glibc ``malloc`` then serves
  every block above 4 KiB with its own ``mmap`` and unmaps it on ``free``; otherwise memory freed
  by a warm-up run stays resident and is silently reused). :func:`run_worker` does this.
"""

from __future__ import annotations

import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

__all__ = [
    "PeakMemory",
    "cpu_memory_env",
    "emit",
    "machine_info",
    "markdown_table",
    "median",
    "ratio",
    "run_command",
    "run_worker",
    "synchronize",
    "time_calls",
]

#: glibc mmap threshold (bytes) set in worker processes; see the module docstring.
MMAP_THRESHOLD = 4096


def synchronize(device: torch.device) -> None:
    """Wait for all queued work on ``device`` (no-op on CPU)."""
    if device.type != "cpu":
        getattr(torch, device.type).synchronize(device)


def time_calls(
    fn: Callable[[], Any], *, warmup: int, repeats: int, device: torch.device
) -> list[float]:
    """Run ``fn`` ``warmup`` times untimed, then ``repeats`` times; return each run's seconds."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return times


def median(values: Sequence[float]) -> float:
    """Median of a non-empty sequence."""
    return float(statistics.median(values))


def _proc_status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not found in /proc/self/status")


class PeakMemory:
    """Context manager: peak memory (bytes) used by the enclosed block above the usage on entry.

    Args:
        device (torch.device): where the measured tensors live.

    After the block, :attr:`peak_bytes` holds the result and :attr:`method` names how it was
    measured (``"cuda_max_memory_allocated"``-style for accelerators, ``"rss_hwm"`` on CPU).

    Raises:
        RuntimeError: on CPU when ``/proc/self/clear_refs`` cannot be written (not Linux, or
            not permitted); the RSS high-water mark could then not be reset.
    """

    def __init__(self, device: torch.device) -> None:
        self.device = torch.device(device)
        self.peak_bytes: int | None = None
        self.method = (
            "rss_hwm" if self.device.type == "cpu" else f"{self.device.type}_max_memory_allocated"
        )

    def __enter__(self):
        gc.collect()
        if self.device.type == "cpu":
            try:
                with open("/proc/self/clear_refs", "w") as f:
                    f.write("5")
            except OSError as err:
                raise RuntimeError(
                    "cannot reset the RSS high-water mark (/proc/self/clear_refs); CPU peak "
                    "memory needs Linux >= 4.0. Run on CUDA or skip memory measurement."
                ) from err
            self._base = _proc_status_kib("VmRSS") * 1024
        else:
            mod = getattr(torch, self.device.type)
            synchronize(self.device)
            mod.reset_peak_memory_stats(self.device)
            self._base = mod.memory_allocated(self.device)
        return self

    def __exit__(self, *exc) -> None:
        if self.device.type == "cpu":
            peak = _proc_status_kib("VmHWM") * 1024
        else:
            synchronize(self.device)
            peak = getattr(torch, self.device.type).max_memory_allocated(self.device)
        self.peak_bytes = max(0, peak - self._base)


def cpu_memory_env() -> dict[str, str]:
    """Environment for a worker whose CPU peak memory is measured (see the module docstring)."""
    env = dict(os.environ)
    env["MALLOC_MMAP_THRESHOLD_"] = str(MMAP_THRESHOLD)
    env["MALLOC_TRIM_THRESHOLD_"] = str(MMAP_THRESHOLD)
    return env


def run_command(cmd: Sequence[str], cwd: str, env: dict | None = None
                ) -> tuple[subprocess.CompletedProcess, float]:
    """Run ``cmd`` (e.g. ``graph-urpe fit``) in ``cwd``, output captured; exit on failure.

    Returns:
        ``(completed process, wall seconds)``.

    Raises:
        SystemExit: if the command exits non-zero (its last output is written to stderr first).
    """
    start = time.perf_counter()
    proc = subprocess.run(list(cmd), cwd=cwd, env=env, capture_output=True, text=True,
                          check=False)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
        raise SystemExit(f"`{' '.join(cmd)}` failed with exit code {proc.returncode}")
    return proc, wall


def run_worker(script: str, config: dict, *, memory_env: bool, timeout: float = 3600) -> dict:
    """Run ``python script --worker JSON`` in a fresh process; return the JSON it prints last.

    Args:
        script (str): path of the benchmark script (it must handle ``--worker``).
        config (dict): JSON-serialisable configuration passed to the worker.
        memory_env (bool): start the worker with :func:`cpu_memory_env` (for CPU peak memory).
        timeout (float): seconds before the worker is killed. (default: 3600)

    Raises:
        RuntimeError: if the worker fails or prints no JSON line (its stderr tail is included).
    """
    env = cpu_memory_env() if memory_env else dict(os.environ)
    proc = subprocess.run(
        [sys.executable, script, "--worker", json.dumps(config)],
        check=False, capture_output=True, text=True, env=env, timeout=timeout,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(
            f"worker for {config} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
        )
    return json.loads(lines[-1])


def machine_info(device: torch.device) -> dict:
    """Torch version, device, threads, cores and the 1-minute load average (for the record)."""
    device = torch.device(device)
    info = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": str(device),
        "cpu_cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "loadavg_1min": os.getloadavg()[0],
    }
    if device.type == "cuda":
        info["device_name"] = torch.cuda.get_device_name(device)
    return info


def emit(record: dict) -> None:
    """Print one JSON line (flushed)."""
    print(json.dumps(record, sort_keys=True), flush=True)


def ratio(a: float | None, b: float | None) -> str:
    """``a / b`` formatted with 2 decimals, or ``"-"`` when either is missing or ``b`` is 0."""
    if a is None or b is None or b == 0:
        return "-"
    return f"{a / b:.2f}"


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub markdown table (cells converted with ``str``)."""
    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---" for _ in headers) + "|",
    ]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
