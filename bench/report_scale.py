#!/usr/bin/python3
"""Scale of `attnscope report` (issue 34 item 3): a 12-layer x 12-head model at N = 1024 (d = 64, random q and k
with a shared smooth positional part), reported with --jobs 2; prints the report's wall time, the size of what the
browser loads (index.html, data.js, scripts, the maps images) and the time headless Chromium takes from asking for
the page to every overview drawn (tests/app/check_report_browser.py's browser, network off).

    bench/report_scale.py [--attnscope build/app/attnscope] [--work /tmp/report_scale] [--layers 12 --heads 12 --n 1024]
"""
import argparse
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


def page_bytes(out):
    total = 0
    for root, _, files in os.walk(out):
        rel = os.path.relpath(root, out)
        for name in files:
            loaded = rel in (".", "vendor") and name.endswith((".html", ".js", ".css")) or name.endswith("_maps.png")
            if loaded:
                total += os.path.getsize(os.path.join(root, name))
    return total


def open_time(index):
    import importlib.util
    spec = importlib.util.spec_from_file_location("check_report_browser",
                                                  os.path.join(HERE, "..", "tests", "app", "check_report_browser.py"))
    browser = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(browser)
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    driver = browser.browser(1600, 1000, profile)
    try:
        t0 = time.monotonic()
        driver.get("file://" + index)
        ok = browser.wait_for(driver, browser.DRAWN, 120)
        return time.monotonic() - t0 if ok else float("nan")
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--attnscope", default=os.path.join(HERE, "..", "build", "app", "attnscope"))
    ap.add_argument("--work", default="/tmp/report_scale")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--existing", help="measure the page of a report folder made before (no new report)")
    a = ap.parse_args()
    if a.existing:
        print(f"page {page_bytes(a.existing) / 2**20:.1f} MiB; overviews drawn "
              f"{open_time(os.path.join(os.path.abspath(a.existing), 'index.html')):.2f} s after the page was asked for")
        return
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    model = os.path.join(a.work, "model.h5")
    make_model(model, a.layers, a.heads, a.n, a.d)
    out = os.path.join(a.work, "R")
    t0 = time.monotonic()
    subprocess.run([a.attnscope, "report", model, "--out", out, "--jobs", "2"], check=True, stderr=subprocess.DEVNULL)
    took = time.monotonic() - t0
    size = page_bytes(out)
    data = os.path.getsize(os.path.join(out, "data.js"))
    opened = open_time(os.path.join(out, "index.html"))
    print(f"{a.layers} layers x {a.heads} heads, N = {a.n}, d = {a.d}: report {took:.0f} s (--jobs 2); "
          f"page {size / 2**20:.1f} MiB (data.js {data / 2**20:.1f} MiB); overviews drawn {opened:.2f} s after the page was asked for")


if __name__ == "__main__":
    main()
