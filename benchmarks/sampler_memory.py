"""Peak memory of one slim-Graphormer (configs/zinc/graphormer-slim-urpe.yaml) forward + backward on
a batch of random molecule-like graphs (a chain plus n/4 random ring bonds) filling a padded-cell
budget; the measurement behind graph_urpe.data.sampler.DEFAULT_MAX_CELLS.

    python benchmarks/sampler_memory.py CELLS NODES   # e.g. 1048576 32

Prints the number of graphs, the peak RSS before and after (resource.getrusage) and the time.
"""
import resource
import sys
import time

import torch
from torch_geometric.data import Batch, Data

from graph_urpe.nn import Graphormer
from graph_urpe.transforms import AddShortestPathDistance

cells, n = int(sys.argv[1]), int(sys.argv[2])
torch.manual_seed(0)
B = max(1, cells // (n * n))
spd = AddShortestPathDistance(max_distance=None, paths=True)
graphs = []
for _ in range(B):
    src = torch.arange(n - 1)
    dst = src + 1
    extra = torch.randint(0, n, (2, n // 4))  # some rings
    ei = torch.cat([torch.stack([src, dst]), extra], 1)
    ei = ei[:, ei[0] != ei[1]]
    ei = torch.cat([ei, ei.flip(0)], 1)
    g = Data(x=torch.randint(0, 28, (n, 1)), edge_index=ei,
             edge_attr=torch.randint(1, 4, (ei.size(1), 1)), y=torch.zeros(1, 1), num_nodes=n)
    graphs.append(spd(g))
batch = Batch.from_data_list(graphs)
model = Graphormer(1, 28, 4, num_layers=12, embed_dim=80, num_heads=8, ffn_dim=80,
                   attention="urpe", max_distance=36, max_degree=63, max_hops=20,
                   edge_encoding="multi_hop", dropout=0.1, attention_dropout=0.1)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
out = model(batch)
out.sum().backward()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(f"cells={cells} n={n} graphs={B} padded_cells={B*n*n} rss_before={base/2**20:.2f}GiB "
      f"peak={peak/2**20:.2f}GiB delta={(peak-base)/2**20:.2f}GiB time={time.perf_counter()-t:.1f}s", flush=True)
