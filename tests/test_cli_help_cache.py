"""The LightningCLI help shipped with the package and kept after its first call
(graph_urpe/cli/help_cache.py, graph_urpe/cli/parser.py)."""

from __future__ import annotations

import json
import os
import shutil
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


def test_key_follows_files_not_width(tmp_path, monkeypatch):
    config = tmp_path / "my.yaml"
    config.write_text("trainer: {max_epochs: 3}\n")
    argv = ["fit", "--config", str(config), "--help"]
    first = help_cache.help_key(argv)
    assert help_cache.help_key(argv) == first
    assert help_cache.help_key(["predict", *argv[1:]]) != first
    config.write_text("trainer: {max_epochs: 30}\n")
    os.utime(config, ns=(1, 1))  # a different modification time
    assert help_cache.help_key(argv) != first
    changed = help_cache.help_key(argv)
    monkeypatch.setenv("COLUMNS", "57")  # the help is 78 columns wide on every terminal
    assert help_cache.help_key(argv) == changed
    monkeypatch.setenv("JSONARGPARSE_DEFAULT_ENV", "true")  # adds ENV: lines to the help
    assert help_cache.help_key(argv) != changed


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


def _manifest() -> dict:
    with open(os.path.join(help_cache.SHIPPED_FOLDER, "manifest.json"), encoding="utf-8") as f:
        return json.load(f)


def _skip_unless_shipped_environment() -> None:
    """The shipped help is written under one Python minor version and one set of library
    versions; under others it is not used (and not checked here)."""
    manifest, here = _manifest(), help_cache.shipped_environment()
    if any(manifest[k] != here[k] for k in ("python", "libraries")):
        pytest.skip("the shipped help was written with other library / Python versions")


def test_shipped_help_is_current():
    """The manifest's digest is that of the package's sources: after changing any .py / .yaml
    file of the package, `python -m graph_urpe.cli.ship_help` writes the help again."""
    _skip_unless_shipped_environment()
    assert _manifest()["package"] == help_cache.package_digest(), (
        "graph_urpe/cli/help/ was written for other sources: run `python -m graph_urpe.cli."
        "ship_help` and commit graph_urpe/cli/help/ (else the first `fit --help` takes 10 s)")


def test_package_digest_follows_the_configs_link(tmp_path, monkeypatch):
    """In a source checkout graph_urpe/configs is a link to ../configs, in an installed wheel a
    folder: the digest reads through the link, so both give the same digest and an edited
    default.yaml changes it."""
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "default.yaml").write_text("trainer: {max_epochs: 3}\n")
    source, installed = tmp_path / "source", tmp_path / "installed"
    source.mkdir()
    (source / "a.py").write_text("x = 1\n")
    (source / "configs").symlink_to("../configs")
    shutil.copytree(source, installed, symlinks=False)

    def digest(folder) -> str:
        monkeypatch.setattr(help_cache, "_PACKAGE_DIR", str(folder))
        help_cache.package_digest.cache_clear()
        return help_cache.package_digest()

    try:
        linked = digest(source)
        assert digest(installed) == linked
        (tmp_path / "configs" / "default.yaml").write_text("trainer: {max_epochs: 30}\n")
        assert digest(source) != linked
    finally:
        help_cache.package_digest.cache_clear()


def test_shipped_help_refused_unless_it_matches(tmp_path, monkeypatch):
    folder = tmp_path / "help"
    shutil.copytree(help_cache.SHIPPED_FOLDER, folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest.update(help_cache.shipped_environment())  # as if written for this install
    (folder / "manifest.json").write_text(json.dumps(manifest))
    fit = (folder / "fit.txt").read_text()
    assert help_cache.shipped_help(["fit", "--help"], str(folder)) == fit
    assert help_cache.shipped_help(["fit", "-h"], str(folder)) == fit
    assert help_cache.shipped_help(["predict", "--help"], str(folder)).startswith(
        "usage: graph-urpe [options] predict")
    for argv in (["fit", "--config", "x.yaml", "--help"], ["fit"], ["plot", "--help"]):
        assert help_cache.shipped_help(argv, str(folder)) is None, argv
    monkeypatch.setenv("JSONARGPARSE_DEFAULT_ENV", "true")
    assert help_cache.shipped_help(["fit", "--help"], str(folder)) is None
    monkeypatch.delenv("JSONARGPARSE_DEFAULT_ENV")
    for key, value in (("package", "0" * 64), ("python", "2.7"),
                       ("libraries", {**manifest["libraries"], "lightning": "0.1"})):
        (folder / "manifest.json").write_text(json.dumps({**manifest, key: value}))
        assert help_cache.shipped_help(["fit", "--help"], str(folder)) is None, key
    (folder / "manifest.json").write_text("{not json")
    assert help_cache.shipped_help(["fit", "--help"], str(folder)) is None
    (folder / "manifest.json").unlink()
    assert help_cache.shipped_help(["fit", "--help"], str(folder)) is None


def test_first_help_call_prints_shipped_text_without_torch(cache_dir):
    """With an empty cache, `graph-urpe fit --help` prints the shipped text and imports neither
    torch nor Lightning (issue 32: the first call was 15 CPU s)."""
    _skip_unless_shipped_environment()
    if _manifest()["package"] != help_cache.package_digest():
        pytest.skip("the shipped help is stale (test_shipped_help_is_current says so)")
    run = ("import sys; from graph_urpe.cli import main\n"
           "try:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n    assert not e.code\n"
           "print('torch' in sys.modules, 'lightning' in sys.modules, file=sys.stderr)")
    env = {**os.environ, "GRAPH_URPE_CACHE_DIR": str(cache_dir), "COLUMNS": "200"}
    for sub in ("fit", "predict"):
        done = subprocess.run([sys.executable, "-c", run, sub, "--help"], env=env,
                              capture_output=True, text=True, check=True)
        with open(os.path.join(help_cache.SHIPPED_FOLDER, f"{sub}.txt"), encoding="utf-8") as f:
            assert done.stdout == f.read()
        assert done.stderr.strip() == "False False"
    assert not (cache_dir / "help").exists()  # nothing written: the shipped text was used


@pytest.mark.slow  # four fresh processes that build the LightningCLI parsers (about 40 CPU s)
def test_shipped_help_equals_live_help(tmp_path):
    """Each shipped text (written by ship_help, all four in one process) equals what
    `graph-urpe SUBCOMMAND --help` prints live in a fresh process (cache off), here run from
    another folder on a wider terminal."""
    _skip_unless_shipped_environment()
    env = {**os.environ, "GRAPH_URPE_HELP_CACHE": "0", "COLUMNS": "200"}
    for sub in help_cache.SHIPPED_SUBCOMMANDS:
        live = subprocess.run([sys.executable, "-m", "graph_urpe.cli", sub, "--help"], env=env,
                              cwd=tmp_path, capture_output=True, text=True, check=True).stdout
        with open(os.path.join(help_cache.SHIPPED_FOLDER, f"{sub}.txt"), encoding="utf-8") as f:
            assert live == f.read(), (
                f"the shipped {sub} help differs from the live one: run `python -m "
                "graph_urpe.cli.ship_help`")
