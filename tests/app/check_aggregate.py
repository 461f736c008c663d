"""Statistics over units through the command line (docs/batch.md, aggregate.csv; docs/cli.md, aggregate):
`batch` over a file of six heads writes aggregate.csv and aggregate.json whose every row equals the NumPy reference
(tests/reference/attnref.py, aggregate() over the records of results.jsonl) to 1e-12, whose intervals contain the
means and whose paired rows carry p-values; two shards merged give the same aggregate as one run; `attnscope
aggregate` prints the same numbers for every grouping (--by head, --json); `--at b=all` makes every input of a
test-set file its own unit in analyze (JSON with units, the single-unit JSON unchanged) and in a batch job
(`at = { b = "all" }`); `aggregate --cluster b` gives the reference's intervals over the five clusters (t
intervals: fewer than ten) and the sweep's points their inputs' interval (t over five inputs); and the errors (not
a results folder, unknown --by field, b=all with an axis the layout lacks) are one `error:` line, exit 2. usage: check_aggregate.py ATTNSCOPE WORKDIR"""
import csv
import json
import math
import os
import subprocess
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import attnref  # noqa: E402
import cli_checks  # noqa: E402

binary, work = sys.argv[1], sys.argv[2]
problems = []
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(11)
with h5py.File(os.path.join(work, "six.h5"), "w") as f:
    f["q"] = rng.normal(size=(6, 48, 8))      # six heads [h, n, d]
    f["k"] = rng.normal(size=(6, 48, 8))
with h5py.File(os.path.join(work, "testset.h5"), "w") as f:
    f["q"] = rng.normal(size=(5, 2, 32, 8))   # five inputs, two heads [b, h, n, d]
    f["k"] = rng.normal(size=(5, 2, 32, 8))

with h5py.File(os.path.join(work, "huge.h5"), "w") as f:   # a header claiming two billion inputs (nothing stored)
    for name in ("q", "k"):
        f.create_dataset(name, shape=(2000000000, 8, 4), chunks=(1, 8, 4), dtype="f4")

PROVENANCE = {"key", "unit", "mechanism_index", "settings", "attnscope_version", "input", "layer", "head", "unit_at",
              "seconds"}


def run(args):
    return subprocess.run([binary] + args, capture_output=True, text=True, cwd=work)


