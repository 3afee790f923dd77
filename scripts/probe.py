"""One-off probe of torch facts the kernels must match (run on the GPU machine)."""
import torch

x = torch.tensor([-0.0, 0.0, float("nan"), -1e-40, 1e-40, -float("inf")], device="cuda")
print("torch.relu bits:", torch.relu(x).view(torch.int32).tolist())
h = torch.tensor([1.0, 3.0, 5.0, 1e-7], device="cuda", dtype=torch.float16)
print("fp16 x/0.1 == x*(1/fp16(0.1)):", torch.equal(h / 0.1, (h.float() * (1 / torch.tensor(0.1).half().float())).half()))
f = torch.randn(1 << 20, device="cuda")
print("fp32 x/3 == x*(1/3f):", torch.equal(f / 3.0, f * torch.tensor(1 / 3.0, dtype=torch.float32).item()),
      "== true div:", torch.equal(f / 3.0, f / torch.tensor(3.0, device="cuda")))
