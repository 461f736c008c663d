#!/usr/bin/env python3
"""Compares a merged batch folder with an unsharded run of the same job (tests/cluster/slurm_array_test.sh).

Usage: compare_runs.py UNSHARDED MERGED

Equal means:
- results.jsonl: the same records in the same order (the job's plan order: unit, then mechanism), each
  record identical field by field except `seconds` (the time it took, the one run-specific field);
- summary.csv: the same header and lines, except the `seconds` column;
- aggregate.csv and aggregate.json: identical (statistics over units carry no timing);
- sweeps/*.csv and sweeps/*.json: identical except their `seconds` column / keys;
- figures/: the same file names.
Prints one line per check and exits 1 on the first difference (naming the record and field).
"""
import csv
import io
import json
import os
import sys

TIMING = "seconds"


def fail(msg):
    print("compare: DIFFERENT: " + msg)
    sys.exit(1)


def records(path):
    out = []
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if text and not text.endswith("\n"):
        fail(path + ": torn last line")
    for no, line in enumerate(text.splitlines(), 1):
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as e:
            fail("%s:%d: not a JSON record (%s)" % (path, no, e))
    return out


def without_timing(value):
    if isinstance(value, dict):
        return {k: without_timing(v) for k, v in value.items() if k != TIMING}
    if isinstance(value, list):
        return [without_timing(v) for v in value]
    return value


def compare_results(a_dir, b_dir):
    a = records(os.path.join(a_dir, "results.jsonl"))
    b = records(os.path.join(b_dir, "results.jsonl"))
    if not a:
        fail(a_dir + "/results.jsonl is empty")
    keys_a = [r["key"] for r in a]
    keys_b = [r["key"] for r in b]
    if len(set(keys_b)) != len(keys_b):
        fail(b_dir + "/results.jsonl: duplicate keys")
    if keys_a != keys_b:
        missing = [k for k in keys_a if k not in set(keys_b)]
        extra = [k for k in keys_b if k not in set(keys_a)]
        fail("results.jsonl: %d vs %d records; missing %s; extra %s; or another order"
             % (len(a), len(b), missing[:3], extra[:3]))
    order = [(r["unit"], r["mechanism_index"]) for r in b]
    if order != sorted(order):
        fail(b_dir + "/results.jsonl is not in the plan order (unit, mechanism)")
    for ra, rb in zip(a, b):
        if list(ra.keys()) != list(rb.keys()):
            fail("record %s: fields %s vs %s" % (ra["key"], list(ra.keys()), list(rb.keys())))
        for field in ra:
            if field != TIMING and ra[field] != rb[field]:
                fail("record %s, field %s: %s vs %s" % (ra["key"], field, json.dumps(ra[field])[:200],
                                                       json.dumps(rb[field])[:200]))
    print("compare: results.jsonl: %d records, same order, identical except '%s'" % (len(a), TIMING))


def csv_rows(path):
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.reader(io.StringIO(f.read())))


def compare_csv(a_path, b_path, what):
    a, b = csv_rows(a_path), csv_rows(b_path)
    if not a or a[0] != b[0]:
        fail("%s: header %s vs %s" % (what, a[:1], b[:1]))
    if TIMING not in a[0]:
        fail("%s: no '%s' column" % (what, TIMING))
    t = a[0].index(TIMING)
    if len(a) != len(b):
        fail("%s: %d vs %d lines" % (what, len(a), len(b)))
    for no, (ra, rb) in enumerate(zip(a, b), 1):
        if ra[:t] + ra[t + 1:] != rb[:t] + rb[t + 1:]:
            fail("%s line %d: %s vs %s" % (what, no, ",".join(ra), ",".join(rb)))
    print("compare: %s: %d lines identical except the '%s' column" % (what, len(a) - 1, TIMING))


def listing(path):
    return sorted(os.listdir(path)) if os.path.isdir(path) else []


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        sys.exit(2)
    a_dir, b_dir = sys.argv[1], sys.argv[2]
    compare_results(a_dir, b_dir)
    compare_csv(os.path.join(a_dir, "summary.csv"), os.path.join(b_dir, "summary.csv"), "summary.csv")
    for name in ("aggregate.csv", "aggregate.json"):
        with open(os.path.join(a_dir, name), "rb") as fa, open(os.path.join(b_dir, name), "rb") as fb:
            if fa.read() != fb.read():
                fail("%s differs" % name)
        print("compare: %s identical" % name)
    sweeps_a, sweeps_b = listing(os.path.join(a_dir, "sweeps")), listing(os.path.join(b_dir, "sweeps"))
    if sweeps_a != sweeps_b:
        fail("sweeps/: %s vs %s" % (sweeps_a, sweeps_b))
    for name in sweeps_a:
        pa, pb = os.path.join(a_dir, "sweeps", name), os.path.join(b_dir, "sweeps", name)
        if name.endswith(".csv"):
            compare_csv(pa, pb, "sweeps/" + name)
        elif name.endswith(".json"):
            with open(pa, encoding="utf-8") as fa, open(pb, encoding="utf-8") as fb:
                if without_timing(json.load(fa)) != without_timing(json.load(fb)):
                    fail("sweeps/%s differs (beyond '%s')" % (name, TIMING))
            print("compare: sweeps/%s identical except '%s'" % (name, TIMING))
    figs_a, figs_b = listing(os.path.join(a_dir, "figures")), listing(os.path.join(b_dir, "figures"))
    if figs_a != figs_b:
        fail("figures/: %s vs %s" % (figs_a, figs_b))
    print("compare: figures/: the same %d files" % len(figs_a))


if __name__ == "__main__":
    main()
