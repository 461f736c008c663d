#!/usr/bin/python3
"""docs/associative-recall.md and its figures (docs/figures/mqar/), written from the study's outputs only:
OUT/runs/*.json (tools/study/mqar.py), OUT/groups/*.json and OUT/aggregate.json (tools/study/mqar_aggregate.py),
OUT/measures.json (tools/study/mqar_measures.py) and the verdicts of tools/study/verdicts.py over RESULTS. Nothing
here computes a statistic or a verdict: it lays out the rows it is given (and sums the runs' training seconds).

usage: tools/study/mqar_report.py [--results tools/study/results] [--page docs/associative-recall.md]
"""
import argparse
import glob
import json
import os
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import verdicts  # noqa: E402
from mqar_aggregate import chosen, chosen_lr, name_of  # noqa: E402   (the rate mqar.py chose: one rule, one place)

ORDER = ["softmax", "linear", "mhla_blocks4", "mhla_blocks8", "mhla_blocks16", "mhla_chunk16", "mhla_blocks16_opauthors", "decay", "gated",
         "none"]
LABEL = {"softmax": "softmax", "linear": "linear", "mhla_blocks4": "MHLA M = 4", "mhla_blocks8": "MHLA M = 8",
         "mhla_blocks16": "MHLA M = 16", "mhla_chunk16": "MHLA chunks of 16",
         "mhla_blocks16_opauthors": "MHLA M = 16, the authors' LM operator", "decay": "decay (RetNet gamma)",
         "gated": "gated (learned per-token gates)", "none": "none (no attention: the control)"}
COLOUR = {"softmax": "#1f77b4", "linear": "#d62728", "mhla_blocks4": "#98df8a", "mhla_blocks8": "#2ca02c",
          "mhla_blocks16": "#006400", "mhla_chunk16": "#17becf",
          "mhla_blocks16_opauthors": "#bcbd22", "decay": "#ff7f0e", "gated": "#9467bd",
          "none": "#7f7f7f"}
MEASURE_LABEL = {"retrieval_mass": "retrieval mass", "retrieval_rank": "retrieval rank",
                 "semiseparable_rank": "semiseparable rank (N/2 split)", "past_block.rank": "past-block rank",
                 "entropy_below_baseline": "entropy below baseline (nats)", "effective_rank": "effective rank",
                 "excess_effective_rank": "excess effective rank",
                 "entropy.support_normalized_mean": "support-normalised entropy"}


def lr_grid_sentence(runs):
    """What the sweeps present say about the rate 1e-3, computed from the runs: how many full three-rate sweeps it
    won, and which (N, P, model) sweeps were run without it (`mqar.py --lrs 3e-3,1e-2`)."""
    sweep = defaultdict(dict)
    for r in runs:
        if r["seed"] == 0:
            sweep[(r["n"], r["pairs"], name_of(r))][r["lr"]] = r["valid_accuracy"]
    full = [by for by in sweep.values() if {1e-3, 3e-3, 1e-2} <= set(by)]
    won = sum(1 for by in full if max(by, key=by.get) == 1e-3)
    short = [k for k, by in sweep.items() if 1e-3 not in by]
    if not short:
        return ""
    return (f"The rate 1e-3 won {won} of the {len(full)} full three-rate sweeps, so the {len(short)} sweeps trained "
            "after that was seen use 3e-3 and 1e-2 only (a dash in the sweep table below).")
def order_key(name):
    return (ORDER.index(name) if name in ORDER else len(ORDER), name)


def fmt(x, digits=3):
    return "-" if x is None else f"{x:.{digits}f}"


def load(path):
    with open(path) as f:
        return json.load(f)


def groups(out):
    docs = {}
    for path in glob.glob(os.path.join(out, "groups", "n*_p*.json")):
        d = load(path)
        docs[(d["group"]["n"], d["group"]["pairs"])] = d
    return docs


