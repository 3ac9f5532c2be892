"""The LightningCLI help kept after its first call (graph_urpe/cli/help_cache.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from graph_urpe.cli import help_cache


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("GRAPH_URPE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("GRAPH_URPE_HELP_CACHE", raising=False)
    return tmp_path / "cache"


def test_help_requested_only_plain_help(monkeypatch):
    assert help_cache.help_requested(["fit", "--help"])
    assert help_cache.help_requested(["predict", "--config", "x.yaml", "-h"])
    assert not help_cache.help_requested(["fit"])
    assert not help_cache.help_requested(["--help"])  # graph-urpe's own help needs no cache
    assert not help_cache.help_requested(["fit", "--model.help", "X", "--help"])
    assert not help_cache.help_requested(["fit", "--print_config", "--help"])
    monkeypatch.setenv("GRAPH_URPE_HELP_CACHE", "0")
    assert not help_cache.help_requested(["fit", "--help"])


def test_capture_stores_only_successful_help(cache_dir, capsys):
    with pytest.raises(SystemExit), help_cache.capture_help("k1"):
        print("usage: graph-urpe fit ...")
        raise SystemExit(0)
    assert capsys.readouterr().out == "usage: graph-urpe fit ...\n"  # passed through
    assert help_cache.read_help("k1") == "usage: graph-urpe fit ...\n"
    with pytest.raises(SystemExit), help_cache.capture_help("k2"):
        print("partial")
        raise SystemExit(2)
    with pytest.raises(RuntimeError), help_cache.capture_help("k3"):
        print("partial")
        raise RuntimeError
    assert help_cache.read_help("k2") is None and help_cache.read_help("k3") is None
    assert sorted(os.listdir(cache_dir / "help")) == ["k1.txt"]  # no temporary files left


def test_key_follows_files_and_width(tmp_path, monkeypatch):
    config = tmp_path / "my.yaml"
    config.write_text("trainer: {max_epochs: 3}\n")
    argv = ["fit", "--config", str(config), "--help"]
    first = help_cache.help_key(argv)
    assert help_cache.help_key(argv) == first
    assert help_cache.help_key(["predict", *argv[1:]]) != first
    config.write_text("trainer: {max_epochs: 30}\n")
    os.utime(config, ns=(1, 1))  # a different modification time
    assert help_cache.help_key(argv) != first
    monkeypatch.setenv("COLUMNS", "57")
    narrow = help_cache.help_key(argv)
    monkeypatch.setenv("COLUMNS", "143")
    assert help_cache.help_key(argv) != narrow


def test_unwritable_folder_still_prints(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("GRAPH_URPE_CACHE_DIR", str(blocker))  # a file, not a folder
    with pytest.raises(SystemExit), help_cache.capture_help("k"):
        print("help text")
        raise SystemExit(0)
    assert capsys.readouterr().out == "help text\n"
    assert help_cache.read_help("k") is None


def test_cached_help_printed_without_torch(cache_dir):
    """A stored text is printed as it is, and neither torch nor Lightning is imported."""
    argv = ["fit", "--help"]
    env = {**os.environ, "GRAPH_URPE_CACHE_DIR": str(cache_dir), "COLUMNS": "100"}
    code = ("from graph_urpe.cli import help_cache; "
            "from graph_urpe.cli.configs import resolve_config_args; "
            f"print(help_cache.help_key(resolve_config_args({argv!r})))")
    key = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.strip()
    (cache_dir / "help").mkdir(parents=True)
    (cache_dir / "help" / f"{key}.txt").write_text("usage: graph-urpe fit [-h] ...\n")
    run = ("import sys; from graph_urpe.cli import main\n"
           "try:\n    main(['fit', '--help'])\nexcept SystemExit as e:\n    assert not e.code\n"
           "print('torch' in sys.modules, 'lightning' in sys.modules, file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", run], env=env, capture_output=True, text=True,
                          check=True)
    assert done.stdout == "usage: graph-urpe fit [-h] ...\n"
    assert done.stderr.strip() == "False False"
