#!/usr/bin/python3
"""The aggregate file of a trained task (vit or lm; docs/trained-mechanisms.md) that tools/study/verdicts.py reads:
RESULTS/<task>/aggregate.json, in the layout of `attnscope aggregate --json` (rows `mechanisms` and `pairs`).

Two sources, nothing computed by hand:
- the task's measures: the paired units of every mechanism's models, `attnscope aggregate --cluster file --json`
  over them (tools/study/measures.py writes WORK/<task>_cross/aggregate_cluster_file.json): with few seeds its rows
  carry the t interval over the seeds, `agree` and `p_t` (attention.md 2.2). Metric names take "_" for ".":
  entropy.support_normalized_mean -> entropy_support_normalized_mean, as claims.toml names them.
- the task's own score per model (tools/study/train.py: summary.json and the controls <task>_none_s<seed>.json):
  test_accuracy (vit) or test_bits_per_char (lm) per seed, for every mechanism and the control without attention
  `none`, with the same few-cluster statistics (tests/reference/attnref.py, as tools/study/mqar_aggregate.py):
  the gate of claims.toml reads the row softmax - none.

usage: tools/study/task_aggregate.py vit|lm --study DIR --cross FILE [--results tools/study/results]
"""
import argparse
import glob
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from mqar_aggregate import group_document  # noqa: E402

SCORE = {"vit": "test_accuracy", "lm": "test_bits_per_char"}
FILE = re.compile(r"^(vit|lm)_([a-z]+)_s(\d+)\.h5$")


def scores(study, task):
    """{mechanism: {seed: score}} of the trained models (summary.json) and the controls (<task>_none_s<seed>.json)."""
    metric = SCORE[task]
    table = {}
    path = os.path.join(study, "summary.json")
    if os.path.isfile(path):
        with open(path) as f:
            doc = json.load(f)
        for entry in doc if isinstance(doc, list) else doc.get("models", []):
            m = FILE.match(entry.get("file", ""))   # <task>_<mechanism>_s<seed>.h5, as train.py names them
            if m and m.group(1) == task and entry.get(metric) is not None:
                table.setdefault(m.group(2), {})[int(m.group(3))] = float(entry[metric])
    for path in sorted(glob.glob(os.path.join(study, f"{task}_none_s*.json"))):
        with open(path) as f:
            entry = json.load(f)
        if entry.get(metric) is not None:
            table.setdefault("none", {})[int(entry["seed"])] = float(entry[metric])
    return table


def task_document(task, study, cross_path):
    doc = {"task": task, "mechanisms": [], "pairs": []}
    if cross_path:
        with open(cross_path) as f:
            cross = json.load(f)
        group = cross["groups"][0] if cross.get("groups") else {"mechanisms": [], "pairs": []}
        for kind in ("mechanisms", "pairs"):
            for row in group.get(kind, []):
                row = dict(row)
                row["metric"] = row["metric"].replace(".", "_")
                doc[kind].append(row)
    table = scores(study, task)
    if table:
        extra = group_document(table, SCORE[task])
        doc["mechanisms"] += extra["mechanisms"]
        doc["pairs"] += extra["pairs"]
    return doc


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("task", choices=sorted(SCORE))
    ap.add_argument("--study", required=True)
    ap.add_argument("--cross")
    ap.add_argument("--results", default=os.path.join(HERE, "results"))
    args = ap.parse_args()
    doc = task_document(args.task, args.study, args.cross)
    out = os.path.join(args.results, args.task)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "aggregate.json"), "w") as f:
        json.dump(doc, f, indent=1)
    print("wrote", os.path.join(out, "aggregate.json"))


if __name__ == "__main__":
    main()
