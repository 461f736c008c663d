#!/usr/bin/python3
"""The MQAR runs (tools/study/mqar.py, OUT/runs/*.json) as aggregate files in the layout of `attnscope aggregate
--json` (rows `mechanisms` and `pairs`), which tools/study/verdicts.py reads.

Per (N, pairs) group: each mechanism (MHLA variants named mhla_blocks4, mhla_chunk16, ...) at its chosen learning
rate (the best validation accuracy of seed 0, as mqar.py chose it), its seeds' test accuracies as the clusters;
rows for every mechanism and every pair, with the statistics of attention.md 2.2 for few clusters: the t interval
over the G seed values (paired differences for pairs), `agree`, the cluster-level t test `p_t`, the sign test
`p_sign` and Holm over the table (`p_holm`). They are computed by tests/reference/attnref.py, the independent
implementation the test suite checks `attnscope aggregate` against (mpmath's Student t). `attnscope aggregate`
itself cannot take these records: its mechanism names are AttnScope's mechanisms, and MHLA variants are paired here.

Writes OUT/groups/n<N>_p<P>.json for every group, and OUT/aggregate.json: the claims' group (the most mechanisms
trained at >= 2 seeds, then the largest N, then the largest pair count: the claims' "largest pair count"), plus `recall_drop_n64_to_n256`
rows (accuracy at N = 64 minus at N = 256, same pairs and seed) where both exist, plus, when OUT/measures.json exists
(tools/study/mqar_measures.py), rows of every measure in the claims' group (per model the mean over its layers).

usage: tools/study/mqar_aggregate.py [--runs tools/study/results/mqar/runs] [--out tools/study/results/mqar]
"""
import argparse
import glob
import json
import os
import sys
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "reference"))
import attnref  # noqa: E402

METRIC = "recall_accuracy"


def name_of(run):
    return run["mechanism"] + "".join(f"_{k}{v}" for k, v in sorted(run["variant"].items()))


def chosen_lr(runs):
    """{(n, pairs, name): the learning rate of seed 0's best validation accuracy} (mqar.py's stage 1)."""
    by = defaultdict(list)
    for r in runs:
        if r["seed"] == 0:
            by[(r["n"], r["pairs"], name_of(r))].append(r)
    return {k: max(rs, key=lambda r: r["valid_accuracy"])["lr"] for k, rs in by.items()}


def chosen(runs):
    """{(n, pairs): {name: {seed: accuracy}}} at each mechanism's chosen learning rate."""
    lr_of = chosen_lr(runs)
    out = defaultdict(dict)
    for r in runs:
        k = (r["n"], r["pairs"], name_of(r))
        if k in lr_of and r["lr"] == lr_of[k]:
            out[(r["n"], r["pairs"])].setdefault(k[2], {})[r["seed"]] = r["test_accuracy"]
    return out


def stats_row(values):
    lo, hi, agree, p = attnref.few_cluster_stats(values, attnref._mean(values)) if len(values) < attnref.FEW_CLUSTERS \
        else (None, None, None, None)
    if len(values) >= attnref.FEW_CLUSTERS:   # many seeds: the percentile bootstrap, as aggregate does
        lo, hi, _ = attnref.mean_interval(values)
        agree = sum(1 for v in values if (v > 0) == (attnref._mean(values) > 0))
        p = None
    return lo, hi, agree, p, ("t" if len(values) < attnref.FEW_CLUSTERS else "bootstrap") if len(values) >= 2 else "none"


