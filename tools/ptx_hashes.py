"""NVRTC's PTX of every built-in kernel variant, hashed per kernel (each `.entry`, by its source,
architecture and mangled name), into a JSON file: run it on two trees and compare, to show that
a source edit (a define renamed, a comment, a helper factored out, a host module split) left
every compiled kernel byte-identical, so GPU results of the earlier tree hold for the later one,
or which kernels it changed. Per entry, not per module: a module also carries its file's
non-template kernels (fp16x3_split, ...), so an edit to one of those changes every module's PTX.
CPU only; the PTX of compute_80 and compute_90(a), in parallel processes.

    python tools/ptx_hashes.py before.json   # ... edit ...   python tools/ptx_hashes.py after.json
    python tools/ptx_hashes.py --compare before.json after.json
"""

import hashlib
import json
import os
import re
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ARCHS = ("sm_80", "sm_90")


def _hash(job):
    name, arch, exprs = job
    from cupy_ops import ops  # noqa: F401  (declares the kernels)
    from cupy_ops.compiler import nvrtc, registry

    src = next(s for s in registry.sources() if s.name == name)
    target = src.target(arch)
    if target is None:  # an sm_90a source on sm_80
        return {}
    opts = [o.replace("-arch=sm_", "-arch=compute_") for o in src.options(target)]
    out = {}
    for e in exprs:
        r = nvrtc.compile(src.text(), src.name, [e], opts)
        if not r.ok:
            raise SystemExit(f"{name} {e} for {target} does not compile:\n{r.log}")
        for m in re.finditer(r"\.entry (\S+?)\(.*?\n}\n", r.image.decode(), re.S):
            out[f"{name}:{arch}:{m.group(1)}"] = hashlib.sha256(m.group(0).encode()).hexdigest()
    return out


def main(argv) -> int:
    if len(argv) == 3 and argv[0] == "--compare":
        a, b = (json.loads(Path(p).read_text()) for p in argv[1:3])
        changed = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
        print(f"{len(a)} / {len(b)} kernels, {len(changed)} differ" + "".join(f"\n  {k}" for k in changed))
        return 1 if changed else 0
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    from cupy_ops import ops  # noqa: F401
    from cupy_ops.compiler import registry

    jobs = [
        (s.name, arch, list(s.variants)[i : i + 8])
        for s in registry.sources()
        for arch in ARCHS
        for i in range(0, len(s.variants), 8)
    ]
    out = {}
    with ProcessPoolExecutor(min(8, os.cpu_count() or 1)) as pool:
        for part in pool.map(_hash, jobs):
            out.update(part)
    with open(argv[0], "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
    print(len(out), "kernels from", sum(len(s.variants) for s in registry.sources()), "variants")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
