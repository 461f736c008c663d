#!/usr/bin/python3
"""The attention of every trained MQAR model (tools/study/mqar.py's dumps, OUT/dumps) measured by `attnscope batch`
under its own mechanism, and related to what the model can do (issue 32 item 2).

For each run with a dump: one batch job per mechanism (every dump of that mechanism, every layer and head, every
dumped test example: `at = { b = "all" }`), then per model and layer the mean over examples and heads of
retrieval_mass, retrieval_rank, semiseparable_rank, past_block_rank, entropy_below_baseline, effective_rank and
entropy.support_normalized_mean. Across models, per layer: Spearman's rank correlation of test accuracy with each
measure, with a 95% percentile bootstrap interval over models (2000 resamples, seed 0).

Writes OUT/measures.json ({models: [{key, mechanism, n, pairs, seed, test_accuracy, layers: {l: {measure: mean}}}],
correlations: [{layer, measure, models, spearman, ci_low, ci_high}]}).

usage: tools/study/mqar_measures.py [--attnscope build/app/attnscope] [--out tools/study/results/mqar] [--jobs 2]
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
MEASURES = ("retrieval_mass", "retrieval_rank", "semiseparable_rank", "past_block.rank", "entropy_below_baseline",
            "effective_rank", "excess_effective_rank", "entropy.support_normalized_mean")


def value(record, dotted):
    v = record
    for part in dotted.split("."):
        if not isinstance(v, dict) or part not in v:
            return None
        v = v[part]
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def spearman(x, y):
    rx = np.argsort(np.argsort(x, kind="stable"), kind="stable").astype(float)
    ry = np.argsort(np.argsort(y, kind="stable"), kind="stable").astype(float)
    # average ranks for ties
    for r, v in ((rx, np.asarray(x)), (ry, np.asarray(y))):
        for u in np.unique(v):
            idx = np.flatnonzero(v == u)
            if len(idx) > 1:
                r[idx] = r[idx].mean()
    if rx.std() == 0 or ry.std() == 0:
        return None
    return float(np.corrcoef(rx, ry)[0, 1])


def bootstrap_spearman(x, y, resamples=2000, seed=0):
    rng = np.random.default_rng(seed)
    x, y = np.asarray(x, float), np.asarray(y, float)
    vals = []
    for _ in range(resamples):
        i = rng.integers(0, len(x), len(x))
        s = spearman(x[i], y[i])
        if s is not None:
            vals.append(s)
    if len(vals) < resamples // 2:
        return None, None
    return float(np.percentile(vals, 2.5)), float(np.percentile(vals, 97.5))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--attnscope", default=os.path.join(ROOT, "build", "app", "attnscope"))
    ap.add_argument("--out", default=os.path.join(HERE, "results", "mqar"))
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    runs = []
    for path in sorted(glob.glob(os.path.join(args.out, "runs", "*.json"))):
        with open(path) as f:
            r = json.load(f)
        if r.get("dump") and os.path.isfile(os.path.join(args.out, r["dump"])):
            r["key"] = os.path.basename(path)[:-5]
            runs.append(r)
    # Models measured before whose dumps are not here (the dumps are large and not committed: a fresh checkout has
    # only those of the models trained since) keep their measures from OUT/measures.json: a dump is its model, and
    # `attnscope batch` measures it the same way every time.
    kept = []
    previous = os.path.join(args.out, "measures.json")
    if os.path.isfile(previous):
        with open(previous) as f:
            have = {r["key"] for r in runs}
            kept = [m for m in json.load(f).get("models", []) if m["key"] not in have]
    if not runs and not kept:
        sys.exit(f"no dumps under {args.out} (mqar.py dumps every model it trains)")
    by_mech = defaultdict(list)   # one batch job per mechanism and operator
    for r in runs:
        by_mech[r["mechanism"] + ("_authors" if r.get("variant", {}).get("op") == "authors" else "")].append(r)
    per_unit = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))   # key -> layer -> measure -> values
    with tempfile.TemporaryDirectory() as work:
        for job_name, rs in sorted(by_mech.items()):
            mech = rs[0]["mechanism"]
            job = os.path.join(work, f"{job_name}.toml")
            files = [os.path.abspath(os.path.join(args.out, r["dump"])) for r in rs]
            batched = mech != "gated"   # the bridge writes a gated model's gates for one example
            with open(job, "w") as f:
                f.write(f"inputs = {json.dumps(files)}\nq = \"/layers/0/q\"\nk = \"/layers/0/k\"\n"
                        f"heads = \"all\"\nlayers = \"all\"\nmechanisms = \"{mech}\"\n"
                        + ('at = { b = "all" }\n' if batched else "")
                        # the authors' operator: each model is measured under the operator it was trained with
                        + ('[attention]\nfeature_map = "identity"\nnormalize = "none"\n'
                           if job_name.endswith("_authors") else ""))
            out_dir = os.path.join(work, job_name)
            p = subprocess.run([args.attnscope, "batch", job, "--out", out_dir, "--jobs", str(args.jobs)],
                               capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit(f"attnscope batch ({mech}) failed: {p.stderr.strip().splitlines()[-1]}")
            key_of = {os.path.abspath(os.path.join(args.out, r["dump"])): r["key"] for r in rs}
            with open(os.path.join(out_dir, "results.jsonl")) as f:
                for line in f:
                    rec = json.loads(line)
                    key = key_of[os.path.abspath(rec["input"]["file"])]
                    for m in MEASURES:
                        v = value(rec, m)
                        if v is not None:
                            per_unit[key][rec["layer"]][m].append(v)
    models = list(kept)
    for r in runs:
        layers = {str(l): {m: float(np.mean(v)) for m, v in ms.items()} for l, ms in sorted(per_unit[r["key"]].items())}
        models.append(dict(key=r["key"], mechanism=r["mechanism"], variant=r["variant"], n=r["n"], pairs=r["pairs"],
                           lr=r["lr"], seed=r["seed"], test_accuracy=r["test_accuracy"], layers=layers))
    correlations = []
    for layer in sorted({l for m in models for l in m["layers"]}):
        for measure in MEASURES:
            pts = [(m["test_accuracy"], m["layers"][layer][measure]) for m in models
                   if layer in m["layers"] and measure in m["layers"][layer]]
            if len(pts) < 4:
                continue
            x, y = zip(*pts)
            s = spearman(x, y)
            lo, hi = bootstrap_spearman(x, y) if s is not None else (None, None)
            correlations.append(dict(layer=int(layer), measure=measure, models=len(pts), spearman=s, ci_low=lo,
                                     ci_high=hi, interval="95% percentile bootstrap over models, 2000 resamples"))
    doc = dict(models=models, correlations=correlations, measured_now=len(runs), kept_from_before=len(kept))
    with open(os.path.join(args.out, "measures.json"), "w") as f:
        json.dump(doc, f, indent=1)
    for c in correlations:
        ci = "" if c["ci_low"] is None else f" [{c['ci_low']:.2f}, {c['ci_high']:.2f}]"
        s = "-" if c["spearman"] is None else f"{c['spearman']:+.2f}"
        print(f"layer {c['layer']} {c['measure']:32} rho {s}{ci} over {c['models']} models")
    print(f"{len(runs)} models measured from their dumps, {len(kept)} kept from the previous measures.json")


if __name__ == "__main__":
    main()
