#!/usr/bin/python3
"""The headless command line attnscope-cli (issue 34: the package attnscope-cli, built without Qt) against the
desktop app's attnscope built from the same sources.

    check_headless.py ATTNSCOPE_CLI ATTNSCOPE WORK_DIR DATA_DIR

- It links no Qt library (readelf -d: no libQt6*, no QCustomPlot), and its analysis equals the desktop app's.
- The desktop app, `figure` and `sweep --plot` are refused with one error line naming the package attnscope
  (exit 2), and nothing is written.
- A batch job with [[figure]] tables runs: exit 0, every record the desktop app writes (the same numbers), a
  `note:` that the figures were not drawn; a rerun of the same folder by the desktop app analyses nothing again
  and draws exactly the figures a desktop run from scratch draws (the unit figures and the sweep's curves).
- Its report has every number the desktop app's report has, no map images, and says why on each head.
"""
import json
import os
import re
import shutil
import subprocess
import sys

CLI, DESKTOP, WORK, DATA = sys.argv[1:5]
FAILS = []


def check(cond, msg):
    if not cond:
        FAILS.append(msg)


def run(cmd, **kw):
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    return subprocess.run(cmd, capture_output=True, text=True, env=env, **kw)


def fresh(path):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def records(folder):
    """The records of a batch folder keyed by unit and mechanism, without what differs between runs."""
    out = {}
    with open(os.path.join(folder, "results.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            for k in ("timing", "seconds", "time", "started", "finished", "host", "attnscope_version"):
                r.pop(k, None)
            out[(r.get("unit", r.get("key")), r["mechanism"])] = r
    return out


def strip_volatile(doc):
    """A report's data without what may differ between two runs or two executables (time, maps, commands)."""
    doc = json.loads(json.dumps(doc))
    for k in ("generated", "command", "maps_missing"):
        doc.pop(k, None)
    for inp in doc["inputs"]:
        for u in inp["units"]:
            for key in [k for k in u if k.startswith("figure")]:   # the maps image and what describes it
                u.pop(key)
    return doc


def report_data(folder):
    text = open(os.path.join(folder, "data.js")).read()
    return json.loads(text[text.index("{"):text.rindex("}") + 1])


work = fresh(WORK)
sample = os.path.join(DATA, "vit_digits.h5")

# 1. No Qt, same numbers.
needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", run(["readelf", "-d", CLI]).stdout)
check(needed and not [n for n in needed if "Qt" in n or "qcustomplot" in n.lower()], f"attnscope-cli links {needed}")
check(any("Qt6" in n for n in re.findall(r"\[([^\]]+)\]", run(["readelf", "-d", DESKTOP]).stdout)),
      "the desktop attnscope links no Qt: this test would not tell the two apart")
analyze = ["analyze", "--q", sample + ":/layers/2/q", "--k", sample + ":/layers/2/k", "--head", "1", "--json", "-"]
a, b = run([CLI] + analyze), run([DESKTOP] + analyze)
check(a.returncode == 0 and b.returncode == 0 and json.loads(a.stdout)["results"] == json.loads(b.stdout)["results"],
      f"analyze differs: {a.stderr} {b.stderr}")

# 2. Refusals: one error line naming the package, nothing written.
out = fresh(os.path.join(work, "refused"))
for cmd in (["figure", "--view", "maps", "--q", sample + ":/layers/2/q", "--k", sample + ":/layers/2/k",
             "--out", os.path.join(out, "maps.png")],
            [sample],
            [sample, "--screenshot", os.path.join(out, "shot.png")],
            ["sweep", "--synth", "local1d", "--d", "8", "--vary", "n=32,64", "--plot", os.path.join(out, "c.png"),
             "--csv", os.path.join(out, "c.csv")]):
    r = run([CLI] + cmd, cwd=out)
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    check(r.returncode == 2 and len(lines) == 1 and lines[0].startswith("error:") and "package attnscope" in lines[0],
          f"attnscope-cli {' '.join(cmd[:3])}: exit {r.returncode}, stderr {r.stderr!r}")
check(os.listdir(out) == [], f"refused commands wrote {os.listdir(out)}")
# A mistyped subcommand lists the subcommands this executable has: not figure.
r = run([CLI, "analyse"], cwd=out)
check(r.returncode == 2 and "report" in r.stderr and "figure" not in r.stderr, f"attnscope-cli analyse: {r.stderr!r}")
r = run([DESKTOP, "analyse"], cwd=out)
check(r.returncode == 2 and "figure" in r.stderr, f"attnscope analyse: {r.stderr!r}")

# 3. A batch job with figures: numbers now, figures on the desktop app's rerun.
job = os.path.join(work, "job.toml")
with open(job, "w") as f:
    f.write(f'''inputs = ["{os.path.join(DATA, "vit_local2d.h5")}", "{os.path.join(DATA, "lowrank.h5")}"]
q = "/q"
k = "/k"
heads = [0, 1]

[[sweep]]
name = "first_n"
vary = "n=64,128"
heads = [0]

[[figure]]
view = "spectrum"
heads = [0]

[[figure]]
view = "curves"
sweep = "first_n"
metric = "rank"
''')
headless, scratch = os.path.join(work, "headless"), os.path.join(work, "desktop")
r = run([CLI, "batch", job, "--out", headless])
check(r.returncode == 0, f"headless batch exit {r.returncode}: {r.stderr[-500:]}")
check(re.search(r"^note: .*2 \[\[figure\]\] table\(s\) are not drawn: .*package attnscope", r.stderr, re.M) is not None,
      f"headless batch says nothing of its figures: {r.stderr[-800:]}")
check(not os.path.exists(os.path.join(headless, "figures")) or not os.listdir(os.path.join(headless, "figures")),
      "the headless batch drew figures")
r2 = run([DESKTOP, "batch", job, "--out", scratch])
check(r2.returncode == 0, f"desktop batch exit {r2.returncode}: {r2.stderr[-500:]}")
check(records(headless) == records(scratch), "the headless batch's records differ from the desktop app's")
before = open(os.path.join(headless, "results.jsonl")).read()
r3 = run([DESKTOP, "batch", job, "--out", headless])
check(r3.returncode == 0 and "(4 already recorded, 0 analysed)" in r3.stderr,
      f"the desktop rerun analysed again or failed: {r3.stderr[-600:]}")
drawn, expected = sorted(os.listdir(os.path.join(headless, "figures"))), sorted(os.listdir(os.path.join(scratch, "figures")))
check(drawn == expected and len(expected) == 3, f"the desktop rerun drew {drawn}, a desktop run draws {expected}")
check(open(os.path.join(headless, "results.jsonl")).read() == before, "the rerun changed results.jsonl")
r4 = run([DESKTOP, "batch", job, "--out", headless])
check("0 sweeps" in r4.stderr, f"a third run (every figure there) ran the sweep again: {r4.stderr[-400:]}")

# 4. The report: every number, no maps, a reason.
rh, rd = os.path.join(work, "report_headless"), os.path.join(work, "report_desktop")
for exe, folder in ((CLI, rh), (DESKTOP, rd)):
    r = run([exe, "report", sample, "--out", folder])
    check(r.returncode == 0, f"{exe} report exit {r.returncode}: {r.stderr[-500:]}")
dh, dd = report_data(rh), report_data(rd)
check(all(u["figure"] is None for inp in dh["inputs"] for u in inp["units"]), "the headless report links map images")
check(all(u["figure"] for inp in dd["inputs"] for u in inp["units"]), "the desktop report lacks map images")
check("package attnscope" in dh.get("maps_missing", ""), f"the headless report does not say why: {dh.get('maps_missing')}")
check("maps_missing" not in dd, "the desktop report says maps are missing")
# The jobs differ only by the desktop app's maps figure table.
for ih, id_ in zip(dh["inputs"], dd["inputs"]):
    jh, jd = ih.pop("job"), id_.pop("job")
    check(jd.startswith(jh) and jd[len(jh):].strip().startswith("[[figure]]") and "[[figure]]" not in jh,
          f"the headless report's job is not the desktop app's without its maps figure:\n{jh}\n---\n{jd}")
check(strip_volatile(dh) == strip_volatile(dd), "the headless report's numbers differ from the desktop app's")
check(not [p for p in os.listdir(os.path.join(rh, "runs", "vit_digits")) if p == "figures"]
      or not os.listdir(os.path.join(rh, "runs", "vit_digits", "figures")), "the headless report drew figures")

for f in FAILS:
    print("FAIL:", f)
print(f"{'FAILED' if FAILS else 'PASSED'}: attnscope-cli without Qt ({len(FAILS)} failures)")
sys.exit(1 if FAILS else 0)
