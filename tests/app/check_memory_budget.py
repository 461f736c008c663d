"""Compressed inputs cannot push a run over --max-memory: the budget of the whole run (every selected
slice as float64, the analysis' working space) is checked from the headers before anything is
decompressed or widened. Inputs that decompress to far more than they take on disk: an .npz of deflated
zeros and an HDF5 file whose gzip-chunked datasets were never written (they read as their fill value).
Each command must exit 2 with one `error:` line naming --max-memory, at a peak resident size of a few
hundred MiB at most (reading one such tensor would take about 2 GiB).
usage: check_memory_budget.py ATTNSCOPE WORKDIR"""
import os
import resource
import subprocess
import sys
import time
import zipfile

import h5py
import numpy as np

import cli_checks

if len(sys.argv) > 1 and sys.argv[1] == "--measure":
    # One command in a child of this process: print its exit status, peak RSS (KiB) and stderr.
    p = subprocess.run(sys.argv[2:], capture_output=True, text=True)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(p.returncode, peak)
    sys.stdout.write(p.stderr)
    sys.exit(0)

binary, work = sys.argv[1], sys.argv[2]
problems = []
SHAPE = (1, 60000, 4096)   # 2 GiB per tensor as float64


def npy_header(shape, descr="<f2"):
    text = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, str(tuple(shape)))
    pad = 64 - (10 + len(text) + 1) % 64
    text = text + " " * pad + "\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text.encode("latin1")


npz = os.path.join(work, "bomb.npz")
with zipfile.ZipFile(npz, "w", zipfile.ZIP_DEFLATED, allowZip64=True) as z:
    for name in "qk":
        with z.open(name + ".npy", "w", force_zip64=True) as f:
            f.write(npy_header(SHAPE))
            left = int(np.prod(SHAPE)) * 2
            chunk = bytes(1 << 24)
            while left:
                n = min(left, len(chunk))
                f.write(chunk[:n])
                left -= n
h5 = os.path.join(work, "bomb.h5")
with h5py.File(h5, "w") as f:
    for name in "qk":
        f.create_dataset(name, shape=SHAPE, dtype="f2", chunks=(1, 1000, 512), compression="gzip", fillvalue=0)
for path in (npz, h5):
    print(f"{os.path.basename(path)}: {os.path.getsize(path) / 2**20:.1f} MiB on disk")

out = os.path.join(work, "out")
os.makedirs(out, exist_ok=True)
cases = [
    ["analyze", "--q", npz + ":q", "--k", npz + ":k", "--max-memory", "3G"],
    ["analyze", "--q", h5 + ":/q", "--k", h5 + ":/k", "--max-memory", "3G", "--json", os.path.join(out, "a.json")],
    ["matrix", "--q", npz + ":q", "--k", npz + ":k", "--mechanism", "linear", "--max-memory", "3G",
     "--out", os.path.join(out, "m.npy")],
    ["sweep", "--q", h5 + ":/q", "--k", h5 + ":/k", "--vary", "n=1000,60000", "--max-memory", "3G",
     "--csv", os.path.join(out, "s.csv")],
]
for args in cases:
    start = time.monotonic()
    p = subprocess.run([sys.executable, __file__, "--measure", binary] + args, capture_output=True, text=True)
    seconds = time.monotonic() - start
    first, _, stderr = p.stdout.partition("\n")
    status, peak_kib = (int(x) for x in first.split())
    what = " ".join(args[:1] + [os.path.basename(a) for a in args[1:]])
    print(f"{what}: exit {status}, peak {peak_kib / 1024:.0f} MiB, {seconds:.2f} s")
    lines = stderr.strip().splitlines()
    if status != 2 or len(lines) != 1 or not lines[0].startswith("error: ") or "--max-memory" not in lines[0]:
        problems.append(f"{what}: exit {status}, stderr {stderr.strip()!r} (expected 2 and one error line naming --max-memory)")
    if peak_kib > 400 * 1024:
        problems.append(f"{what}: peak resident size {peak_kib / 1024:.0f} MiB: the input was read before the refusal")
if os.listdir(out):
    problems.append(f"output left behind: {os.listdir(out)}")
cli_checks.report(problems)
