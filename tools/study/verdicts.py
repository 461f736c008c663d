#!/usr/bin/python3
"""Every verdict of the study pages, computed from the declared rules of tools/study/claims.toml and the
aggregate files (`attnscope aggregate --json`, docs/cli.md; rows `mechanisms` and `pairs` with ci_low, ci_high,
clusters, agree, p_t), never typed by hand (issue 32 item 4, attention.md 2.2 "Verdicts").

For each claim and task: structural claims are "structural only"; a pair claim reads the row (a, b, metric) of the
task's aggregate file (or (b, a) with the sign turned) and is "supported" when its interval lies on the predicted
side of 0, its Holm-adjusted p (over every empirical claim x task tested, in this script) is below alpha and at
most one cluster disagrees; "not supported" otherwise ("(opposite)" when the interval lies on the other side);
"not tested" when the row or file is missing or the task's validity gate fails.

usage: tools/study/verdicts.py RESULTS_DIR [--claims tools/study/claims.toml] [--json OUT] [--markdown OUT]
RESULTS_DIR holds the files the gates name (mqar/aggregate.json, vit/aggregate.json, lm/aggregate.json).
"""
import argparse
import json
import os
import sys

try:
    import tomllib
except ImportError:   # Python < 3.11
    import tomli as tomllib

HERE = os.path.dirname(os.path.abspath(__file__))


def load_aggregate(root, source):
    path = os.path.join(root, source)
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        return json.load(f)


def pair_row(agg, a, b, metric):
    """The paired difference a - b of `metric` as {mean_diff, ci_low, ci_high, clusters, agree, p_t}, or None."""
    for row in agg.get("pairs", []):
        if row.get("metric") != metric:
            continue
        if row.get("mechanism_a") == a and row.get("mechanism_b") == b:
            return dict(row)
        if row.get("mechanism_a") == b and row.get("mechanism_b") == a:   # turned: b - a -> a - b
            r = dict(row)
            r["mean_diff"], r["ci_low"], r["ci_high"] = -row["mean_diff"], -row["ci_high"], -row["ci_low"]
            return r
    return None


def mechanism_row(agg, mechanism, metric):
    for row in agg.get("mechanisms", []):
        if row.get("mechanism") == mechanism and row.get("metric") == metric:
            return row
    return None


def gate(task, rules, root):
    """(passed, why) for a task's validity gate."""
    g = rules.get("gate", {}).get(task)
    if g is None:
        return False, f"no gate declared for {task}"
    agg = load_aggregate(root, g["source"])
    if agg is None:
        return False, f"{g['source']} is missing"
    metric = g["metric"]
    if "softmax_min" in g:
        s = mechanism_row(agg, "softmax", metric)
        c = mechanism_row(agg, g["control"], metric)
        if s is None or c is None:
            return False, f"no {metric} rows for softmax and {g['control']}"
        if not s["mean"] >= g["softmax_min"]:
            return False, f"softmax {metric} {s['mean']:.3f} < {g['softmax_min']}"
        if not c["mean"] <= g["control_max"]:
            return False, f"{g['control']} {metric} {c['mean']:.3f} > {g['control_max']}"
        return True, f"softmax {s['mean']:.3f} >= {g['softmax_min']}, {g['control']} {c['mean']:.3f} <= {g['control_max']}"
    row = pair_row(agg, "softmax", g["control"], metric)
    if row is None:
        return False, f"no softmax - {g['control']} row of {metric} (no control without attention)"
    ok = row["ci_low"] > 0 if g.get("direction", "greater") == "greater" else row["ci_high"] < 0
    text = f"softmax - {g['control']} {metric} {row['mean_diff']:+.4g} [{row['ci_low']:.4g}, {row['ci_high']:.4g}]"
    return ok, text if ok else text + ": attention is not shown to be needed"


