"""The graph example of docs/tutorials/pyg-layer.md (a PyG DataLoader over molecules,
URPEGraphConv in a user's model), run as written there; then checked: shapes, finite gradients,
padding-independence per graph."""

import re
from pathlib import Path

import torch
from torch_geometric.loader import DataLoader
from torch_geometric.nn import global_mean_pool
from torch_geometric.transforms import Compose
from torch_geometric.utils import from_smiles

from graph_urpe.nn import URPEGraphConv
from graph_urpe.transforms import AddResistanceDistance, AddShortestPathDistance

PAGE = Path(__file__).resolve().parents[1] / "docs" / "tutorials" / "pyg-layer.md"


class Net(torch.nn.Module):
    def __init__(self, width=32):
        super().__init__()
        self.embed = torch.nn.Embedding(119, width)  # from_smiles: column 0 = atomic number
        self.convs = torch.nn.ModuleList(
            URPEGraphConv(width, heads=4, relations=["spd", "resistance"]) for _ in range(2))
        self.out = torch.nn.Linear(width, 1)

    def forward(self, data):
        x = self.embed(data.x[:, 0])
        for conv in self.convs:
            x = conv(x, data.edge_index, data.batch, pair_index=data.pair_index, spd=data.spd,
                     resistance=data.resistance, ptr=data.ptr)
        return self.out(global_mean_pool(x, data.batch))


def test_readme_graph_example():
    torch.manual_seed(0)
    pre = Compose([AddShortestPathDistance(paths=False), AddResistanceDistance()])
    molecules = [pre(from_smiles(s)) for s in ["CCO", "c1ccccc1", "CC(=O)O", "CCN(CC)CC"]]
    loader = DataLoader(molecules, batch_size=2)
    model = Net()
    outputs = [model(batch) for batch in loader]

    assert [tuple(o.shape) for o in outputs] == [(2, 1), (2, 1)]
    torch.cat(outputs).sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
    # Each molecule's output does not depend on what it was batched with (padding is hidden).
    with torch.no_grad():
        alone = torch.cat([model(next(iter(DataLoader([m])))) for m in molecules])
        together = model(next(iter(DataLoader(molecules, batch_size=4))))
    torch.testing.assert_close(alone, together, atol=1e-5, rtol=1e-5)


def test_tutorial_code_runs_as_written(capsys):
    """Both Python blocks of the page, executed as written there, print the shapes their comments
    state (two batches of two molecules, one output each; 4 sequences of 32 tokens, width 64)."""
    torch.manual_seed(0)
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.DOTALL)
    assert len(blocks) == 2
    for code in blocks:
        exec(code, {})  # noqa: S102  (the page's example, as written there)
    printed = capsys.readouterr().out.splitlines()
    assert printed == ["torch.Size([2, 1])", "torch.Size([2, 1])", "torch.Size([4, 32, 64])"]

