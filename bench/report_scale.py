#!/usr/bin/python3
"""Scale of `attnscope report` (issue 34 item 3): a model of L layers x H heads at N tokens (d = 64, random q and k
with a shared smooth positional part), reported with --jobs 2; prints the report's wall time, the size of what the
browser loads for each page (index.html with data.js and the scripts; a layer page, when the report is paged,
with data.js, its <name>-layer-<L>.js and its maps images) and the times headless Chromium takes
(tests/app/check_report_browser.py's browser, network off): index.html asked for -> every overview drawn, and for
the largest layer page (or, on one page, the last head) asked for -> its first head's charts drawn -> every image
loaded.

    bench/report_scale.py [--attnscope build/app/attnscope] [--work /tmp/report_scale] [--layers 12 --heads 12 --n 1024]
                          [--pages auto|single|layer] [--existing DIR]

The measurements of docs/performance.md: `--layers 12 --heads 12 --n 1024` (one page) and
`--layers 24 --heads 16 --n 256` (paged by --pages auto), each also with `--existing R --pages single` to time the
same report on one page (a rerun: nothing is measured again).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def make_model(path, layers, heads, n, d):
    rng = np.random.default_rng(0)
    pos = np.arange(n)[:, None] / n
    smooth = np.sin(2 * np.pi * pos * (1 + np.arange(d))[None, :] / 8).astype(np.float32)
    with h5py.File(path, "w") as f:
        f.attrs["layout"] = "hnd"
        for layer in range(layers):
            f[f"layers/{layer}/q"] = rng.standard_normal((heads, n, d)).astype(np.float32) + 2 * smooth[None]
            f[f"layers/{layer}/k"] = rng.standard_normal((heads, n, d)).astype(np.float32) + 2 * smooth[None]


LOADED = ("index.html", "data.js", "report.js", "report.css", "vendor/vega.min.js", "vendor/vega-lite.min.js",
          "vendor/vega-embed.min.js")


def size(out, names):
    return sum(os.path.getsize(os.path.join(out, n)) for n in names)


def layout(out):
    """What each page loads: {"index.html": bytes, "<page>": bytes, ...} and the page data."""
    with open(os.path.join(out, "data.js")) as f:
        text = f.read()
    data = json.loads(text[len("window.ATTNSCOPE_REPORT = "):].rstrip().rstrip(";"))
    scripts = LOADED[1:]
    pages = {"index.html": size(out, LOADED)}
    for inp in data["inputs"]:
        for u in inp["units"]:
            if u.get("figure"):   # images on index.html, or on the head's layer page
                page = u.get("page", "index.html")
                if page not in pages:
                    pages[page] = size(out, (page, page[:-5] + ".js") + scripts)
                pages[page] += os.path.getsize(os.path.join(out, u["figure"]))
    return pages, data


def browse(url, ready, seconds=120):
    """Seconds from asking for url to the script `ready` true, to the page's load event (every image loaded), and
    the JS heap afterwards (MiB)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("check_report_browser",
                                                  os.path.join(HERE, "..", "tests", "app", "check_report_browser.py"))
    browser = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(browser)
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    driver = browser.browser(1600, 1000, profile)
    try:
        driver.set_page_load_timeout(seconds)
        t0 = time.monotonic()
        driver.get(url)   # returns at the load event
        loaded = time.monotonic() - t0
        ok = browser.wait_for(driver, ready, seconds)
        drawn = time.monotonic() - t0 if ok else float("nan")
        heap = driver.execute_script("return performance.memory.usedJSHeapSize / 1048576")
        return {"drawn": drawn, "load": loaded, "heap": heap}
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


OVERVIEWS = """
const svgs = [...document.querySelectorAll('.overview svg')];
return svgs.length === window.ATTNSCOPE_REPORT.inputs.length && svgs.every(s => s.querySelectorAll('path, rect').length > 10);
"""
HEAD = """
const e = document.getElementById(decodeURIComponent(location.hash.slice(1)));
return e !== null && e.querySelectorAll('.charts svg').length >= 2;
"""


def measure(out, took=None, label=""):
    out = os.path.abspath(out)
    pages, data = layout(out)
    index = browse("file://" + os.path.join(out, "index.html"), OVERVIEWS)
    layer_pages = {p: b for p, b in pages.items() if p != "index.html"}
    units = [u for i in data["inputs"] for u in i["units"]]
    data_mib = os.path.getsize(os.path.join(out, "data.js")) / 2**20
    line = (f"{label}{len(units)} heads: " + (f"report {took:.0f} s (--jobs 2); " if took is not None else "") +
            f"index.html {pages['index.html'] / 2**20:.1f} MiB (data.js {data_mib:.1f} MiB), overviews drawn "
            f"{index['drawn']:.2f} s, every image loaded {index['load']:.2f} s, heap {index['heap']:.0f} MiB")
    if layer_pages:   # the largest layer page, opened at its first head
        page = max(layer_pages, key=layer_pages.get)
        first = next(u for u in units if u.get("page") == page)
        url = "file://" + os.path.join(out, page) + "#" + first["anchor"]
        line += (f"; {len(layer_pages)} layer pages, the largest {page} {layer_pages[page] / 2**20:.1f} MiB "
                 f"({os.path.getsize(os.path.join(out, page[:-5] + '.js')) / 2**20:.2f} MiB of data)")
    else:     # one page: opened at its last head
        url = "file://" + os.path.join(out, "index.html") + "#" + units[-1]["anchor"]
        line += "; the same page opened at its last head"
    head = browse(url, HEAD)
    line += f": its charts drawn {head['drawn']:.2f} s, every image loaded {head['load']:.2f} s, heap {head['heap']:.0f} MiB"
    print(line)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--attnscope", default=os.path.join(HERE, "..", "build", "app", "attnscope"))
    ap.add_argument("--work", default="/tmp/report_scale")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--pages", default="auto", choices=["auto", "single", "layer"])
    ap.add_argument("--existing", help="a report folder made before: its page written again with --pages (a rerun "
                                       "resumes: nothing is measured again) into a copy, then measured")
    a = ap.parse_args()
    if a.existing:
        again = os.path.join(a.work, "R-" + a.pages)
        shutil.rmtree(again, ignore_errors=True)
        shutil.copytree(os.path.join(a.existing, "runs"), os.path.join(again, "runs"))
        runs = os.path.join(a.existing, "runs")
        models = []
        for job in (os.path.join(runs, name, "job.toml") for name in sorted(os.listdir(runs))):   # each job's input
            with open(job) as f:
                models += [line.split('"')[1] for line in f if line.startswith("inputs = ")]
        subprocess.run([a.attnscope, "report", *models, "--out", again, "--pages", a.pages], check=True,
                       stderr=subprocess.DEVNULL)
        measure(again, label=f"--pages {a.pages}: ")
        return
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    model = os.path.join(a.work, "model.h5")
    make_model(model, a.layers, a.heads, a.n, a.d)
    out = os.path.join(a.work, "R")
    t0 = time.monotonic()
    subprocess.run([a.attnscope, "report", model, "--out", out, "--jobs", "2", "--pages", a.pages], check=True,
                   stderr=subprocess.DEVNULL)
    took = time.monotonic() - t0
    measure(out, took, f"{a.layers} layers x {a.heads} heads, N = {a.n}, d = {a.d}, --pages {a.pages}: ")


if __name__ == "__main__":
    main()