def holm(pvalues):
    """Holm-adjusted p-values, in the input order."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    out = [0.0] * len(pvalues)
    running = 0.0
    m = len(pvalues)
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        out[i] = running
    return out


def verdicts(rules, root):
    alpha = float(rules.get("alpha", 0.05))
    gates = {}
    rows = []
    for claim in rules.get("claim", []):
        if claim["kind"] == "structural":
            rows.append(dict(claim=claim["id"], text=claim["text"], task="all", verdict="structural only",
                             why="true by construction of the operator (attention.md 3): not evidence"))
            continue
        for task in claim.get("tasks", []):
            if task not in gates:
                gates[task] = gate(task, rules, root)
            passed, why = gates[task]
            entry = dict(claim=claim["id"], text=claim["text"], task=task, metric=claim["metric"],
                         a=claim["a"], b=claim["b"], direction=claim["direction"])
            if not passed:
                entry.update(verdict="not tested", why=f"gate: {why}")
                rows.append(entry)
                continue
            # a task may name a mechanism's model differently (claims.toml [names.<task>]: MQAR's "mhla" is the
            # model trained with M = 16 blocks, "mhla_blocks16")
            names = rules.get("names", {}).get(task, {})
            a, b = names.get(claim["a"], claim["a"]), names.get(claim["b"], claim["b"])
            entry.update(a=a, b=b)
            agg = load_aggregate(root, rules["gate"][task]["source"])
            row = pair_row(agg, a, b, claim["metric"])
            if row is None or row.get("p_t") is None:
                entry.update(verdict="not tested", why=f"no {a} - {b} row of {claim['metric']}")
                rows.append(entry)
                continue
            entry.update(mean_diff=row["mean_diff"], ci_low=row["ci_low"], ci_high=row["ci_high"],
                         clusters=row.get("clusters"), agree=row.get("agree"), p_t=row["p_t"],
                         ci_method=row.get("ci_method"))
            rows.append(entry)
    tested = [r for r in rows if "p_t" in r]
    for r, p in zip(tested, holm([r["p_t"] for r in tested])):
        r["p_holm"] = p
        sign = 1.0 if r["direction"] == "greater" else -1.0
        low, high = sign * r["ci_low"], sign * r["ci_high"]
        if sign < 0:
            low, high = high, low
        g, agree = r.get("clusters") or 0, r.get("agree") or 0
        # agree counts cluster means sharing the overall mean's sign: on the predicted side only when the mean is
        if low > 0 and p < alpha and agree >= g - 1:
            r["verdict"] = "supported"
            r["why"] = (f"interval [{r['ci_low']:.4g}, {r['ci_high']:.4g}] on the predicted side, p_holm {p:.3g} < {alpha}, "
                        f"{agree} of {g} clusters agree")
        else:
            reasons = []
            if not low > 0:
                reasons.append(f"interval [{r['ci_low']:.4g}, {r['ci_high']:.4g}] "
                               + ("lies on the other side" if high < 0 else "reaches 0"))
            if not p < alpha:
                reasons.append(f"p_holm {p:.3g} >= {alpha}")
            if not agree >= g - 1:
                reasons.append(f"only {agree} of {g} clusters agree")
            r["verdict"] = "not supported (opposite)" if high < 0 else "not supported"
            r["why"] = "; ".join(reasons)
    return rows


def markdown(rows):
    out = ["| claim | task | primary measure | difference [95% interval] | p_holm | agree | verdict | why |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "mean_diff" in r:
            diff = f"{r['a']} - {r['b']}: {r['mean_diff']:+.4g} [{r['ci_low']:.4g}, {r['ci_high']:.4g}]"
            p, agree = f"{r['p_holm']:.3g}", f"{r['agree']} of {r['clusters']}"
            # agree counts the clusters sharing the mean's sign: say so when that sign is not the predicted one
            if (r["mean_diff"] > 0) != (r["direction"] == "greater") and r["mean_diff"] != 0:
                agree += " (against the prediction)"
        else:
            diff, p, agree = "-", "-", "-"
        out.append(f"| {r['text']} | {r['task']} | {r.get('metric', '-')} | {diff} | {p} | {agree} | **{r['verdict']}** | "
                   f"{r['why']} |")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results")
    ap.add_argument("--claims", default=os.path.join(HERE, "claims.toml"))
    ap.add_argument("--json")
    ap.add_argument("--markdown")
    args = ap.parse_args()
    with open(args.claims, "rb") as f:
        rules = tomllib.load(f)
    rows = verdicts(rules, args.results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    text = markdown(rows)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
