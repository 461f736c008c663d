"""`attnscope batch` killed (SIGKILL) at random points, then run again, finishes with the results of one
clean run: every record exactly once, no torn line, the same summary, sweeps and figures.
check_batch.py kills once at a fixed point; this kills at seeded random points of the whole run (while
records are appended, during the sweep, the figures and the final rewrite), with --jobs 1 and 2, and
sometimes kills the rerun too. The kill point is chosen by progress (records on disk) plus a random
delay, never by the clock alone, so a loaded machine only moves it.
usage: check_batch_kill.py ATTNSCOPE WORKDIR DATADIR [TRIALS]"""
import json
import os
import random
import signal
import subprocess
import sys
import time

import cli_checks

binary, work, data = sys.argv[1], sys.argv[2], sys.argv[3]
trials = int(sys.argv[4]) if len(sys.argv) > 4 else 5
problems = []
os.makedirs(work, exist_ok=True)
env = dict(os.environ, QT_QPA_PLATFORM=os.environ.get("QT_QPA_PLATFORM", "offscreen"))

inputs = ", ".join(f'"{os.path.join(data, f)}"' for f in ("vit_local2d.h5", "lm_local1d.h5", "lowrank.h5", "gaussian.h5"))
with open(os.path.join(work, "job.toml"), "w") as f:
    f.write(f"""
inputs = [{inputs}]
q = "/q"
k = "/k"
heads = "all"

[attention]
blocks = 16

[metrics]
top_k = 16

[[sweep]]
name = "first_n"
vary = "n=64,128,256"
subsample = "first"
heads = [0, 1]
""")
figures = "built without" not in subprocess.run([binary, "figure", "--help"], capture_output=True, text=True, env=env).stderr
if figures:
    with open(os.path.join(work, "job.toml"), "a") as f:
        f.write('\n[[figure]]\nview = "curves"\nsweep = "first_n"\nmetric = "rank"\nformat = "svg"\n')


def run(args):
    return subprocess.run([binary] + args, capture_output=True, text=True, cwd=work, env=env)


def load(folder):
    """Records by key (without the timing field); problems for torn or duplicate lines."""
    out = {}
    with open(os.path.join(work, folder, "results.jsonl"), "rb") as f:
        data = f.read()
    if data and not data.endswith(b"\n"):
        problems.append(f"{folder}: results.jsonl ends with a torn line")
    for i, line in enumerate(data.decode().splitlines(), 1):
        try:
            r = json.loads(line)
        except ValueError:
            problems.append(f"{folder}: results.jsonl line {i} is not JSON: {line[:80]!r}")
            continue
        r.pop("seconds", None)
        if r["key"] in out:
            problems.append(f"{folder}: duplicate record {r['key']}")
        out[r["key"]] = r
    return out


def without_last_column(path):
    with open(path) as f:
        return [line.rstrip("\n").rsplit(",", 1)[0] for line in f]


def visible_files(folder):
    root = os.path.join(work, folder)
    names = []
    for base, _, files in os.walk(root):
        for n in files:
            names.append(os.path.relpath(os.path.join(base, n), root))
    return sorted(names)


def lines_of(path):
    try:
        with open(path, "rb") as f:
            return f.read().count(b"\n")
    except FileNotFoundError:
        return 0


# One clean run per --jobs value: with --jobs 2 BLAS runs single-threaded, which changes the last digits
# (docs/batch.md), so a resumed --jobs 2 run is compared with a clean --jobs 2 run.
refs = {}
for jobs in ("1", "2"):
    clean = run(["batch", "job.toml", "--out", f"clean{jobs}", "--jobs", jobs])
    if clean.returncode != 0:
        print(f"FAIL: clean batch (--jobs {jobs}) exited {clean.returncode}: {clean.stderr}")
        sys.exit(1)
    refs[jobs] = load(f"clean{jobs}")
total = len(refs["1"])
ref_files = visible_files("clean1")
print(f"clean run: {total} records, files {ref_files}")

