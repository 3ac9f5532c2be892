"""Write a graph-urpe run's encoder as a shipped encoder file (``ENCODER_FORMAT``).

    python -m graph_urpe.pretrained.export runs/pretrain-descriptors/version_0/checkpoints/last.ckpt
        [--out graph_urpe/pretrained/moses_descriptors_4x64.pt] [--note TEXT]

The file holds only plain data (read back with ``torch.load(weights_only=True)``): ``format``,
``encoder_state`` (float32 tensors of the :class:`~graph_urpe.nn.GraphormerEncoder`),
``encoder_args`` (the network's architecture arguments: numbers, strings, lists),
``featurization`` and ``metadata`` (the pretraining data, labels, updates and metrics). Neither the
optimizer state nor the pretraining head is kept.
"""

from __future__ import annotations

import argparse
import hashlib
import os

import torch

from graph_urpe.pretrained import ENCODER_FORMAT, SHIPPED

_HEAD_ARGS = ("num_tasks", "level", "readout")
DEFAULT_OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), SHIPPED["moses-descriptors"])


def export(checkpoint: str, out: str = DEFAULT_OUT, note: str = "") -> str:
    r"""Write the encoder of :obj:`checkpoint` to :obj:`out`.

    Args:
        checkpoint (str): a Lightning checkpoint of a Graphormer run.
        out (str, optional): the encoder file. (default: the shipped ``moses-descriptors`` file)
        note (str, optional): free text kept in ``metadata["note"]``. (default: ``""``)

    Returns:
        str: the SHA-256 of the written file.

    Raises:
        ValueError: if the checkpoint has no Graphormer encoder.
    """
    blob = torch.load(checkpoint, map_location="cpu", weights_only=True)
    prefix = "model.encoder."
    state = {k[len(prefix):]: v.detach().float().clone().contiguous()
             for k, v in blob["state_dict"].items() if k.startswith(prefix)}
    if not state:
        raise ValueError(f"{checkpoint} has no Graphormer encoder (model.encoder.*)")
    hp = blob.get("hyper_parameters", {})
    args = {k: v for k, v in hp["model"]["init_args"].items() if k not in _HEAD_ARGS}
    metadata = {
        "global_step": int(blob.get("global_step", 0)), "epoch": int(blob.get("epoch", 0)),
        "dataset_source": str(hp.get("dataset_source")),
        "labels": [str(t) for t in hp.get("target_names") or []],
        "pretraining_readout": str(hp["model"]["init_args"].get("readout")),
        "checkpoint_sha256": _sha256(checkpoint), "note": note,
    }
    payload = {"format": ENCODER_FORMAT, "encoder_state": state, "encoder_args": args,
               "featurization": hp.get("featurization"), "metadata": metadata}
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    torch.save(payload, out)
    return _sha256(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--out", default=DEFAULT_OUT)
    parser.add_argument("--note", default="")
    args = parser.parse_args(argv)
    digest = export(args.checkpoint, args.out, args.note)
    print(f"wrote {args.out} ({os.path.getsize(args.out)} bytes) sha256 {digest}")



def _sha256(path: str) -> str:
    """Hex SHA-256 digest of a file."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


if __name__ == "__main__":
    main()