def curve_figure(docs, path):
    ns = sorted({n for n, _ in docs})
    fig, axes = plt.subplots(1, len(ns), figsize=(5.2 * len(ns), 3.8), squeeze=False, sharey=True)
    for ax, n in zip(axes[0], ns):
        by = defaultdict(list)
        for (gn, pairs), d in sorted(docs.items()):
            if gn != n:
                continue
            for row in d["mechanisms"]:
                if row["metric"] == "recall_accuracy":
                    by[row["mechanism"]].append((pairs, row))
        for k, (name, pts) in enumerate(sorted(by.items(), key=lambda kv: order_key(kv[0]))):
            xs = [p * 2 ** (0.025 * (k - 4)) for p, _ in pts]   # a small offset per mechanism: intervals stay visible
            ys = [r["mean"] for _, r in pts]
            lo = [r["mean"] - (r["ci_low"] if r["ci_low"] is not None else r["mean"]) for _, r in pts]
            hi = [(r["ci_high"] if r["ci_high"] is not None else r["mean"]) - r["mean"] for _, r in pts]
            colour = COLOUR.get(name, "k")
            ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", ms=4, capsize=2, color=colour,
                        label=f"{LABEL.get(name, name)}", lw=1.2)
            few = [(x, y) for x, y, (_, r) in zip(xs, ys, pts) if r["n"] < 5]   # not yet 5 seeds: hollow
            if few:
                ax.plot(*zip(*few), ls="none", marker="o", ms=6, mfc="white", mec=colour, zorder=5)
        ax.set_xscale("log", base=2)
        ticks = sorted({pairs for gn, pairs in docs if gn == n})
        ax.set_xticks(ticks)
        ax.set_xticklabels([str(t) for t in ticks])
        ax.set_xlim(ticks[0] / 1.3, ticks[-1] * 1.3)
        ax.set_xlabel("key-value pairs P")
        ax.set_title(f"N = {n} tokens")
        ax.axhline(1 / 128, color="#bbbbbb", lw=0.8, ls=":")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("test recall accuracy\n(mean over seeds, 95% t interval)")
    handles = {}   # every mechanism of any panel, once, in the study's order: one legend for the figure
    for ax in axes[0]:
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    labels = sorted(handles, key=lambda lab: order_key(next((k for k, v in LABEL.items() if v == lab), lab)))
    extra = [plt.Line2D([], [], ls="none", marker="o", ms=6, mfc="white", mec="k"),
             plt.Line2D([], [], color="#bbbbbb", lw=0.8, ls=":")]
    fig.legend([handles[lab] for lab in labels] + extra, labels + ["fewer than 5 seeds so far", "chance (1/128)"],
               loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=130, bbox_inches="tight")
    plt.close(fig)


