"""``graph-urpe`` as a program (:func:`graph_urpe.cli.program`): after a LightningCLI subcommand
the process ends without the interpreter's teardown, yet with what a normal exit gives: the
command's status, flushed output, the ``atexit`` handlers run, and non-daemon threads waited
for."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from graph_urpe.cli import exit_status

SCRIPT = textwrap.dedent("""
    import atexit, gc, sys, threading, time
    from pathlib import Path

    import graph_urpe.cli as cli

    out = Path(sys.argv[1])
    # registered before the command: runs after every handler the command registers
    atexit.register(lambda: out.write_text(
        f"atexit ran; frozen {gc.get_freeze_count() > 0}; collecting {gc.isenabled()}"))
    if sys.argv[2] == "thread":  # a non-daemon thread still working when the command ends
        def work():
            time.sleep(1.0)
            out.with_suffix(".thread").write_text("done")

        end = cli._end_process
        def start_then_end(code):
            threading.Thread(target=work).start()
            end(code)
        cli._end_process = start_then_end
    sys.stdout.write("buffered, no newline")  # a pipe: block-buffered until flushed
    sys.argv = ["graph-urpe", "predict"]  # a user error inside LightningCLI: status 2
    cli.program()
""")


@pytest.mark.parametrize("case", ["plain", "thread"])
def test_program_ends_like_a_normal_exit(tmp_path, case):
    marker = tmp_path / "atexit.txt"
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(marker), case],
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "predict needs a trained model" in proc.stderr
    assert proc.stdout.startswith("buffered, no newline")
    assert "nanobind" not in proc.stderr  # no teardown noise from frozen objects
    if case == "plain":  # the fast end: imports frozen, handlers run before os._exit
        assert marker.read_text() == "atexit ran; frozen True; collecting True"
    else:  # the normal exit: waits for the thread, objects unfrozen first
        assert (tmp_path / "atexit.thread").read_text() == "done"
        assert marker.read_text() == "atexit ran; frozen False; collecting True"


def test_program_outside_lightning_exits_normally(tmp_path):
    marker = tmp_path / "atexit.txt"
    script = SCRIPT.replace('["graph-urpe", "predict"]', '["graph-urpe", "no-such-command"]')
    proc = subprocess.run([sys.executable, "-c", script, str(marker), "plain"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 2
    assert "unknown subcommand 'no-such-command'" in proc.stderr
    # nothing imported, nothing frozen
    assert marker.read_text() == "atexit ran; frozen False; collecting True"


@pytest.mark.parametrize("code, status", [(None, 0), (0, 0), (2, 2), (257, 1), ("oops", 1)])
def test_exit_status_is_pythons(code, status):
    proc = subprocess.run([sys.executable, "-c", f"raise SystemExit({code!r})"],
                          capture_output=True, check=False)
    assert proc.returncode == status == exit_status(code)