rng = random.Random(20260130)
killed_mid_run = 0
for trial in range(trials):
    out = f"killed{trial}"
    jobs = "2" if trial % 2 else "1"
    results = os.path.join(work, out, "results.jsonl")
    for attempt in range(2 if trial % 3 == 2 else 1):
        # Kill once `target` records are on disk (0..total: total means during the sweep, the figures
        # or the final rewrite), after a random delay of up to 80 ms.
        target = rng.randint(0, total)
        delay = rng.uniform(0.0, 0.08)
        p = subprocess.Popen([binary, "batch", "job.toml", "--out", out, "--jobs", jobs], cwd=work, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while p.poll() is None and lines_of(results) < target:
            time.sleep(0.002)
        time.sleep(delay)
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
            killed_mid_run += 1
        p.wait()
        print(f"trial {trial} (--jobs {jobs}): kill after {target} records + {delay * 1000:.0f} ms: "
              f"{'killed' if p.returncode == -signal.SIGKILL else 'had finished'} with {lines_of(results)} lines on disk")
        if os.path.exists(results):
            # What a kill leaves: complete records, at most one torn line at the end, no duplicates.
            with open(results, "rb") as f:
                lines = f.read().split(b"\n")
            keys = []
            for line in lines[:-1]:
                try:
                    keys.append(json.loads(line)["key"])
                except ValueError:
                    problems.append(f"{out}: a torn record before the end after a kill: {line[:80]!r}")
            if len(keys) != len(set(keys)):
                problems.append(f"{out}: duplicate records after a kill")
    again = run(["batch", "job.toml", "--out", out, "--jobs", jobs])
    if again.returncode != 0:
        problems.append(f"{out}: the rerun exited {again.returncode}: {again.stderr[-500:]}")
        continue
    ref, clean = refs[jobs], f"clean{jobs}"
    got = load(out)
    if set(got) != set(ref):
        problems.append(f"{out}: {len(got)} records, want {len(ref)} (missing {sorted(set(ref) - set(got))[:3]}, "
                        f"extra {sorted(set(got) - set(ref))[:3]})")
    for key, r in ref.items():
        g = got.get(key)
        if g is None:
            continue
        if g.get("rank") != r["rank"] or g.get("unit") != r["unit"] or g.get("singular_values") is None:
            problems.append(f"{out}: record {key} differs from the clean run")
        for field in ("effective_rank", "stable_rank"):
            if abs(g.get(field, 0) - r[field]) > 1e-12 * max(1.0, abs(r[field])):
                problems.append(f"{out}: {key} {field} {g.get(field)} vs {r[field]}")
    order = [json.loads(line)["key"] for line in open(results)]
    if order != [json.loads(line)["key"] for line in open(os.path.join(work, clean, "results.jsonl"))]:
        problems.append(f"{out}: results.jsonl is not in the job's order")
    if without_last_column(os.path.join(work, out, "summary.csv")) != without_last_column(os.path.join(work, clean, "summary.csv")):
        problems.append(f"{out}: summary.csv differs from the clean run")
    if without_last_column(os.path.join(work, out, "sweeps", "first_n.csv")) != \
            without_last_column(os.path.join(work, clean, "sweeps", "first_n.csv")):
        problems.append(f"{out}: sweeps/first_n.csv differs from the clean run")
    files = visible_files(out)
    # A SIGKILL cannot remove a temporary file being written (a dot-file named *.tmp-*): allowed, and
    # nothing else may differ from the clean run's files.
    stray = [n for n in files if n not in ref_files and not (os.path.basename(n).startswith(".") and ".tmp-" in n)]
    if stray or any(n not in files for n in ref_files):
        problems.append(f"{out}: files {files}, want {ref_files}")
    for n in files:
        if n.endswith(".svg") and not os.path.basename(n).startswith("."):
            if not open(os.path.join(work, out, n), "rb").read().rstrip().endswith(b"</svg>"):
                problems.append(f"{out}: {n} is not a complete SVG")

if killed_mid_run < max(1, trials // 2):
    problems.append(f"only {killed_mid_run} of the kills hit a running batch")
cli_checks.report(problems)
