"""A received checkpoint on the command line: where ``--ckpt_path`` points, and the arguments that
put the checkpoint's checked configuration under the user's own.

The checkpoint's model configuration (and, for ``validate`` / ``test``, its run folder's data
section) reaches LightningCLI only in canonical form, as the first ``--config``: class paths from
graph-urpe's registry and plain values already checked against each class's signature
(:mod:`graph_urpe.received`); the user's ``--config`` files and options come after and win.
"""

from __future__ import annotations

import json
import os.path as osp

from graph_urpe.cli.argv import option_values
from graph_urpe.trust import read_run_data

__all__ = ["checkpoint_arguments", "ckpt_argument"]


def ckpt_argument(argv: list[str]) -> str | None:
    """The value of ``--ckpt_path`` on the command line (the last one), or :obj:`None`."""
    found = option_values(argv, "--ckpt_path")
    value = found[-1].value if found else None
    return None if value in (None, "null", "None", "") else value


def checkpoint_arguments(argv: list[str], sub: str, ckpt_path: str,
                          module_config: dict | None) -> list[str]:
    """``argv`` with the checkpoint's canonical model configuration (and the run folder's
    canonical data section) as the first ``--config``: class paths from graph-urpe's registry
    and plain values checked against each class's signature (:mod:`graph_urpe.received`)."""
    if module_config is None:
        return argv
    # jsonargparse's --config takes a file or the configuration itself (JSON is YAML).
    config = {"model": module_config}
    user = argv[1:]
    run_config = osp.join(osp.dirname(osp.dirname(osp.abspath(ckpt_path))), "config.yaml")
    if sub in ("validate", "test") and osp.isfile(run_config) and not any(
            a.startswith(("--data", "--config", "-c")) for a in user):
        data = read_run_data(run_config)
        if data is not None:
            print(f"{sub}: data as in {run_config} (the run's own data; pass --data options or "
                  "--config to evaluate on other data)")
            config["data"] = data
    return [sub, "--config", json.dumps(config), *user]
