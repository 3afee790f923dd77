"""The benchmark's plot: speedup over torch eager by size (``python -m cupy_ops.bench --plot``;
needs matplotlib, the bench extra)."""

from __future__ import annotations

from .cases import CUBLAS, EAGER, ELEMENTWISE, OURS, Row, Variant

# GEMM families drawn besides "auto"'s: the ones the ModelNews run for float32 (fp16x3 and
# 3xTF32 on Hopper)
MODELNEW_FAMILIES = ("tf32x3", "fp16x3")


def plotted(row: Row, variant: Variant) -> bool:
    """The variants a reader compares with torch: the one each call takes by default (the
    elementwise kernel, the GEMM family "auto" picks), and the ModelNew ones: fp16x3 and 3xTF32
    (fp32 on Hopper) and cuBLAS + relu_div."""
    if not variant.ran:
        return False
    if row.problem in ELEMENTWISE:
        return variant.kind == OURS
    return variant.kind == CUBLAS or (variant.kind == OURS and (variant.auto or variant.family in MODELNEW_FAMILIES))


def series(rows: list[Row]) -> tuple[dict, dict]:
    """The lines of each panel, ``{label: (dashed, [(bytes or FLOPs, speedup)])}``: elementwise by
    bytes moved, 2-D GEMMs by FLOPs (a batch's FLOPs are not one GEMM's size: the batched cases
    are in the tables only), one line per op, dtype and variant; cuBLAS + relu_div's dashed."""
    panels: tuple[dict, dict] = ({}, {})
    for r in rows:
        eager = r.of_kind(EAGER)
        if not eager or not eager.ran or "*" in r.shape:
            continue
        gemm = r.problem not in ELEMENTWISE
        for v in r.variants:
            if plotted(r, v):
                label = f"{r.problem} {r.dtype}" + ("" if not gemm else f", {v.name.replace('cupy_ops ', '')}")
                panels[int(gemm)].setdefault(label, (v.kind == CUBLAS, []))[1].append(
                    (r.flops if gemm else r.bytes, eager.stats.median / v.stats.median)
                )
    return panels


def plot(rows: list[Row], path: str | None, title: str):
    """Speedup vs torch eager by size (``series``): elementwise ops (left), GEMMs (right), each
    panel's legend below it, outside the data; the cuBLAS + relu_div lines dashed. Saved to
    ``path`` (a PNG) when given; returns the matplotlib figure (shown inline in a notebook;
    without a display matplotlib draws off-screen)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 6.4), sharey=True)
    markers = "osD^v<>pX*h"
    for i, (ax, panel) in enumerate(zip(axes, series(rows))):
        for k, (label, (dashed, pts)) in enumerate(sorted(panel.items())):
            pts.sort()
            ax.plot(
                [p[0] for p in pts],
                [p[1] for p in pts],
                marker=markers[k % len(markers)],
                label=label,
                linestyle="--" if dashed else "-",
            )
        ax.set_xscale("log")
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xlabel("bytes moved" if i == 0 else "FLOPs")
        ax.set_title(
            "elementwise ops" if i == 0 else "GEMMs (float32: CUDA cores or 3xTF32; tf32 / 16-bit: tensor cores)",
            fontsize=10,
        )
        if panel:
            # under the axes (anchored below the x label), never over a line
            ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("speedup vs torch eager (higher is better)")
    fig.suptitle(title)
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=110, bbox_inches="tight")
    return fig
