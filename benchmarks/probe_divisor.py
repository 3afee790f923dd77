"""Which rule does torch follow for ``torch.relu(x) / d``? (issue 11, "divisor rounding").

For each dtype of x and each kind of divisor (Python float, Python int, numpy float32 /
float64 scalar, 0-dim CPU tensor of each dtype, 0-dim and (1,) CUDA tensors) and many random
divisors (log-uniform over 1e-30..1e30, both signs, plus 0, +-inf, NaN, subnormals), torch's
result is compared bit for bit with candidate rules computed by torch itself:

    recip32:   x * fp32(1 / fp32(d))          (the reciprocal of d rounded to fp32, in fp32)
    recip64:   x * fp32(1 / double(d))        (the reciprocal taken in double, then rounded)
    recip_ct:  x * ct(1 / ct(d))              (ct: the compute type of the result dtype)
    truediv:   x / ct(cast(d))                (true division, d cast to the result dtype)

Prints, per (dtype, kind), how many divisors each rule reproduces exactly, plus the result
dtype and whether torch raises (CPU tensors of shape (1,), mixed dtypes).

    python benchmarks/probe_divisor.py [n_divisors]
"""
import sys

import numpy as np
import torch

from cupy_ops.bench.env import describe, environment

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
CT = {torch.float32: torch.float32, torch.float16: torch.float32, torch.bfloat16: torch.float32,
      torch.float64: torch.float64}


def divisors(n, rng):
    mags = 10.0 ** rng.uniform(-30, 30, n)
    signs = rng.choice([-1.0, 1.0], n)
    out = list(mags * signs)
    out += [0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1e-40, -3e-42, 1e-310, 5e-324,
            1e-3, 7e-4, 3.0, 0.1, 65504.0, 1e5, 3e38, 1e39, 2.0**-149, 2.0**-126]
    return out


def scale_tensor(d_value, rule, ct, device):
    """The multiplier of each rule as a 0-dim CUDA tensor in ct."""
    with np.errstate(all="ignore"):
        if rule == "recip32":
            s = np.float32(1.0) / np.float32(d_value)
        elif rule == "recip64":
            s = np.float32(np.float64(1.0) / np.float64(d_value))
        else:   # recip_ct
            s = (np.float32(1.0) / np.float32(d_value)) if ct == torch.float32 else \
                np.float64(1.0) / np.float64(d_value)
    return torch.tensor(float(s), dtype=ct, device=device)


def candidates(r, d_value, d_cast, dtype):
    """r = relu(x) in dtype; d_value: the divisor's value as a Python float (as torch reads it);
    d_cast: d after the cast to the result dtype (a float)."""
    ct = CT[dtype]
    rc = r.to(ct)
    out = {}
    for rule in ("recip32", "recip64", "recip_ct"):
        out[rule] = (rc * scale_tensor(d_value, rule, ct, r.device)).to(dtype)
    out["truediv"] = (rc / torch.tensor(d_cast, dtype=ct, device=r.device)).to(dtype)
    return out


def same(a, b):
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    bits = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    an, bn = a.isnan(), b.isnan()
    return bool(torch.equal(an, bn) and torch.equal(a.view(bits)[~an], b.view(bits)[~bn]))


def kinds(d, dtype, device):
    """(name, divisor object, its value as torch reads it, value after the cast to dtype)."""
    def cast(v, dt):
        return torch.tensor(v, dtype=torch.float64).to(dt).item()
    yield "float", d, d, cast(d, dtype)
    if np.isfinite(d) and abs(d) < 2**62 and d == d:
        i = int(d) or 1
        yield "int", i, float(i), cast(float(i), dtype)
    yield "np.float64", np.float64(d), d, cast(d, dtype)
    with np.errstate(all="ignore"):
        f32 = np.float32(d)
    yield "np.float32", f32, float(f32), cast(float(f32), dtype)
    for dt in DTYPES:
        t = torch.tensor(d, dtype=torch.float64).to(dt)
        yield f"cpu {str(dt)[6:]}", t, t.item(), cast(t.item(), dtype)
    for dt in (torch.float32, torch.float64):
        t = torch.tensor(d, dtype=torch.float64).to(dt)
        yield f"cuda0d {str(dt)[6:]}", t.to(device), t.item(), cast(t.item(), dtype)