def write_job(name, text):
    path = os.path.join(work, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def records_of(folder):
    with open(os.path.join(work, folder, "results.jsonl")) as f:
        return [json.loads(line) for line in f]


def reference(records, cluster=None, resamples=2000):
    """attnref.aggregate over the records; cluster: an index axis letter whose values are the clusters."""
    units = []
    for rec in records:
        u = {"unit": rec["unit"], "mechanism": rec["mechanism"]}
        if cluster:
            u["cluster"] = json.dumps(rec["input"]["at"][cluster])
        u.update(attnref.flatten_result({k: v for k, v in rec.items() if k not in PROVENANCE}))
        units.append(u)
    return attnref.aggregate(units, resamples=resamples)


def close(a, b):
    if a is None or b is None:
        return a is None and b is None
    return abs(a - b) <= 1e-12 * max(abs(b), 1e-300)


def compare(label, got, want):
    """got, want: {"mechanisms": [...], "pairs": [...]} rows in the same order, numbers to 1e-12."""
    for kind in ("mechanisms", "pairs"):
        if len(got[kind]) != len(want[kind]):
            problems.append(f"{label}: {len(got[kind])} {kind} rows, reference {len(want[kind])}")
            continue
        for g, w in zip(got[kind], want[kind]):
            for key, wv in w.items():
                gv = g.get(key)
                ok = gv == wv if isinstance(wv, str) or key == "n" else close(gv, wv)
                if not ok:
                    problems.append(f"{label} {kind} {w.get('mechanism', w.get('mechanism_a'))} {w['metric']} {key}: "
                                    f"{gv} vs reference {wv}")
                    break


def csv_rows(path):
    """aggregate.csv as {"mechanisms": [...], "pairs": [...]} with numbers parsed (empty = None)."""
    out = {"mechanisms": [], "pairs": []}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            num = {k: (None if row[k] == "" else float(row[k])) for k in
                   ("mean", "std", "mean_diff", "ci_low", "ci_high", "p_sign", "p_t", "p_holm")}
            few = {"clusters": int(row["clusters"]), "ci_method": row["ci_method"], "agree": int(row["agree"])}
            if row["kind"] == "mechanism":
                out["mechanisms"].append({"mechanism": row["mechanism"], "metric": row["metric"], "n": int(row["n"]),
                                          "mean": num["mean"], "std": num["std"], "ci_low": num["ci_low"],
                                          "ci_high": num["ci_high"], **few})
            elif row["kind"] == "pair":
                out["pairs"].append({"mechanism_a": row["mechanism_a"], "mechanism_b": row["mechanism_b"],
                                     "metric": row["metric"], "n": int(row["n"]), "mean_diff": num["mean_diff"],
                                     "ci_low": num["ci_low"], "ci_high": num["ci_high"], "p_sign": num["p_sign"],
                                     "p_t": num["p_t"], "p_holm": num["p_holm"], **few})
            else:
                problems.append(f"{path}: row kind {row['kind']!r}")
    return out


# --- --resamples: twelve heads (a bootstrap interval from ten units on) at 2000 and at 300 resamples -------------
with h5py.File(os.path.join(work, "twelve.h5"), "w") as f:
    f["q"] = rng.normal(size=(12, 32, 8))
    f["k"] = rng.normal(size=(12, 32, 8))
job = write_job("twelve.toml", 'inputs = ["twelve.h5"]\nq = "/q"\nk = "/k"\nheads = "all"\n'
                '[attention]\nblocks = 4\n[metrics]\ntop_k = 4\n')
p = run(["batch", job, "--out", "twelve"])
if p.returncode != 0:
    problems.append(f"batch twelve heads exited {p.returncode}: {p.stderr.strip()}")
    cli_checks.report(problems)
intervals = {}
for resamples in (2000, 300):
    p = run(["aggregate", "twelve", "--json", "--resamples", str(resamples)])
    if p.returncode != 0:
        problems.append(f"aggregate --resamples {resamples} exited {p.returncode}: {p.stderr.strip()}")
        continue
    doc = json.loads(p.stdout)
    if doc["resamples"] != resamples:
        problems.append(f"aggregate --resamples {resamples}: the document says {doc['resamples']}")
    want = reference(records_of("twelve"), resamples=resamples)
    group = doc["groups"][0]
    if any(r["ci_method"] != "bootstrap" for r in group["mechanisms"]):
        problems.append(f"aggregate twelve: expected bootstrap intervals, got {[r['ci_method'] for r in group['mechanisms']]}")
    compare(f"aggregate --resamples {resamples}", group, want)
    intervals[resamples] = [(r["ci_low"], r["ci_high"]) for r in group["mechanisms"]]
if len(intervals) == 2 and intervals[2000] == intervals[300]:
    problems.append("aggregate --resamples 300 gave the intervals of 2000 resamples: the option has no effect")


# --- batch over six heads --------------------------------------------------------------------------------------
job = write_job("six.toml", 'inputs = ["six.h5"]\nq = "/q"\nk = "/k"\nheads = "all"\n[attention]\nblocks = 4\n')
p = run(["batch", job, "--out", "one"])
if p.returncode != 0:
    problems.append(f"batch six heads exited {p.returncode}: {p.stderr.strip()}")
    cli_checks.report(problems)
recs = records_of("one")
want = reference(recs)
got_json = json.load(open(os.path.join(work, "one", "aggregate.json")))
got_csv = csv_rows(os.path.join(work, "one", "aggregate.csv"))
compare("aggregate.json", got_json, want)
compare("aggregate.csv", got_csv, want)
if got_json.get("units") != 6 or got_json.get("resamples") != 2000 or got_json.get("seed") != 0:
    problems.append(f"aggregate.json: units/resamples/seed {got_json.get('units')}/{got_json.get('resamples')}/"
                    f"{got_json.get('seed')}, expected 6/2000/0")
metrics = {r["metric"] for r in got_csv["mechanisms"]}
for m in ("rank", "effective_rank", "entropy.mean"):
    if m not in metrics:
        problems.append(f"aggregate.csv has no {m} rows (metrics: {sorted(metrics)})")
for r in got_csv["mechanisms"]:
    if r["n"] != 6:
        problems.append(f"aggregate.csv {r['mechanism']} {r['metric']}: n = {r['n']}, expected the six heads")
    if not r["ci_low"] - 1e-12 <= r["mean"] <= r["ci_high"] + 1e-12:
        problems.append(f"aggregate.csv {r['mechanism']} {r['metric']}: interval [{r['ci_low']}, {r['ci_high']}] "
                        f"misses the mean {r['mean']}")
pairs = {(r["mechanism_a"], r["mechanism_b"]) for r in got_csv["pairs"]}
if pairs != {("softmax", "linear"), ("softmax", "mhla"), ("linear", "mhla")}:
    problems.append(f"aggregate.csv pairs {sorted(pairs)}")
for r in got_csv["pairs"]:
    if r["p_sign"] is None or not 0 < r["p_sign"] <= 1 or r["n"] != 6:
        problems.append(f"aggregate.csv pair {r['mechanism_a']}-{r['mechanism_b']} {r['metric']}: n {r['n']}, "
                        f"p {r['p_sign']}")

# --- two shards merged = one run -------------------------------------------------------------------------------
for i in range(2):
    p = run(["batch", job, "--out", f"shard{i}", "--shard", f"{i}/2"])
    if p.returncode != 0:
        problems.append(f"batch --shard {i}/2 exited {p.returncode}: {p.stderr.strip()}")
p = run(["merge", "shard0", "shard1", "--out", "merged"])
if p.returncode != 0:
    problems.append(f"merge exited {p.returncode}: {p.stderr.strip()}")
else:
    for name in ("aggregate.csv", "aggregate.json"):
        a = open(os.path.join(work, "one", name)).read()
        b = open(os.path.join(work, "merged", name)).read()
        if a != b:
            problems.append(f"merged {name} differs from one run's")

# --- attnscope aggregate ---------------------------------------------------------------------------------------
p = run(["aggregate", "one", "--json"])
if p.returncode != 0:
    problems.append(f"aggregate one --json exited {p.returncode}: {p.stderr.strip()}")
else:
    doc = json.loads(p.stdout)
    if len(doc["groups"]) != 1 or doc["groups"][0]["group"] != {}:
        problems.append(f"aggregate --json without --by: groups {[g['group'] for g in doc['groups']]}")
    else:
        compare("aggregate --json", doc["groups"][0], want)
p = run(["aggregate", "one", "--by", "head", "--json"])
if p.returncode != 0:
    problems.append(f"aggregate --by head exited {p.returncode}: {p.stderr.strip()}")
else:
    doc = json.loads(p.stdout)
    heads = [g["group"].get("head") for g in doc["groups"]]
    if heads != list(range(6)):
        problems.append(f"aggregate --by head: groups {heads}")
    for g in doc["groups"]:
        compare(f"aggregate --by head={g['group'].get('head')}", g,
                reference([r for r in recs if r["head"] == g["group"].get("head")]))
p = run(["aggregate", "one", "--metric", "rank,entropy"])
if p.returncode != 0 or "entropy.mean" not in p.stdout or "softmax - linear" not in p.stdout or "effective_rank" in p.stdout:
    problems.append(f"aggregate --metric rank,entropy: exit {p.returncode}, output:\n{p.stdout}{p.stderr}")

# --- --at b=all -----------------------------------------------------------------------------------------------
single = run(["analyze", "--q", "testset.h5:/q", "--k", "testset.h5:/k", "--at", "b=3,h=1", "--json", "-"])
many = run(["analyze", "--q", "testset.h5:/q", "--k", "testset.h5:/k", "--at", "b=all,h=1", "--json", "-"])
if single.returncode != 0 or many.returncode != 0:
    problems.append(f"analyze --at b=all: exit {many.returncode} {many.stderr.strip()} / {single.stderr.strip()}")
else:
    one, doc = json.loads(single.stdout), json.loads(many.stdout)
    if set(one) != {"attnscope_version", "input", "results", "distance", "kernels"}:
        problems.append(f"analyze single unit: keys {sorted(one)}")
    units = doc.get("units", [])
    if [u.get("at") for u in units] != [{"b": b} for b in range(5)]:
        problems.append(f"analyze --at b=all: units {[u.get('at') for u in units]}")
    elif (units[3]["results"] != one["results"] or units[3]["input"] != one["input"]
          or units[3].get("distance") != one["distance"]):
        problems.append("analyze --at b=all: unit b=3 differs from --at b=3")
    recs_b = [dict(r, unit=u["unit"]) for u in units for r in u["results"]]
    compare("analyze --at b=all aggregate", doc.get("aggregate", {"mechanisms": [], "pairs": []}), reference(recs_b))
    # The terminal gets a compact summary (issue 36: 5 inputs once printed 253 lines): the statistics over the
    # units of a few metrics, no unit's own table; --metric chooses them; the rest is in --json.
    table = run(["analyze", "--q", "testset.h5:/q", "--k", "testset.h5:/k", "--at", "b=all"])
    lines = table.stdout.splitlines()
    if (table.returncode != 0 or "== unit" in table.stdout or "over the 5 units" not in table.stdout
            or len(lines) > 60 or "--json FILE" not in table.stdout or "baseline.rank" in table.stdout):
        problems.append(f"analyze --at b=all table: exit {table.returncode}, {len(lines)} lines\n{table.stdout[:600]}{table.stderr}")
    chosen = run(["analyze", "--q", "testset.h5:/q", "--k", "testset.h5:/k", "--at", "b=all", "--metric", "stable_rank"])
    metrics = {ln.split()[0] for ln in chosen.stdout.splitlines()[2:] if ln and not ln[0].isspace() and ln.split()[0] not in ("metric", "note:", "every")}
    if chosen.returncode != 0 or metrics != {"stable_rank"}:
        problems.append(f"analyze --at b=all --metric stable_rank: exit {chosen.returncode}, metrics {sorted(metrics)}\n{chosen.stdout[:600]}")

p = run(["sweep", "--q", "testset.h5:/q", "--k", "testset.h5:/k", "--at", "b=all,h=0", "--vary", "n=16,32",
         "--mechanism", "linear", "--csv", "sweep.csv", "--json", "sweep.json"])
if p.returncode != 0:
    problems.append(f"sweep --at b=all exited {p.returncode}: {p.stderr.strip()}")
else:
    with open(os.path.join(work, "sweep.csv")) as f:
        rows = list(csv.DictReader(f))
    if len(rows) != 10:   # 5 inputs x 2 values of N x 1 mechanism
        problems.append(f"sweep --at b=all: {len(rows)} records, expected 10")
    if sorted((r["n"], r["at"]) for r in rows) != sorted((n, f"b={b}") for n in ("16", "32") for b in range(5)):
        problems.append(f"sweep --at b=all: (n, at) columns {[(r.get('n'), r.get('at')) for r in rows]}")
    # Each point's interval is the reference's interval of its five inputs (five units: a t interval).
    for pt in json.load(open(os.path.join(work, "sweep.json")))["points"]:
        x = [float(r["effective_rank"]) for r in rows if int(r["n"]) == pt["n"]]
        lo, hi, method = attnref.mean_interval(x)
        if pt["effective_rank"].get("ci_method") != method:
            problems.append(f"sweep --json N={pt['n']}: ci_method {pt['effective_rank'].get('ci_method')}, expected {method}")
        if not (close(pt["effective_rank"]["ci_low"], lo) and close(pt["effective_rank"]["ci_high"], hi)):
            problems.append(f"sweep --json N={pt['n']}: interval [{pt['effective_rank'].get('ci_low')}, "
                            f"{pt['effective_rank'].get('ci_high')}], reference [{lo}, {hi}]")

job_b = write_job("testset.toml", 'inputs = ["testset.h5"]\nq = "/q"\nk = "/k"\nheads = "all"\nat = { b = "all" }\n'
                                  'mechanisms = "softmax,linear"\n')
p = run(["batch", job_b, "--out", "tb"])
if p.returncode != 0:
    problems.append(f"batch at = {{ b = \"all\" }} exited {p.returncode}: {p.stderr.strip()}")
else:
    recs_b = records_of("tb")
    seen = sorted((r["head"], r["unit_at"]["b"]) for r in recs_b if r["mechanism"] == "softmax")
    if seen != sorted((h, b) for h in range(2) for b in range(5)):
        problems.append(f"batch b=all: units (head, b) {seen}")
    compare("batch b=all aggregate.json", json.load(open(os.path.join(work, "tb", "aggregate.json"))), reference(recs_b))
    # summary.csv tells the inputs apart: its `at` column holds each record's b.
    with open(os.path.join(work, "tb", "summary.csv"), newline="") as f:
        lines = [(int(r["head"]), r["at"]) for r in csv.DictReader(f) if r["mechanism"] == "softmax"]
    if sorted(lines) != sorted((h, f"b={b}") for h in range(2) for b in range(5)):
        problems.append(f"batch b=all summary.csv (head, at): {lines}")
    p = run(["aggregate", "tb", "--by", "b", "--json"])
    if p.returncode != 0 or [g["group"] for g in json.loads(p.stdout)["groups"]] != [{"b": b} for b in range(5)]:
        problems.append(f"aggregate tb --by b: exit {p.returncode} {p.stderr.strip()}")
    # Clusters: the five inputs are clusters of two heads each (docs/maths.md 5; five clusters: t intervals).
    p = run(["aggregate", "tb", "--cluster", "b", "--json"])
    if p.returncode != 0:
        problems.append(f"aggregate tb --cluster b: exit {p.returncode} {p.stderr.strip()}")
    else:
        doc = json.loads(p.stdout)
        g = doc["groups"][0]
        if doc.get("cluster") != "b" or any(r.get("clusters") != 5 for r in g["mechanisms"] + g["pairs"]):
            problems.append(f"aggregate --cluster b: cluster {doc.get('cluster')}, clusters "
                            f"{sorted({r.get('clusters') for r in g['mechanisms'] + g['pairs']})}")
        compare("aggregate --cluster b", g, reference(recs_b, "b"))
    p = run(["aggregate", "tb", "--cluster", "b"])
    if p.returncode != 0 or "two-stage bootstrap" not in p.stdout or "5 clusters" not in p.stdout:
        problems.append(f"aggregate tb --cluster b table: exit {p.returncode}\n{p.stdout[:600]}{p.stderr}")
    for i in range(2):
        run(["batch", job_b, "--out", f"tb{i}", "--shard", f"{i}/2"])
    p = run(["merge", "tb0", "tb1", "--out", "tbm"])
    if p.returncode != 0:
        problems.append(f"merge of b=all shards exited {p.returncode}: {p.stderr.strip()}")
    elif open(os.path.join(work, "tb", "aggregate.csv")).read() != open(os.path.join(work, "tbm", "aggregate.csv")).read():
        problems.append("merged b=all aggregate.csv differs from one run's")

# --- errors: one error line, exit 2 -------------------------------------------------------------------------------
os.makedirs(os.path.join(work, "empty"), exist_ok=True)
for args, words in [
    (["aggregate", "empty"], "not a batch results folder"),
    (["aggregate", "no_such_folder"], "not a batch results folder"),
    (["aggregate", "one", "--by", "colour"], "'colour' is not a field"),
    (["aggregate", "one", "--metric", "no_such_metric"], "not a metric"),
    (["aggregate", "one", "--resamples", "0"], "--resamples 0 must lie in 1..1000000"),
    (["aggregate", "one", "--resamples", "1000001"], "--resamples 1000001 must lie in 1..1000000"),
    (["aggregate", "one", "--cluster", "seed"], "'seed' is not a field"),
    (["aggregate", "one", "--cluster", "head", "--by", "head"], "also a --by field"),
    (["analyze", "--q", "six.h5:/q", "--k", "six.h5:/k", "--at", "b=all"], "axis 'b' is not in layout"),
    (["analyze", "--q", "testset.h5:/q", "--k", "testset.h5:/k", "--at", "b=all,b=1"], "given twice"),
    (["analyze", "--q", "testset.h5:/q", "--k", "testset.h5:/k", "--at", "h=all", "--head", "1"], "contradicts"),
    (["matrix", "--q", "testset.h5:/q", "--k", "testset.h5:/k", "--at", "b=all", "--mechanism", "linear", "--out",
      "m.npy"], "choose one index"),
    # Counts are capped before anything is allocated (docs/security.md, "Counts and sizes").
    (["analyze", "--q", "huge.h5:/q", "--k", "huge.h5:/k", "--layout", "bnd", "--at", "b=all"], "over the cap"),
    (["sweep", "--q", "huge.h5:/q", "--k", "huge.h5:/k", "--layout", "bnd", "--at", "b=all", "--vary", "n=4"],
     "over the cap"),
]:
    p = run(args)
    lines = p.stderr.strip().splitlines()
    if p.returncode != 2 or len(lines) != 1 or not lines[0].startswith("error:") or words not in lines[0]:
        problems.append(f"{' '.join(args)}: exit {p.returncode}, stderr {p.stderr.strip()!r} (expected one error line "
                        f"with {words!r})")

cli_checks.report(problems)
