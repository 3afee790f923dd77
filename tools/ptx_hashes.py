"""NVRTC's PTX of every gemm_sm90a.cu kernel, hashed per kernel (each `.entry`, by its mangled
name), into a JSON file: run it on two trees and compare, to show a source edit (a define
renamed, a comment, a helper factored out) left every compiled kernel byte-identical, so GPU
results of the earlier tree hold for the later one, or which kernels it changed. Per entry, not
per module: every module also carries the file's non-template kernels (fp16x3_split, ...), so
an edit to one of those changes every module's PTX. CPU only.

    python tools/ptx_hashes.py before.json   # ... edit ...   python tools/ptx_hashes.py after.json
    python tools/ptx_hashes.py --compare before.json after.json
"""
import hashlib
import json
import re
import sys

if sys.argv[1] == "--compare":
    a, b = (json.load(open(p)) for p in sys.argv[2:4])
    changed = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    print(f"{len(a)} / {len(b)} kernels, {len(changed)} differ" + "".join(f"\n  {k}" for k in changed))
    sys.exit(1 if changed else 0)

from cupy_ops import compiler, ops  # noqa: E402,F401  (declares the kernels)
from cupy_ops.compiler import nvrtc, registry  # noqa: E402

src = [s for s in registry.sources() if s.name == "gemm_sm90a.cu"][0]
opts = [o.replace("-arch=sm_90a", "-arch=compute_90a") for o in src.options(src.target("sm_90"))]
out = {}
for e in src.variants:
    r = nvrtc.compile(src.text(), src.name, [e], opts)
    assert r.ok, r.log
    for m in re.finditer(r"\.entry (\S+?)\(.*?\n}\n", r.image.decode(), re.S):
        out[m.group(1)] = hashlib.sha256(m.group(0).encode()).hexdigest()
json.dump(out, open(sys.argv[1], "w"), indent=1)
print(len(out), "kernels from", len(src.variants), "variants")
