"""ModelNew trained under DistributedDataParallel (NCCL, one process per GPU) matches the same
training on one GPU (DDP averages the shards' gradients: equal to the full batch's for a mean
loss over equal shards)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from cupy_ops.models import linear_relu_div

from models import ddp_worker

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.gpu


def single_gpu_reference(variant):
    torch.manual_seed(42)
    model = getattr(linear_relu_div, variant)(ddp_worker.IN, ddp_worker.OUT, 2.0).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for x, y in ddp_worker.batches("cuda"):
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()
    return model.state_dict()


@pytest.mark.parametrize("variant", ["ModelNew", "ModelNewNaive"])
def test_ddp_matches_single_gpu(variant, cuda, tmp_path):
    n = torch.cuda.device_count()
    if n < 2:
        pytest.skip(f"DDP needs at least two GPUs, this machine has {n}")
    out = tmp_path / "state.pt"
    env = dict(
        os.environ,
        PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT / 'tests' / 'models'}",
        NCCL_NVLS_ENABLE="0",
        TORCH_SYMM_MEM_DISABLE_MULTICAST="1",
        NVSHMEM_DISABLE_NVLS="1",
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            f"--nproc_per_node={min(n, 2)}",
            "--master_port=29533",
            str(ROOT / "tests" / "models" / "ddp_worker.py"),
            str(out),
            variant,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ddp_state = torch.load(out)
    ref = single_gpu_reference(variant)
    for k, v in ref.items():
        torch.testing.assert_close(ddp_state[k], v.cpu(), atol=2e-5, rtol=1e-4)