def main(n):
    print(describe(environment()))
    rng = np.random.default_rng(0)
    ds = divisors(n, rng)
    device = "cuda" if torch.cuda.is_available() else "cpu"   # cpu: a dry run of the script
    torch.manual_seed(0)
    base = torch.cat([torch.randn(1 << 15, device=device) * 4,
                      torch.tensor([0.0, -0.0, 1e-40, -1e-40, 1e-45, 3e38, float("inf"),
                                    -float("inf"), float("nan"), 65504.0, 6e-8], device=device)])
    table = {}
    for dtype in DTYPES:
        x = base.to(dtype)
        r = torch.relu(x)
        for d in ds:
            for kind, obj, value, casted in kinds(d, dtype, device):
                try:
                    got = torch.relu(x) / obj
                except Exception as e:   # noqa: BLE001 -- reported
                    table.setdefault((str(dtype)[6:], kind), {"raises": type(e).__name__})
                    continue
                row = table.setdefault((str(dtype)[6:], kind),
                                       {"n": 0, "dtype": str(got.dtype)[6:], "recip32": 0,
                                        "recip64": 0, "recip_ct": 0, "truediv": 0, "none": []})
                row["n"] += 1
                cands = candidates(r, value, casted, dtype) if got.dtype == dtype else {}
                hit = False
                for rule, c in cands.items():
                    if same(got, c):
                        row[rule] += 1
                        hit = True
                if not hit and len(row["none"]) < 3:
                    row["none"].append(f"{d!r}")
    print(f"{'dtype':<9} {'divisor kind':<16} {'result':<9} {'n':>5} {'recip32':>8} {'recip64':>8} "
          f"{'recip_ct':>8} {'truediv':>8}  unexplained")
    for (dt, kind), row in table.items():
        if "raises" in row:
            print(f"{dt:<9} {kind:<16} raises {row['raises']}")
            continue
        print(f"{dt:<9} {kind:<16} {row['dtype']:<9} {row['n']:>5} {row['recip32']:>8} {row['recip64']:>8} "
              f"{row['recip_ct']:>8} {row['truediv']:>8}  {' '.join(row['none'])}")
    # shapes and devices torch accepts
    x = base[:8]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    for name, d in [("cpu (1,)", torch.tensor([2.0])), ("cuda (1,)", torch.tensor([2.0], device=device)),
                    ("cuda (1,1)", torch.tensor([[2.0]], device=device)),
                    ("cuda (1,) f64 / x f16", torch.tensor([2.0], device=device, dtype=torch.float64))]:
        xx = x.half() if "f16" in name else x
        try:
            y = torch.relu(xx) / d
            print(f"x {tuple(xx.shape)} {xx.dtype} / {name}: shape {tuple(y.shape)} dtype {y.dtype}")
        except Exception as e:   # noqa: BLE001
            print(f"x {tuple(xx.shape)} {xx.dtype} / {name}: {type(e).__name__}: {e}")
    x0 = torch.tensor(1.0, device=device, dtype=torch.float16)
    for name, d in [("cpu 0-d f64", torch.tensor(3.0, dtype=torch.float64)), ("np.float32", np.float32(3)),
                    ("cuda 0-d f32", torch.tensor(3.0, device=device))]:
        print(f"x 0-d float16 / {name}: dtype {(torch.relu(x0) / d).dtype}")
    y = torch.relu(x).half()
    try:
        y.div_(torch.tensor([3.0], device=device))
        print("in place f16 x / cuda (1,) f32: allowed")
    except Exception as e:   # noqa: BLE001
        print(f"in place f16 x / cuda (1,) f32: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
