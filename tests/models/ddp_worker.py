"""Worker for test_ddp.py, started by torch.distributed.run: trains ModelNew under DDP (NCCL,
one process per GPU) on this rank's shard and saves the final parameters from rank 0."""

import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from cupy_ops.models import linear_relu_div

STEPS, BATCH, IN, OUT = 4, 64, 256, 128


def batches(device):
    g = torch.Generator().manual_seed(7)
    for _ in range(STEPS):
        yield torch.randn(BATCH, IN, generator=g).to(device), torch.randn(BATCH, OUT, generator=g).to(device)


def main(path: str, variant: str) -> None:
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(rank)
    device = torch.device("cuda", rank)
    torch.manual_seed(42)
    model = getattr(linear_relu_div, variant)(IN, OUT, 2.0).to(device)
    ddp = DDP(model, device_ids=[rank])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    shard = BATCH // world
    for x, y in batches(device):
        opt.zero_grad()
        loss = F.mse_loss(ddp(x[rank * shard : (rank + 1) * shard]), y[rank * shard : (rank + 1) * shard])
        loss.backward()
        opt.step()
    if rank == 0:
        torch.save({k: v.cpu() for k, v in model.state_dict().items()}, path)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
