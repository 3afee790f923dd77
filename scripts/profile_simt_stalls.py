"""ncu target: one fp32 matmul 4096^3 by the SIMT kernel and one by cuBLAS (stall-reason profile, see notes/gemm_tuning.md)."""
import torch, cupy_ops
torch.backends.cuda.matmul.allow_tf32 = False
a = torch.randn(4096, 4096, device="cuda"); b = torch.randn(4096, 4096, device="cuda")
cupy_ops.matmul(a, b); torch.matmul(a, b); torch.cuda.synchronize()