def group_document(table, metric=METRIC):
    doc = {"mechanisms": [], "pairs": []}
    names = sorted(table)
    for name in names:
        v = [table[name][s] for s in sorted(table[name])]
        lo, hi, agree, _, method = stats_row(v)
        doc["mechanisms"].append(dict(mechanism=name, metric=metric, n=len(v), mean=attnref._mean(v), ci_low=lo,
                                      ci_high=hi, clusters=len(v), ci_method=method, agree=agree, seeds=sorted(table[name])))
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            seeds = sorted(set(table[a]) & set(table[b]))
            if len(seeds) < 2:
                continue
            d = [table[a][s] - table[b][s] for s in seeds]
            lo, hi, agree, p, method = stats_row(d)
            doc["pairs"].append(dict(mechanism_a=a, mechanism_b=b, metric=metric, n=len(d), mean_diff=attnref._mean(d),
                                     ci_low=lo, ci_high=hi, p_sign=attnref.sign_test_p(d), clusters=len(d),
                                     ci_method=method, agree=agree, p_t=p, seeds=seeds))
    for row, p in zip(doc["pairs"], attnref.holm([r["p_t"] for r in doc["pairs"]])):
        row["p_holm"] = p
    return doc


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", default=os.path.join(HERE, "results", "mqar", "runs"))
    ap.add_argument("--out", default=os.path.join(HERE, "results", "mqar"))
    args = ap.parse_args()
    runs = []
    for path in sorted(glob.glob(os.path.join(args.runs, "*.json"))):
        with open(path) as f:
            runs.append(json.load(f))
    tables = chosen(runs)
    os.makedirs(os.path.join(args.out, "groups"), exist_ok=True)
    docs = {}
    for (n, pairs), table in sorted(tables.items()):
        docs[(n, pairs)] = group_document(table)
        docs[(n, pairs)]["group"] = dict(n=n, pairs=pairs)
        with open(os.path.join(args.out, "groups", f"n{n}_p{pairs}.json"), "w") as f:
            json.dump(docs[(n, pairs)], f, indent=1)
    if not docs:
        sys.exit("no runs in " + args.runs)
    # The claims' group: the group with the most mechanisms trained at >= 2 seeds, then the largest N, then the
    # largest pair count (a larger N trained for a few mechanisms only, e.g. for recall_drop, does not take it).
    def complete(k):
        return sum(1 for seeds in tables[k].values() if len(seeds) >= 2)
    key = max(docs, key=lambda k: (complete(k), k[0], k[1]))
    doc = dict(docs[key])
    # recall_drop_n64_to_n256: per seed, accuracy at N = 64 minus at N = 256 for the same pairs.
    drop = defaultdict(dict)
    for (n, pairs), table in tables.items():
        if n == 64 and (256, pairs) in tables:
            for name, seeds in table.items():
                for s, acc in seeds.items():
                    if s in tables[(256, pairs)].get(name, {}):
                        drop[name][s] = acc - tables[(256, pairs)][name][s]
    if drop:
        extra = group_document(drop, "recall_drop_n64_to_n256")
        doc["mechanisms"] = doc["mechanisms"] + extra["mechanisms"]
        doc["pairs"] = doc["pairs"] + extra["pairs"]
    # The measures of the claims (OUT/measures.json, tools/study/mqar_measures.py) in the claims' group: per model
    # (seed) the mean over its layers of the per-layer means, paired by seed between the mechanisms' models at
    # their chosen learning rates. Metric names with "_" for ".": entropy_support_normalized_mean.
    measures_path = os.path.join(args.out, "measures.json")
    if os.path.isfile(measures_path):
        with open(measures_path) as f:
            models = json.load(f)["models"]
        chosen_keys = {(name, s) for name, seeds in tables[key].items() for s in seeds}
        lr_of = chosen_lr(runs)
        per_metric = defaultdict(lambda: defaultdict(dict))
        for m in models:
            name = name_of(m)
            if (m["n"], m["pairs"]) != key or (name, m["seed"]) not in chosen_keys \
                    or m["lr"] != lr_of[(m["n"], m["pairs"], name)] or not m["layers"]:
                continue
            for metric in sorted({x for layer in m["layers"].values() for x in layer}):
                vals = [layer[metric] for layer in m["layers"].values() if metric in layer]
                if len(vals) == len(m["layers"]):
                    per_metric[metric.replace(".", "_")][name][m["seed"]] = sum(vals) / len(vals)
        for metric, table in sorted(per_metric.items()):
            extra = group_document(table, metric)
            doc["mechanisms"] = doc["mechanisms"] + extra["mechanisms"]
            doc["pairs"] = doc["pairs"] + extra["pairs"]
    with open(os.path.join(args.out, "aggregate.json"), "w") as f:
        json.dump(doc, f, indent=1)
    print(f"groups: {', '.join(f'n{n}_p{p}' for n, p in sorted(docs))}; aggregate.json from n{key[0]}_p{key[1]}")


if __name__ == "__main__":
    main()
