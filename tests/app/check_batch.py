"""`attnscope batch` and `merge`: a run killed mid-way and rerun equals one clean run; shards merged
equal the unsharded run; a torn last line is repaired; the TOML schema rejects unknown keys and bad
types with a clear error. usage: check_batch.py ATTNSCOPE WORKDIR"""
import json
import os
import signal
import subprocess
import sys
import time

import h5py
import numpy as np

import cli_checks

binary, work = sys.argv[1], sys.argv[2]
problems = []
os.makedirs(os.path.join(work, "acts"), exist_ok=True)
rng = np.random.default_rng(3)
for i in range(3):
    with h5py.File(os.path.join(work, "acts", f"model{i}.h5"), "w") as f:
        f["layers/q"] = rng.normal(size=(2, 3, 144, 16))      # [layer, head, n, d]
        f["layers/k"] = rng.normal(size=(2, 3, 144, 16))

job = os.path.join(work, "job.toml")
with open(job, "w") as f:
    f.write("""
inputs = ["acts/model*.h5"]
q = "/layers/q"
k = "/layers/k"
layout = "lhnd"
heads = "all"
layers = "all"

[attention]
grid = [12, 12]
block_grid = [3, 3]

[metrics]
top_k = 8
row_entropy = false

[[sweep]]
name = "crop"
vary = "n=64,144"
subsample = "crop"
heads = [0, 2]
""")


def run(args, **kw):
    return subprocess.run([binary] + args, capture_output=True, text=True, cwd=work, **kw)


