#!/usr/bin/python3
"""`attnscope report` (issue 34): the page's numbers are analyze --json's for every head.

    check_report.py ATTNSCOPE WORK_DIR DATA_DIR

Writes a report of data/vit_digits.h5 (3 layers x 4 heads, a grid) and data/trained_lm_mhla.h5 (causal, 2 layers
x 4 heads), reads the page's data back from data.js, and runs for every head the `analyze` command the page shows
beside it: rank, effective rank, past-block and semiseparable rank, entropy and the whole singular spectrum,
each row's entropy and the semiseparable profile must be equal (the same code on the same input: to 1e-12;
the spectra and row entropies, rounded to 6 significant digits for the page, to 5e-6).
Also: every head has its maps figure, the files of the page are there, the vendored libraries are written with
their licences, and a file that is not activations is one error line with nothing written.
"""
import json
import math
import os
import shlex
import shutil
import subprocess
import sys

BIN, WORK, DATA = sys.argv[1:4]
FAILS = []


def check(cond, msg):
    if not cond:
        FAILS.append(msg)


def close(a, b, what, rel=1e-12):
    if a is None or b is None:
        check(a is None and b is None, f"{what}: {a} vs {b}")
        return
    if isinstance(a, list):
        check(isinstance(b, list) and len(a) == len(b), f"{what}: lengths {len(a)} vs {len(b) if isinstance(b, list) else b}")
        for i, (x, y) in enumerate(zip(a, b)):
            close(x, y, f"{what}[{i}]", rel)
        return
    if isinstance(a, dict):
        for k in a:
            close(a[k], b.get(k), f"{what}.{k}")
        return
    check(math.isclose(a, b, rel_tol=rel, abs_tol=rel * 1e-12), f"{what}: page {a} vs analyze {b}")


def dig(r, dotted):
    for k in dotted.split("."):
        if not isinstance(r, dict) or k not in r:
            return None
        r = r[k]
    return r


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    out = os.path.join(WORK, "R")
    inputs = [os.path.join(DATA, "vit_digits.h5"), os.path.join(DATA, "trained_lm_mhla.h5")]
    p = subprocess.run([BIN, "report", *inputs, "--out", out, "--jobs", "2"], capture_output=True, text=True)
    check(p.returncode == 0, f"report failed: {p.stderr[-2000:]}")
    if p.returncode != 0:
        return
    for f in ["index.html", "data.js", "report.js", "report.css", "vendor/vega.min.js", "vendor/vega-lite.min.js",
              "vendor/vega-embed.min.js", "vendor/LICENSE.vega", "vendor/LICENSE.vega-lite", "vendor/LICENSE.vega-embed"]:
        check(os.path.getsize(os.path.join(out, f)) > 0, f"{f} missing or empty")
    page = open(os.path.join(out, "index.html")).read()
    check("http://" not in page and "https://" not in page, "index.html loads something from the network")
    text = open(os.path.join(out, "data.js")).read()
    prefix = "window.ATTNSCOPE_REPORT = "
    check(text.startswith(prefix), "data.js does not set window.ATTNSCOPE_REPORT")
    data = json.loads(text[len(prefix):].rstrip().rstrip(";"))
    names = [i["name"] for i in data["inputs"]]
    check(names == ["vit_digits", "trained_lm_mhla"], f"inputs {names}")
    expected_units = {"vit_digits": 3 * 4, "trained_lm_mhla": 2 * 4}
    fields = {"rank": "rank", "effective_rank": "effective_rank", "stable_rank": "stable_rank",
              "excess_effective_rank": "excess_effective_rank", "past_rank": "past_block.rank",
              "semiseparable_rank": "semiseparable_rank", "entropy_mean": "entropy.mean",
              "entropy_normalized": "entropy.normalized_mean", "entropy_below_baseline": "entropy_below_baseline",
              "mean_distance": "mean_distance", "singular_values": "singular_values", "row_entropy": "row_entropy"}
    compared = 0
    for inp in data["inputs"]:
        check(len(inp["units"]) == expected_units[inp["name"]], f"{inp['name']}: {len(inp['units'])} units")
        check(inp["causal"] == (inp["name"] == "trained_lm_mhla"), f"{inp['name']}: causal {inp['causal']}")
        check(inp["aggregate"] and inp["aggregate"]["mechanisms"], f"{inp['name']}: no aggregate")
        check(inp["depth"] and len(inp["depth"]["depth"]) == len(inp["layers"]), f"{inp['name']}: depth")
        check('heads = "all"' in inp["job"] and set(inp["params"]) == {"softmax", "linear", "mhla"},
              f"{inp['name']}: what was measured is not on the page")
        check(inp["params"]["softmax"]["causal"] == inp["causal"], f"{inp['name']}: params {inp['params']}")
        for u in inp["units"]:
            where = f"{inp['name']} l{u['layer']} h{u['head']}"
            check(u["figure"] and os.path.getsize(os.path.join(out, u["figure"])) > 1000, f"{where}: no maps figure")
            argv = shlex.split(u["command"])
            check(argv[0] == "attnscope" and argv[1] == "analyze", f"{where}: command {u['command']}")
            a = subprocess.run([BIN, *argv[1:], "--json", "-"], capture_output=True, text=True)
            check(a.returncode == 0, f"{where}: {u['command']}: {a.stderr}")
            if a.returncode != 0:
                continue
            results = {r["mechanism"]: r for r in json.loads(a.stdout)["results"]}
            check([m["mechanism"] for m in u["mechanisms"]] == list(results), f"{where}: mechanisms")
            for m in u["mechanisms"]:
                r = results[m["mechanism"]]
                for key, field in fields.items():   # the curves are rounded to 6 significant digits
                    rel = 5e-6 if key in ("singular_values", "row_entropy") else 1e-12
                    close(m[key], dig(r, field), f"{where} {m['mechanism']} {key}", rel)
                close([p["rank"] for p in m["past_profile"]], [p["rank"] for p in (r.get("past_profile") or [])],
                      f"{where} {m['mechanism']} past_profile")
                compared += 1
            lin = next(m for m in u["mechanisms"] if m["mechanism"] == "linear")
            bound_key = "past_rank" if inp["causal"] else "rank"
            check(lin["bounds"] == {bound_key: inp["d"]}, f"{where}: linear's structural bound {lin['bounds']}")
            check(lin[bound_key] <= inp["d"], f"{where}: linear {bound_key} {lin[bound_key]} > d")
    check(compared == 3 * 20, f"compared {compared} mechanism results, expected 60")
    # A rerun resumes (nothing new to analyse) and writes the same data.
    again = subprocess.run([BIN, "report", *inputs, "--out", out], capture_output=True, text=True)
    check(again.returncode == 0 and "0 analysed" in again.stderr, f"rerun: {again.stderr[-800:]}")
    # Not activations: one error line, nothing written.
    bad = os.path.join(WORK, "bad.npy")
    with open(bad, "wb") as f:
        f.write(b"not a numpy file")
    e = subprocess.run([BIN, "report", bad, "--out", os.path.join(WORK, "E")], capture_output=True, text=True)
    check(e.returncode == 2 and e.stderr.startswith("error: ") and e.stderr.count("\n") == 1, f"bad input: {e.stderr}")
    check(not os.path.exists(os.path.join(WORK, "E")), "a failed report left its folder")
    print(f"report: {compared} mechanism results compared with analyze --json")
    check_batch_folder(inputs)


