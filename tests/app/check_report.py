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
Paged by layer (--pages layer, what --pages auto does for a large model): index.html's data keeps every head's
numbers for the overviews and names each head's layer page; each layer page loads data.js and its own
<name>-layer-<L>.js, whose heads are the single page's, numbers and curves identical (and so analyze --json's,
checked again); every link from the overview (a head's page and anchor, each layer's page) lands on an existing
page that holds that head; the pages' scripts are local files.
"""
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys

BIN, WORK, DATA = sys.argv[1:4]
FAILS = []


def check(cond, msg):
    if not cond:
        FAILS.append(msg)
    return cond


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


PREFIX = "window.ATTNSCOPE_REPORT = "
LAYER_PREFIX = "window.ATTNSCOPE_LAYER = "


def read_script(path, prefix):
    text = open(path).read()
    check(text.startswith(prefix), f"{path} does not start with {prefix!r}")
    return json.loads(text[len(prefix):].rstrip().rstrip(";"))


FIELDS = {"rank": "rank", "effective_rank": "effective_rank", "stable_rank": "stable_rank",
          "excess_effective_rank": "excess_effective_rank", "past_rank": "past_block.rank",
          "semiseparable_rank": "semiseparable_rank", "entropy_mean": "entropy.mean",
          "entropy_normalized": "entropy.normalized_mean", "entropy_below_baseline": "entropy_below_baseline",
          "mean_distance": "mean_distance", "singular_values": "singular_values", "row_entropy": "row_entropy"}
ANALYZED = {}   # command -> analyze --json's results by mechanism


def analyzed(command, where):
    if command not in ANALYZED:
        argv = shlex.split(command)
        check(argv[0] == "attnscope" and argv[1] == "analyze", f"{where}: command {command}")
        a = subprocess.run([BIN, *argv[1:], "--json", "-"], capture_output=True, text=True)
        check(a.returncode == 0, f"{where}: {command}: {a.stderr}")
        ANALYZED[command] = {r["mechanism"]: r for r in json.loads(a.stdout)["results"]} if a.returncode == 0 else None
    return ANALYZED[command]


def compare_unit(inp, u, out):
    """One head's numbers on the page against analyze --json of the command shown beside it; the number of
    mechanism results compared."""
    where = f"{inp['name']} l{u['layer']} h{u['head']}"
    check(u["figure"] and os.path.getsize(os.path.join(out, u["figure"])) > 1000, f"{where}: no maps figure")
    size = u.get("figure_size")
    check(size and size[0] > 100 and size[1] > 100, f"{where}: figure size {size}")
    results = analyzed(u["command"], where)
    if results is None:
        return 0
    check([m["mechanism"] for m in u["mechanisms"]] == list(results), f"{where}: mechanisms")
    for m in u["mechanisms"]:
        r = results[m["mechanism"]]
        for key, field in FIELDS.items():   # the curves are rounded to 6 significant digits
            rel = 5e-6 if key in ("singular_values", "row_entropy") else 1e-12
            close(m[key], dig(r, field), f"{where} {m['mechanism']} {key}", rel)
        close([p["rank"] for p in m["past_profile"]], [p["rank"] for p in (r.get("past_profile") or [])],
              f"{where} {m['mechanism']} past_profile")
    lin = next(m for m in u["mechanisms"] if m["mechanism"] == "linear")
    bound_key = "past_rank" if inp["causal"] else "rank"
    check(lin["bounds"] == {bound_key: inp["d"]}, f"{where}: linear's structural bound {lin['bounds']}")
    check(lin[bound_key] <= inp["d"], f"{where}: linear {bound_key} {lin[bound_key]} > d")
    return len(u["mechanisms"])


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
    data = read_script(os.path.join(out, "data.js"), PREFIX)
    names = [i["name"] for i in data["inputs"]]
    check(names == ["vit_digits", "trained_lm_mhla"], f"inputs {names}")
    expected_units = {"vit_digits": 3 * 4, "trained_lm_mhla": 2 * 4}
    compared = 0
    for inp in data["inputs"]:
        check(len(inp["units"]) == expected_units[inp["name"]], f"{inp['name']}: {len(inp['units'])} units")
        check(inp["causal"] == (inp["name"] == "trained_lm_mhla"), f"{inp['name']}: causal {inp['causal']}")
        check(inp["aggregate"] and inp["aggregate"]["mechanisms"], f"{inp['name']}: no aggregate")
        check(inp["depth"] and len(inp["depth"]["depth"]) == len(inp["layers"]), f"{inp['name']}: depth")
        check('heads = "all"' in inp["job"] and set(inp["params"]) == {"softmax", "linear", "mhla"},
              f"{inp['name']}: what was measured is not on the page")
        # The query tokens the entropy chart's hover names: the LM file's text, one per character (read here with
        # h5py, not by attnscope); the ViT has none (its attributes hold an image).
        if inp["name"] == "trained_lm_mhla":
            import h5py
            with h5py.File(os.path.join(DATA, "trained_lm_mhla.h5"), "r") as f:
                text = f.attrs["text"]
                text = text.decode() if isinstance(text, bytes) else str(text)
            check(inp["tokens"] == list(text)[:inp["n"]] and len(inp["tokens"]) == inp["n"],
                  f"trained_lm_mhla: tokens {str(inp['tokens'])[:80]} are not the file's text")
        else:
            check(inp["tokens"] is None, f"{inp['name']}: tokens {str(inp['tokens'])[:80]} where the file has none")
        check(inp["params"]["softmax"]["causal"] == inp["causal"], f"{inp['name']}: params {inp['params']}")
        check("pages" not in inp and all("page" not in u for u in inp["units"]), f"{inp['name']}: paged without asking")
        for u in inp["units"]:
            compared += compare_unit(inp, u, out)
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
    check_paged(inputs, data, out)
    check_batch_folder(inputs)


def scripts_of(html_path):
    return re.findall(r'<script src="([^"]+)"></script>', open(html_path).read())


def check_paged(inputs, single, single_out):
    """--pages layer: the overview's data and one page per layer; the heads' numbers are the single page's and
    analyze --json's; every link lands on a page that holds its head."""
    out = os.path.join(WORK, "RP")
    shutil.copytree(os.path.join(single_out, "runs"), os.path.join(out, "runs"))   # measured: the rerun resumes
    p = subprocess.run([BIN, "report", *inputs, "--out", out, "--pages", "layer"], capture_output=True, text=True)
    check(p.returncode == 0 and "0 analysed" in p.stderr, f"paged report: {p.stderr[-800:]}")
    if p.returncode != 0:
        return
    check("paged by layer" in p.stderr, f"the paged report does not say so: {p.stderr[-500:]}")
    data = read_script(os.path.join(out, "data.js"), PREFIX)
    index_scripts = scripts_of(os.path.join(out, "index.html"))
    check("data.js" in index_scripts and not any("-layer-" in s for s in index_scripts), f"index.html loads {index_scripts}")
    compared, anchors = 0, {}
    single_inputs = {i["name"]: i for i in single["inputs"]}
    for inp in data["inputs"]:
        name = inp["name"]
        one = single_inputs[name]
        check({k: v for k, v in inp.items() if k not in ("units", "pages")} ==
              {k: v for k, v in one.items() if k != "units"}, f"{name}: the input's facts differ from the single page's")
        check([p["layer"] for p in inp["pages"]] == inp["layers"], f"{name}: pages {inp['pages']}")
        single_units = {(u["layer"], u["head"]): u for u in one["units"]}
        check(len(inp["units"]) == len(single_units), f"{name}: {len(inp['units'])} units in the overview's data")
        for u in inp["units"]:   # the overview's data: every number but the curves, and the head's page
            s = single_units[(u["layer"], u["head"])]
            check(u["page"] == f"{name}-layer-{u['layer']}.html", f"{name}: page {u['page']}")
            curves = ("singular_values", "row_entropy", "past_profile")
            check(all(not set(curves) & set(m) for m in u["mechanisms"]), f"{name} {u['anchor']}: curves on the overview")
            trimmed = [{k: v for k, v in m.items() if k not in curves} for m in s["mechanisms"]]
            check({**u, "mechanisms": trimmed, "page": None} == {**s, "mechanisms": trimmed, "page": None} and
                  u["mechanisms"] == trimmed, f"{name} {u['anchor']}: the overview's numbers differ from the single page's")
        for pg in inp["pages"]:
            html = os.path.join(out, pg["page"])
            if not check(os.path.isfile(html), f"{name}: no page {pg['page']}"):
                continue
            srcs = scripts_of(html)
            own = pg["page"][:-len(".html")] + ".js"
            check(own in srcs and "data.js" in srcs and srcs.index("data.js") < srcs.index(own) < srcs.index("report.js")
                  and all(os.path.isfile(os.path.join(out, s)) for s in srcs), f"{pg['page']} loads {srcs}")
            check("http://" not in open(html).read() and "https://" not in open(html).read(), f"{pg['page']}: network")
            layer = read_script(os.path.join(out, own), LAYER_PREFIX)
            check(layer["input"] == name and layer["layer"] == pg["layer"], f"{own}: {layer['input']} {layer['layer']}")
            expected = [u for u in one["units"] if u["layer"] == pg["layer"]]
            check(layer["units"] == expected, f"{own}: its heads differ from the single page's")
            for u in layer["units"]:
                anchors[(pg["page"], u["anchor"])] = u
                compared += compare_unit(inp, u, out)   # read back from the layer's file
        for u in inp["units"]:   # each overview cell's link: page#anchor
            check((u["page"], u["anchor"]) in anchors, f"{name}: the link {u['page']}#{u['anchor']} lands nowhere")
    check(compared == 3 * 20, f"paged: compared {compared} mechanism results, expected 60")
    # auto (the default) keeps these small inputs on one page; a wrong --pages is one error line.
    auto = subprocess.run([BIN, "report", *inputs, "--out", out], capture_output=True, text=True)
    check(auto.returncode == 0 and "paged by layer" not in auto.stderr, f"auto paged the samples: {auto.stderr[-500:]}")
    bad = subprocess.run([BIN, "report", *inputs, "--out", out, "--pages", "some"], capture_output=True, text=True)
    check(bad.returncode == 2 and "--pages" in bad.stderr and bad.stderr.count("\n") == 1, f"--pages some: {bad.stderr}")
    print(f"paged: {compared} mechanism results of the layer pages compared with analyze --json")


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
