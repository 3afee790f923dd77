"""NVRTC's PTX of every gemm_sm90a.cu variant, hashed per variant, into a JSON file: run it on
two trees and compare, to show a source edit (a define renamed, a comment) left every compiled
kernel byte-identical, so GPU results of the earlier tree hold for the later one. CPU only.

    python tools/ptx_hashes.py before.json   # ... edit ...   python tools/ptx_hashes.py after.json
"""
import hashlib
import json
import sys

from cupy_ops import compiler, ops  # noqa
from cupy_ops.compiler import nvrtc, registry
src = [s for s in registry.sources() if s.name == "gemm_sm90a.cu"][0]
opts = [o.replace("-arch=sm_90a", "-arch=compute_90a") for o in src.options(src.target("sm_90"))]
out = {}
for e in src.variants:
    r = nvrtc.compile(src.text(), src.name, [e], opts)
    assert r.ok, r.log
    out[e] = hashlib.sha256(r.image).hexdigest()
json.dump(out, open(sys.argv[1], "w"), indent=1)
print(len(out), "variants")