def measure_figure(measures, names, path):
    models = measures["models"]
    layers = sorted({l for m in models for l in m["layers"]})
    fig, axes = plt.subplots(len(layers), len(names), figsize=(3.3 * len(names), 2.9 * len(layers)), squeeze=False)
    for i, layer in enumerate(layers):
        for j, measure in enumerate(names):
            ax = axes[i][j]
            for m in models:
                v = m["layers"].get(layer, {}).get(measure)
                if v is not None:
                    ax.scatter([v], [m["test_accuracy"]], s=14, color=COLOUR.get(name_of(m), "k"), alpha=0.8)
            rho = [c for c in measures["correlations"] if c["layer"] == int(layer) and c["measure"] == measure]
            title = f"layer {layer}: {MEASURE_LABEL.get(measure, measure)}"
            if rho and rho[0]["spearman"] is not None:
                title += f"\nrho {rho[0]['spearman']:+.2f}"
                if rho[0]["ci_low"] is not None:
                    title += f" [{rho[0]['ci_low']:+.2f}, {rho[0]['ci_high']:+.2f}]"
            ax.set_title(title, fontsize=8)
            ax.tick_params(labelsize=7)
            ax.grid(alpha=0.3)
            if j == 0:
                ax.set_ylabel("test recall accuracy", fontsize=8)
    handles = [plt.Line2D([], [], marker="o", ls="", color=COLOUR[n], label=LABEL[n])
               for n in ORDER if any(name_of(m) == n for m in models)]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=7)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default=os.path.join(HERE, "results"))
    ap.add_argument("--page", default=os.path.join(ROOT, "docs", "associative-recall.md"))
    args = ap.parse_args()
    out = os.path.join(args.results, "mqar")
    runs = [load(p) for p in sorted(glob.glob(os.path.join(out, "runs", "*.json")))]
    docs = groups(out)
    agg = load(os.path.join(out, "aggregate.json"))
    measures = load(os.path.join(out, "measures.json")) if os.path.isfile(os.path.join(out, "measures.json")) else None
    figs = os.path.join(ROOT, "docs", "figures", "mqar")
    os.makedirs(figs, exist_ok=True)
    curve_figure(docs, os.path.join(figs, "recall_vs_pairs.png"))
    with open(os.path.join(HERE, "claims.toml"), "rb") as f:
        rules = verdicts.tomllib.load(f)
    rows = verdicts.verdicts(rules, args.results)

    seconds = sum(r["seconds"] for r in runs)
    lr_of = chosen_lr(runs)
    per_seed = chosen(runs)   # {(n, pairs): {name: {seed: accuracy}}}: a wide interval shows which seed failed
    group = agg.get("group", {})
    L = []
    L.append("# Associative recall: where attention is necessary, and what a measure of it says\n")
    L.append("Made by `tools/study/mqar_report.py` from the outputs of `tools/study/mqar.py` (training), "
             "`mqar_aggregate.py` (statistics) and `mqar_measures.py` (`attnscope batch` over every model), with "
             "every verdict computed by `tools/study/verdicts.py` from the rules of `tools/study/claims.toml` "
             "(committed before the models were measured). A **small-model analogue** of the MHLA paper's claims "
             "(arXiv 2601.07832), not a reproduction: 2-layer models of width 64 trained for 1500 steps on one CPU "
             "core each.\n")
    L.append("## The task and the models\n")
    L.append("Multi-query associative recall (MQAR; Zoology, Arora et al. 2023, arXiv 2312.04927), generated by "
             "`mqar.py` in Zoology's layout: N tokens start with P key-value pairs `k1 v1 ... kP vP` (keys from "
             "1..127, values from 128..255, vocabulary 256), then each key is asked once more at a random even "
             "position of the rest; the model must output its value there. Chance is 1/128 = 0.008. Every model: "
             "token and position embeddings, 2 pre-norm blocks of [causal depthwise convolution (kernel 4), "
             "attention, MLP], width 64, 2 heads (d = 32 per head), a linear read-out at the query positions. The "
             "attention is one of the reference layers of `tools/python/attnscope_layers.py`, causal:\n")
    L.append("| model | operator (what each model used) |\n|---|---|")
    L.append("| softmax | softmax(q k^T / sqrt(d)) with the causal mask |")
    L.append("| linear | relu features, row-normalised (attention.md 1.3) |")
    L.append("| MHLA M = 4, 8, 16 | relu features, M equal blocks of tokens, learned lower-triangular Mc per head "
             "(`clamp`: [1e-5, 1] after each step), initialised `causal-local`, row-normalised; trained in the "
             "dense form of the same operator (tests/app/check_reference_layers.py checks it equals the blockwise "
             "form) |")
    L.append("| MHLA M = 16, the authors' LM operator | as MHLA above but the operator of the authors' "
             "language-model code: identity features, no normalisation (`normalize none`); measured under it |")
    L.append("| decay | relu features, RetNet's gamma_h = 1 - 2^(-5-h) per head, row-normalised (attention.md 1.8) |")
    L.append("| gated | relu features, learned per-token gates in (0, 1) (a sigmoid of a linear map of the token), "
             "row-normalised |")
    L.append("| none | the same model without its attention layers: the control (it cannot reach the pairs from a "
             "query beyond its convolution's window) |\n")
    L.append("Protocol (fixed before training): for each mechanism, N and P, seed 0 is trained at learning rates "
             "1e-3, 3e-3 and 1e-2 (AdamW, one-cycle schedule, batch 64) and the best **validation** accuracy "
             "chooses the rate (\"Revisiting associative recall\", arXiv 2508.19029: fixed-state models are only "
             "judged fairly after such a sweep); seeds 1-4 are trained at that rate. "
             + lr_grid_sentence(runs) + " Accuracy is measured on 1024 "
             "held-out examples drawn with their own seed. Intervals over seeds are Student t intervals over the "
             "G seed values (attention.md 2.2, few clusters), computed by the independent reference "
             "`tests/reference/attnref.py` that the test suite checks `attnscope aggregate` against.\n")
    L.append("## Reproducing this page\n")
    L.append("<!-- docs-test: skip trains the models of this page (hours of one core); the page says how long -->")
    L.append("```sh\ntools/build.sh\n"
             "/usr/bin/python3 tools/study/mqar.py --out tools/study/results/mqar --grid full --n 64,128 "
             "--pairs 16,32 --mechanisms softmax,linear,mhla,decay,gated,none --variants blocks16,blocks4,blocks8"
             "   # resumable; several may share the folder\n"
             "/usr/bin/python3 tools/study/mqar.py --out tools/study/results/mqar --grid full --n 128 --pairs 8,16 "
             "--mechanisms softmax,linear,mhla,decay,gated --variants blocks16,blocks4,blocks8 --lrs 3e-3,1e-2\n"
             "/usr/bin/python3 tools/study/mqar.py --out tools/study/results/mqar --grid full --n 128 --pairs 32 "
             "--mechanisms softmax,linear,mhla,decay,gated --variants blocks16 --dump data   # the bundled files\n"
             "/usr/bin/python3 tools/study/mqar_measures.py && /usr/bin/python3 tools/study/mqar_aggregate.py\n"
             "/usr/bin/python3 tools/study/mqar_report.py\n```\n")
    L.append(f"Training time: {seconds / 3600:.1f} h summed over the {len(runs)} runs present (each run's "
             f"`seconds`, one thread each, wall time on this 2-core machine kind shared with other work).\n")

    L.append("## Recall against the number of pairs\n")
    L.append("![recall against pairs](figures/mqar/recall_vs_pairs.png)\n")
    L.append("Each mechanism at its chosen learning rate: test recall accuracy, mean over seeds [95% t interval "
             "over the seed values, as attention.md 2.2 gives it for few clusters: it is not clipped to [0, 1], so "
             "an interval past 0 or 1 says the seeds disagree widely, e.g. some reached recall and some did not].\n")
    for (n, pairs), d in sorted(docs.items()):
        L.append(f"**N = {n}, P = {pairs}**" + (" (the claims' group)" if (n, pairs) == (group.get("n"), group.get("pairs")) else "") + "\n")
        L.append("| model | learning rate | seeds | recall accuracy [95% t interval] | per seed |\n|---|---|---|---|---|")
        for row in sorted((r for r in d["mechanisms"] if r["metric"] == "recall_accuracy"),
                          key=lambda r: order_key(r["mechanism"])):
            lr = lr_of[(n, pairs, row["mechanism"])]
            ci = f" [{fmt(row['ci_low'])}, {fmt(row['ci_high'])}]" if row["ci_low"] is not None else " (one seed)"
            seeds = per_seed.get((n, pairs), {}).get(row["mechanism"], {})
            each = ", ".join(f"{seeds[k]:.3f}" for k in sorted(seeds))
            L.append(f"| {LABEL.get(row['mechanism'], row['mechanism'])} | {lr:g} | {row['clusters']} | "
                     f"{fmt(row['mean'])}{ci} | {each} |")
        L.append("")
    L.append("The learning-rate sweep (seed 0: validation accuracy at each rate; the chosen rate in bold):\n")
    L.append("| N | P | model | 1e-3 | 3e-3 | 1e-2 |\n|---|---|---|---|---|---|")
    sweep = defaultdict(dict)
    for r in runs:
        if r["seed"] == 0:
            sweep[(r["n"], r["pairs"], name_of(r))][r["lr"]] = r["valid_accuracy"]
    for (n, pairs, name), by_lr in sorted(sweep.items(), key=lambda kv: (kv[0][0], kv[0][1], order_key(kv[0][2]))):
        best = max(by_lr, key=by_lr.get)
        cells = [("**%.3f**" if lr == best else "%.3f") % by_lr[lr] if lr in by_lr else "-" for lr in (1e-3, 3e-3, 1e-2)]
        L.append(f"| {n} | {pairs} | {LABEL.get(name, name)} | " + " | ".join(cells) + " |")
    L.append("")

    L.append("## Verdicts\n")
    L.append("Every row is computed by `tools/study/verdicts.py` from `tools/study/claims.toml` and the aggregate "
             "files (`tools/study/results/<task>/aggregate.json`); Holm's adjustment is over every empirical "
             "claim and task tested. A verdict stands only when its task's validity gate passes (MQAR: softmax "
             "recall >= 0.99 and the control without attention <= 0.05 in the claims' group). The ViT and LM rows "
             "stay *not tested* until their aggregate files, with the controls without attention, exist "
             "(docs/trained-mechanisms.md).\n")
    L.append(verdicts.markdown(rows))
    g = verdicts.gate("mqar", rules, args.results)
    L.append(f"MQAR gate: {'passed' if g[0] else 'failed'} ({g[1]}); claims' group N = {group.get('n')}, "
             f"P = {group.get('pairs')}.\n")

    if measures:
        names = [m for m in ("retrieval_mass", "semiseparable_rank", "past_block.rank", "entropy_below_baseline",
                             "excess_effective_rank")
                 if any(c["measure"] == m for c in measures["correlations"])]
        measure_figure(measures, names, os.path.join(figs, "recall_vs_measures.png"))
        L.append("## What a measure of attention says about recall\n")
        L.append(f"Every trained model with attention ({len(measures['models'])} models: every mechanism, group, "
                 "learning rate and seed) was dumped on 16 test examples with the bridge and measured by `attnscope "
                 "batch` under its own mechanism (every layer, head and example; gated models on their first "
                 "example, the bridge writes gates for one). Per model and layer the mean over heads and examples; "
                 "across models Spearman's rank correlation with test recall accuracy and a 95% percentile "
                 "bootstrap interval over models (2000 resamples). `retrieval_mass` is the attention weight a "
                 "query puts on the value token that answers it (the position after the matching key, from the "
                 "file's `retrieval_targets`; docs/formats.md)." +
                 (f" This run measured {measures['measured_now']} models from their dumps and kept the measures of "
                  f"{measures['kept_from_before']} from the previous run of tools/study/mqar_measures.py, whose dumps "
                  "(tens of MB, not committed) stayed on the machine that trained them: a dump is its model, and "
                  "`attnscope batch` measures it the same way every time." if measures.get("kept_from_before") else "") + "\n")
        L.append("![recall against measures](figures/mqar/recall_vs_measures.png)\n")
        L.append("| layer | measure | models | Spearman rho [95% bootstrap] |\n|---|---|---|---|")
        for c in measures["correlations"]:
            ci = f" [{c['ci_low']:+.2f}, {c['ci_high']:+.2f}]" if c["ci_low"] is not None else ""
            rho = "-" if c["spearman"] is None else f"{c['spearman']:+.2f}"
            L.append(f"| {c['layer']} | {MEASURE_LABEL.get(c['measure'], c['measure'])} | {c['models']} | {rho}{ci} |")
        L.append("")
        L.append("The models pool mechanisms, groups and learning rates, so a correlation here says that a measure "
                 "ranks models as recall does, not that it causes recall; the per-mechanism points of the figure "
                 "show how much of it is the mechanism alone.\n")

    L.append("## Bundled models\n")
    L.append("`data/trained_mqar_<model>.h5` (data/README.md): each mechanism's seed-0 model of the claims' group at "
             "its chosen learning rate, dumped on 8 test examples (gated: the first) with the task's labels "
             "(`retrieval_targets`, `mqar_inputs`, `mqar_labels`, `mqar_key_positions`) and its test accuracy "
             "as attributes: `attnscope analyze --q data/trained_mqar_softmax.h5:/layers/0/q --k "
             "data/trained_mqar_softmax.h5:/layers/0/k` reports `retrieval_mass` with the rest.\n")
    L.append("The desktop app opens them with the file's causal mask, MHLA's blocks and learned Mc (`attnscope "
             "data/trained_mqar_mhla_blocks16.h5`; layer 0, example 0, head 0):\n")
    L.append("![the app on the bundled MHLA model](screenshot-mqar-mhla.png)\n")

    missing = []
    for (n, pairs), d in sorted(docs.items()):
        have = {r["mechanism"]: r["clusters"] for r in d["mechanisms"] if r["metric"] == "recall_accuracy"}
        short = [f"{LABEL.get(k, k)} ({v} seed{'s' if v != 1 else ''})" for k, v in sorted(have.items(), key=lambda kv: order_key(kv[0]))
                 if v < 5]
        absent = [LABEL[k] for k in ORDER if k not in have and k not in ("mhla_chunk16", "mhla_blocks16_opauthors")]
        if short or absent:
            missing.append(f"- N = {n}, P = {pairs}: " + "; ".join(
                ([f"fewer than 5 seeds: {', '.join(short)}"] if short else []) +
                ([f"not trained: {', '.join(absent)}"] if absent else [])))
    if missing:
        L.append("## Not yet trained\n")
        L.append("Listed from the runs present, so the page says what its curves and verdicts lack:\n")
        L.extend(missing)
        L.append("")
    with open(args.page, "w") as f:
        f.write("\n".join(L))
    print("wrote", args.page)


if __name__ == "__main__":
    main()