def check_batch_folder(inputs):
    """A folder `attnscope batch` wrote is an input too: one page input per file of its records, the numbers its
    records, its figures, no statistics over another file's units."""
    job = os.path.join(WORK, "job.toml")
    with open(job, "w") as f:
        f.write(f'inputs = ["{os.path.abspath(inputs[0])}", "{os.path.abspath(inputs[1])}"]\nq = "/layers/0/q"\nk = "/layers/0/k"\nlayers = "all"\n'
                'heads = [0, 1]\n[[figure]]\nview = "maps"\n')
    batch = os.path.join(WORK, "B")
    b = subprocess.run([BIN, "batch", job, "--out", batch, "--jobs", "2"], capture_output=True, text=True)
    check(b.returncode == 0, f"batch: {b.stderr[-500:]}")
    out = os.path.join(WORK, "RB")
    p = subprocess.run([BIN, "report", batch, "--out", out], capture_output=True, text=True)
    check(p.returncode == 0, f"report of a batch folder: {p.stderr[-800:]}")
    if p.returncode != 0:
        return
    text = open(os.path.join(out, "data.js")).read()
    data = json.loads(text[len("window.ATTNSCOPE_REPORT = "):].rstrip().rstrip(";"))
    with open(os.path.join(batch, "results.jsonl")) as f:
        records = {r["key"]: r for r in map(json.loads, f)}
    check(sorted(i["name"] for i in data["inputs"]) == ["trained_lm_mhla", "vit_digits"],
          f"batch folder inputs {[i['name'] for i in data['inputs']]}")
    for inp in data["inputs"]:
        check(len(inp["units"]) == len(inp["layers"]) * 2, f"{inp['name']}: {len(inp['units'])} units from the folder")
        check(inp["aggregate"] is None, f"{inp['name']}: the batch's statistics over both files shown as this one's")
        for u in inp["units"]:
            check(u["figure"] and os.path.exists(os.path.join(out, u["figure"])), f"{inp['name']}: figure {u['figure']}")
            for m in u["mechanisms"]:
                key = f"{inp['file']}|l={u['layer']}|h={u['head']}|{m['mechanism']}"
                r = records.get(key)
                check(r is not None, f"no record {key}")
                if r:
                    close(m["effective_rank"], r["effective_rank"], key)
                    close(m["rank"], r["rank"], key)
    empty = os.path.join(WORK, "empty")
    os.makedirs(empty)
    e = subprocess.run([BIN, "report", empty, "--out", os.path.join(WORK, "E2")], capture_output=True, text=True)
    check(e.returncode == 2 and "without results.jsonl" in e.stderr and e.stderr.count("\n") == 1, f"empty folder: {e.stderr}")
    check(not os.path.exists(os.path.join(WORK, "E2")), "a failed report left its folder")


main()
for f in FAILS[:40]:
    print("FAIL:", f)
sys.exit(1 if FAILS else 0)
