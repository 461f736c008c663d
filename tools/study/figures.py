"""The figures of docs/trained-mechanisms.md (docs/figures/trained/), drawn with matplotlib's Agg backend from the
statistics `attnscope aggregate` computed (tools/study/measures.py): nothing here computes a statistic, it draws
the rows it is given.

- TASK_measures.png: per mechanism, the measures that carry the verdicts (excess effective rank, entropy below
  the content-free baseline, support-normalised entropy; for the causal LM the past block's rank against d):
  each seed's mean with its 95% bootstrap interval over that model's units (`aggregate --by file`), and the
  seeds together with the clustered interval (`aggregate --cluster file`: t over the seed means below 10 seeds).
- TASK_growth_m.png: MHLA and linear attention on the MHLA models' q/k against the block count M (preset
  mixing): excess effective rank and 99% energy rank, mean and two-stage 95% interval at each M."""
import json
import os
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIGS = os.path.join(ROOT, "docs", "figures", "trained")
MECHS = ("softmax", "linear", "mhla")
COLOURS = {"softmax": "#1f77b4", "linear": "#d62728", "mhla": "#2ca02c"}
SEED = re.compile(r"_s(\d+)\.h5$")


def _per_seed(ctx, mech, path):
    """[(seed, row)] of one metric from `aggregate --by file` of the mechanism's batch."""
    out = []
    for key, (rows, _) in ctx["per_seed"][mech].items():
        m = SEED.search(json.loads(key).get("file") or "")
        if m and (mech, path) in rows:
            out.append((int(m.group(1)), rows[(mech, path)]))
    return sorted(out)


def _bar(ax, x, row, colour, size, width):
    mean, lo, hi = float(row["mean"]), float(row["ci_low"]), float(row["ci_high"])
    ax.errorbar([x], [mean], yerr=[[mean - lo], [hi - mean]], fmt="o", ms=size, color=colour, elinewidth=width,
                capsize=2)


def measures_figure(ctx, task, d):
    """TASK_measures.png; returns its file name."""
    panels = [("excess_effective_rank", "excess effective rank"), ("entropy_below_baseline", "entropy below A0 (nats)"),
              ("entropy.support_normalized_mean", "support-normalised entropy")]
    if task == "lm":
        panels.append(("past_block.rank", "past-block rank"))
    fig, axes = plt.subplots(1, len(panels), figsize=(2.6 * len(panels), 2.6), dpi=110)
    for ax, (path, title) in zip(axes, panels):
        for i, mech in enumerate(MECHS):
            for j, (seed, row) in enumerate(_per_seed(ctx, mech, path)):
                _bar(ax, i - 0.3 + 0.1 * j, row, COLOURS[mech], 3, 1)   # up to 5 seeds left of the pooled one
            pooled = ctx["own"][mech][0].get((mech, path))
            if pooled:
                _bar(ax, i + 0.22, pooled, "black", 4, 1.8)
        if path == "past_block.rank":
            ax.axhline(d, color="grey", lw=0.8, ls=":")
            ax.text(2.45, d, "d", va="bottom", ha="right", fontsize=7, color="grey")
            ax.axhline(4 * d, color="grey", lw=0.8, ls="--")
            ax.text(2.45, 4 * d, "4d (MHLA cap)", va="bottom", ha="right", fontsize=7, color="grey")
        if path in ("excess_effective_rank", "entropy_below_baseline"):
            ax.axhline(0, color="grey", lw=0.6)
        ax.set_xticks(range(len(MECHS)), MECHS, fontsize=8)
        ax.set_xlim(-0.5, 2.5)
        ax.tick_params(labelsize=7)
        ax.set_title(title, fontsize=9)
    seeds = sorted({seed for mech in MECHS for seed, _ in _per_seed(ctx, mech, panels[0][0])})
    fig.text(0.5, 0.005, f"coloured: seeds {', '.join(map(str, seeds))} (95% bootstrap over each model's units); black: "
             f"the {len(seeds)} seeds together (95% interval over seeds: t over the seed means)", ha="center", fontsize=7)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    name = f"{task}_measures.png"
    fig.savefig(os.path.join(FIGS, name))
    plt.close(fig)
    return name


def growth_figure(task, sweep_agg, ms, mixing):
    """TASK_growth_m.png; returns its file name."""
    rows = sweep_agg[0]
    panels = [("excess_effective_rank", "excess effective rank"), ("energy_rank_99", "99% energy rank")]
    fig, axes = plt.subplots(1, 2, figsize=(6.4, 2.6), dpi=110)
    for ax, (key, title) in zip(axes, panels):
        for mech in ("linear", "mhla"):
            got = [(m, rows[(f"{mech} M={m}", key)]) for m in ms if (f"{mech} M={m}", key) in rows]
            if not got:
                continue
            xs = [m for m, _ in got]
            ax.fill_between(xs, [float(r["ci_low"]) for _, r in got], [float(r["ci_high"]) for _, r in got],
                            color=COLOURS[mech], alpha=0.25, lw=0)
            ax.plot(xs, [float(r["mean"]) for _, r in got], "o-", ms=3, color=COLOURS[mech], label=mech)
        ax.set_xscale("log", base=2)
        ax.set_xticks(ms, [str(m) for m in ms])
        ax.set_xlabel(f"M (preset {mixing} mixing)", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.set_title(title, fontsize=9)
    axes[0].legend(fontsize=7, frameon=False)
    fig.text(0.5, 0.005, "mean and two-stage 95% interval (seeds, then units)", ha="center", fontsize=7)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    name = f"{task}_growth_m.png"
    fig.savefig(os.path.join(FIGS, name))
    plt.close(fig)
    return name


def task_figures(ctx, task, d, sweep_agg, ms):
    """Draws the task's figures; returns the page's markdown lines for them."""
    from measures import SWEEP
    os.makedirs(FIGS, exist_ok=True)
    a = measures_figure(ctx, task, d)
    b = growth_figure(task, sweep_agg, ms, SWEEP[task][1])
    first = ("Each model under its own mechanism: excess effective rank, entropy below the content-free baseline, "
             "support-normalised entropy" + (" and the strictly-past block's rank against d = 16 and MHLA's cap 4d"
                                               if task == "lm" else "") + ".")
    return [first, "", f"![measures per mechanism and seed](figures/trained/{a})", "",
            "MHLA's excess effective rank and 99% energy rank against M on its own q/k (the growth claim).", "",
            f"![growth with M](figures/trained/{b})", ""]