def records(folder):
    out = {}
    with open(os.path.join(work, folder, "results.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            r.pop("seconds")
            if r["key"] in out:
                problems.append(f"{folder}: duplicate record {r['key']}")
            out[r["key"]] = r
    return out


def csv_rows(folder):
    with open(os.path.join(work, folder, "summary.csv")) as f:
        return [",".join(line.strip().split(",")[:-1]) for line in f]   # without seconds


clean = run(["batch", "job.toml", "--out", "clean"])
if clean.returncode != 0:
    problems.append(f"clean batch exited {clean.returncode}: {clean.stderr}")
else:
    ref = records("clean")
    if len(ref) != 3 * 2 * 3 * 3:
        problems.append(f"clean run has {len(ref)} records, want 54")
    first = next(iter(ref.values()))
    for key in ("attnscope_version", "settings", "params", "rank", "entropy", "input"):
        if key not in first:
            problems.append(f"record lacks {key}")
    if len(first["input"].get("sha256", "")) != 64:
        problems.append("record lacks the input's SHA-256")

    # killed mid-run, then rerun
    p = subprocess.Popen([binary, "batch", "job.toml", "--out", "killed"], cwd=work, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    path = os.path.join(work, "killed", "results.jsonl")
    deadline = time.time() + 30
    while time.time() < deadline:
        if os.path.exists(path) and sum(1 for _ in open(path)) >= 7:
            break
        time.sleep(0.002)
    p.send_signal(signal.SIGKILL)
    p.wait()
    partial = sum(1 for _ in open(path)) if os.path.exists(path) else 0
    print(f"killed after {partial} records")
    # simulate a torn write as well: half a record at the end
    with open(path, "a") as f:
        f.write('{"key": "acts/model0.h5|l=1|h=2|mhla", "unit": 5, "trunc')
    again = run(["batch", "job.toml", "--out", "killed"])
    if again.returncode != 0:
        problems.append(f"resumed batch exited {again.returncode}: {again.stderr}")
    elif records("killed") != ref:
        problems.append("resumed batch differs from the clean run")
    elif csv_rows("killed") != csv_rows("clean"):
        problems.append("resumed summary.csv differs from the clean run")
    # a second rerun does nothing
    third = run(["batch", "job.toml", "--out", "killed"])
    if "0 analysed" not in third.stderr:
        problems.append(f"a complete batch analysed again: {third.stderr}")

    # shards + merge
    for i in range(3):
        s = run(["batch", "job.toml", "--out", f"shard{i}", "--shard", f"{i}/3"])
        if s.returncode != 0:
            problems.append(f"shard {i} exited {s.returncode}: {s.stderr}")
    m = run(["merge", "shard0", "shard1", "shard2", "--out", "merged"])
    if m.returncode != 0:
        problems.append(f"merge exited {m.returncode}: {m.stderr}")
    else:
        if records("merged") != ref:
            problems.append("merged shards differ from the unsharded run")
        if csv_rows("merged") != csv_rows("clean"):
            problems.append("merged summary.csv differs from the unsharded run")
        for name in ("crop.csv",):
            a = [l.rsplit(",", 1)[0] for l in open(os.path.join(work, "clean", "sweeps", name))]
            b = [l.rsplit(",", 1)[0] for l in open(os.path.join(work, "merged", "sweeps", name))]
            if a != b:
                problems.append(f"merged sweeps/{name} differs")

    # --jobs 2 runs units in parallel (BLAS single-threaded): same records up to the last digits
    par = run(["batch", "job.toml", "--out", "parallel", "--jobs", "2"])
    if par.returncode != 0:
        problems.append(f"--jobs 2 exited {par.returncode}: {par.stderr}")
    else:
        got = records("parallel")
        if set(got) != set(ref):
            problems.append("--jobs 2 recorded other keys")
        for key, r in ref.items():
            g = got.get(key, {})
            if g.get("rank") != r["rank"]:
                problems.append(f"--jobs 2 {key}: rank {g.get('rank')} vs {r['rank']}")
            for f in ("effective_rank", "stable_rank"):
                if abs(g.get(f, 0) - r[f]) > 1e-12 * abs(r[f]):
                    problems.append(f"--jobs 2 {key}: {f} {g.get(f)} vs {r[f]}")

# [[figure]]: rendered into DIR/figures (only when this attnscope has the desktop views)
with open(os.path.join(work, "figjob.toml"), "w") as f:
    f.write(open(job).read() + """
[[figure]]
view = "spectrum"
heads = [1]

[[figure]]
view = "curves"
sweep = "crop"
metric = "effective_rank"
format = "svg"
""")
fig = run(["batch", "figjob.toml", "--out", "figs"])
if "built without" not in fig.stderr:
    if fig.returncode != 0:
        problems.append(f"figure batch exited {fig.returncode}: {fig.stderr}")
    else:
        names = sorted(os.listdir(os.path.join(work, "figs", "figures")))
        want = sorted([f"model{i}_l{l}_h1_spectrum.png" for i in range(3) for l in range(2)] + ["crop_effective_rank.svg"])
        if names != want:
            problems.append(f"figures {names}, want {want}")
        for n in names:
            data = open(os.path.join(work, "figs", "figures", n), "rb").read()
            if len(data) < 2000 or not (data.startswith(b"\x89PNG") or b"<svg" in data[:2000]):
                problems.append(f"figure {n} is not a PNG / SVG ({len(data)} bytes)")
bad_fig = os.path.join(work, "badfig.toml")
with open(bad_fig, "w") as f:
    f.write(open(job).read() + '\n[[figure]]\nview = "curves"\nsweep = "nope"\n')
r = run(["batch", "badfig.toml", "--out", "badfig_out"])
if r.returncode != 2 or "sweep" not in r.stderr or os.path.exists(os.path.join(work, "badfig_out")):
    problems.append(f"a curves figure of an unknown sweep: exit {r.returncode}, {r.stderr!r}")

# schema errors: exit 2, one error line naming file, line and key; no output folder
bad_cases = {
    "unknown_key.toml": ('inputs = ["acts/*.h5"]\nq = "/layers/q"\nk = "/layers/k"\nlayout = "lhnd"\n[attention]\nblokcs = 4\n',
                         ["unknown_key.toml:6", "blokcs", "[attention]"]),
    "top_unknown.toml": ('inputs = ["acts/*.h5"]\nheds = "all"\n', ["top_unknown.toml:2", "heds"]),
    "bad_type.toml": ('inputs = ["acts/*.h5"]\nq = "/layers/q"\nk = "/layers/k"\nlayout = "lhnd"\n[attention]\nblocks = "four"\n',
                      ["bad_type.toml:6", "blocks", "integer"]),
    "no_match.toml": ('inputs = ["nothing/*.h5"]\n', ["nothing/*.h5"]),
    "syntax.toml": ('inputs = ["acts/*.h5"\n', ["syntax.toml"]),
    "bad_sweep.toml": ('inputs = ["acts/*.h5"]\nq = "/layers/q"\nk = "/layers/k"\nlayout = "lhnd"\n[[sweep]]\nname = "x"\nvary = "n=500"\n',
                       ["sweep x", "500"]),
}
for name, (text, needles) in bad_cases.items():
    with open(os.path.join(work, name), "w") as f:
        f.write(text)
    out = name.replace(".toml", "_out")
    r = run(["batch", name, "--out", out])
    lines = r.stderr.strip().splitlines()
    if r.returncode != 2 or len(lines) != 1 or not lines[0].startswith("error: "):
        problems.append(f"{name}: exit {r.returncode}, stderr {r.stderr!r}")
    for n in needles:
        if n not in r.stderr:
            problems.append(f"{name}: '{n}' not in {r.stderr!r}")
    if os.path.exists(os.path.join(work, out)):
        problems.append(f"{name}: left an output folder behind")

cli_checks.report(problems)
