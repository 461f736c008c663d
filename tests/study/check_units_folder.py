#!/usr/bin/python3
"""tools/study/measures.py's units_folder: groups labelled by mechanism names go through `attnscope aggregate
--cluster file`; other labels ("mhla M=4", "learned"), which `attnscope aggregate` refuses since issue 30, through
tests/reference/attnref.py's aggregate. The two paths must give the same statistics: the same units under
labels that are not mechanisms and under mechanism names give the same rows and pairs (the page's M-sweep and
learned-vs-preset tables rest on it).

usage: check_units_folder.py ATTNSCOPE WORKDIR"""
import os
import shutil
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "study"))
import measures  # noqa: E402


def main():
    binary, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    rng = np.random.default_rng(7)
    # 5 seeds (clusters) x 6 inputs x 2 layers x 2 heads; two groups with a shift and per-seed effects.
    keys = [(s, b, l, h) for s in range(5) for b in range(6) for l in range(2) for h in range(2)]
    seed_effect = rng.normal(0, 0.3, 5)
    a = {k: {"rank": float(10 + seed_effect[k[0]] + rng.normal()), "entropy": float(rng.uniform(0, 1))} for k in keys}
    b = {k: {"rank": float(12 + seed_effect[k[0]] + rng.normal()), "entropy": float(rng.uniform(0, 1))} for k in keys}
    del b[keys[3]]   # a unit only one group has: left out of the pairs, kept in its row
    ref_rows, ref_pairs = measures.units_folder(binary, work, "labels", [("mhla M=4", a), ("mhla M=16", b)])
    tool_rows, tool_pairs = measures.units_folder(binary, work, "names", [("linear", a), ("mhla", b)])
    name = {"mhla M=4": "linear", "mhla M=16": "mhla"}
    problems = []
    if len(ref_rows) != len(tool_rows) or len(ref_pairs) != len(tool_pairs) or not ref_pairs:
        problems.append(f"row counts differ: {len(ref_rows)}/{len(tool_rows)} rows, {len(ref_pairs)}/{len(tool_pairs)} pairs")
    for (label, metric), row in ref_rows.items():
        other = tool_rows.get((name[label], metric))
        for f in ("n", "mean", "ci_low", "ci_high", "clusters", "agree"):
            if other is None or not np.isclose(float(row[f]), float(other[f]), rtol=1e-9, atol=1e-12):
                problems.append(f"{label} {metric} {f}: reference {row[f]} vs attnscope {other and other[f]}")
    for (la, lb, metric), row in ref_pairs.items():
        other = tool_pairs.get((name[la], name[lb], metric))
        for f in ("n", "mean_diff", "ci_low", "ci_high", "p_sign", "clusters", "agree"):
            if other is None or not np.isclose(float(row[f]), float(other[f]), rtol=1e-9, atol=1e-12):
                problems.append(f"{la} - {lb} {metric} {f}: reference {row[f]} vs attnscope {other and other[f]}")
    if not os.path.isfile(os.path.join(work, "labels", "aggregate_cluster_file.json")):
        problems.append("the reference path wrote no aggregate_cluster_file.json beside its units")
    if problems:
        sys.exit("units_folder: " + "; ".join(problems[:8]))
    print(f"units_folder: labels and mechanism names agree ({len(ref_rows)} rows, {len(ref_pairs)} pairs)")


if __name__ == "__main__":
    main()
