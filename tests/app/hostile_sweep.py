#!/usr/bin/env python3
"""The hostile sweep of docs/security.md: several hundred scripted cases, tried as an attacker and as a
clumsy user would, across every subcommand (info, analyze, matrix, synth, sweep, batch, merge, figure)
and the desktop app's scripted runs (--screenshot, --save-session, --session).

Each case runs attnscope in its own sandbox folder, with a timeout and an address-space limit, and is
checked for
  - no crash: no signal, exit 0 or 2, and exit 2 always with exactly one `error:` line on stderr;
  - no hang: the timeout;
  - no unbounded allocation: RLIMIT_AS (an allocation past it is a crash or exit 1, both failures);
  - no file created or modified outside the outputs the case names: the sandbox, the shared fixtures and
    a decoy folder are snapshotted before and after (paths, types, sizes, contents);
  - no secret leaked: the decoy folder's secrets never appear in standard output, standard error or any
    file the case leaves;
  - no exit 0 with a named output missing, and no output left behind on exit 2;
  - for cases that must be refused (security holes: external storage, escaping recipes, lying shard
    sets ...), exit 2.

usage: hostile_sweep.py ATTNSCOPE WORKDIR [--jobs J] [--only SUBSTRING] [--timeout SECONDS] [--list]
Prints one line per case (PASS / FAIL and why) and a summary; exits 1 when any case fails.
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import resource
import shutil
import signal
import stat
import struct
import subprocess
import sys
import threading
import time

import h5py
import numpy as np

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(TESTS)
DATA = os.path.join(REPO, "data")
MEMORY_CAP = 4 << 30
SECRET = b"HOSTILE-SWEEP-SECRET-7f3a9c1e"


class Case:
    """One hostile run: `args` (bytes or str items; {fx}, {sb}, {decoy} expand to the folders), the outputs
    it names (relative to its sandbox), and what must hold."""

    def __init__(self, cid, args, outputs=(), expect=None, env=None, setup=None, stdout=None, forbidden=(),
                 kill_after=None, reader_fifos=(), unchanged=(), note="", needles=(), check=None):
        self.id = cid
        self.args = list(args)
        self.outputs = list(outputs)
        self.expect = expect          # None: 0 or 2; 2: must be refused; 0: must succeed
        self.env = env or {}
        self.setup = setup            # callable(sandbox) preparing the sandbox
        self.stdout = stdout          # a path to send standard output to (e.g. /dev/full)
        self.forbidden = list(forbidden)   # paths (with {sb} ...) that must not exist afterwards
        self.kill_after = kill_after  # seconds: send SIGTERM (a signal case)
        self.reader_fifos = list(reader_fifos)   # FIFOs in the sandbox that a reader drains during the run
        self.unchanged = list(unchanged)         # special files in the sandbox that must keep their type
        self.note = note              # what a failure means (shown in the report)
        self.needles = list(needles)  # texts standard error must hold (what a refusal names)
        self.check = check            # callable(sandbox, stdout bytes) -> list of problems, run after the case


# ---------------------------------------------------------------------------------------------------------
# Fixtures


def write_h5(path, **datasets):
    with h5py.File(path, "w") as f:
        for name, value in datasets.items():
            f[name] = value


def safetensors_bytes(tensors):
    header, blobs, offset = {}, [], 0
    for name, arr in tensors.items():
        raw = np.ascontiguousarray(arr, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def npy_with_header(header_text, payload=b"\0" * 64):
    h = header_text + " " * (63 - (10 + len(header_text)) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h.encode() + payload


def make_decoy(decoy):
    """Secrets that no case may read, leak, change or add to (one shared by the fixtures that point at it, and
    one per case, so that cases running in parallel are told apart)."""
    os.makedirs(decoy, exist_ok=True)
    open(os.path.join(decoy, "secret.bin"), "wb").write(SECRET * 512)
    open(os.path.join(decoy, "passwd"), "wb").write(SECRET + b"\nroot:x:0:0:root:/root:/bin/bash\n")
    os.mkfifo(os.path.join(decoy, "fifo"))


def make_fixtures(fx, decoy, attnscope):
    os.makedirs(fx, exist_ok=True)
    os.makedirs(decoy, exist_ok=True)
    rng = np.random.default_rng(21)
    q, k, v = rng.normal(size=(2, 48, 8)), rng.normal(size=(2, 48, 8)), rng.normal(size=(2, 48, 8))
    write_h5(os.path.join(fx, "good.h5"), q=q, k=k, v=v)
    g = rng.normal(size=(1, 64, 8))
    with h5py.File(os.path.join(fx, "grid.h5"), "w") as f:
        f["q"], f["k"] = g, g[:, ::-1]
        f.attrs["grid"] = [8, 8]
        f.attrs["block_grid"] = [2, 2]
    np.save(os.path.join(fx, "q.npy"), q[0])
    np.save(os.path.join(fx, "k.npy"), k[0])
    np.savez(os.path.join(fx, "good.npz"), q=q, k=k)
    open(os.path.join(fx, "good.safetensors"), "wb").write(safetensors_bytes({"q": q[0], "k": k[0]}))
    for name in ("gaussian.h5", "lowrank.h5", "vit_digits.h5", "char_llama_gqa.h5"):
        shutil.copy(os.path.join(DATA, name), os.path.join(fx, name))

    make_decoy(decoy)

    # HDF5 that reads other files: external raw storage on the secret and on a FIFO, virtual datasets.
    with h5py.File(os.path.join(fx, "ext_secret.h5"), "w") as f:
        f.create_dataset("q", shape=(48, 8), dtype="<f8", external=[(os.path.join(decoy, "secret.bin"), 0, 48 * 8 * 8)])
        f["k"] = k[0]
    with h5py.File(os.path.join(fx, "ext_rel.h5"), "w") as f:
        f.create_dataset("q", shape=(48, 8), dtype="<f8",
                         external=[(os.path.relpath(os.path.join(decoy, "secret.bin"), fx), 0, 48 * 8 * 8)])
        f["k"] = k[0]
    with h5py.File(os.path.join(fx, "ext_fifo.h5"), "w") as f:
        f.create_dataset("q", shape=(48, 8), dtype="<f8", external=[(os.path.join(decoy, "fifo"), 0, 48 * 8 * 8)])
        f["k"] = k[0]
    with h5py.File(os.path.join(fx, "ext_dev.h5"), "w") as f:
        f.create_dataset("q", shape=(48, 8), dtype="<f8", external=[("/dev/zero", 0, 48 * 8 * 8)])
        f["k"] = k[0]
    layout = h5py.VirtualLayout(shape=(48, 8), dtype="<f8")
    layout[:] = h5py.VirtualSource(os.path.join(fx, "missing_source.h5"), "q", shape=(48, 8))
    with h5py.File(os.path.join(fx, "vds_missing.h5"), "w") as f:
        f.create_virtual_dataset("q", layout, fillvalue=0)
        f["k"] = k[0]
    write_h5(os.path.join(decoy, "source.h5"), q=q[0])
    layout = h5py.VirtualLayout(shape=(48, 8), dtype="<f8")
    layout[:] = h5py.VirtualSource(os.path.join(decoy, "source.h5"), "q", shape=(48, 8))
    with h5py.File(os.path.join(fx, "vds_outside.h5"), "w") as f:
        f.create_virtual_dataset("q", layout, fillvalue=0)
        f["k"] = k[0]

    # Headers that claim more than the file holds.
    with h5py.File(os.path.join(fx, "huge_heads.h5"), "w") as f:
        for name in ("q", "k"):
            f.create_dataset(name, shape=(2000000000, 8, 4), chunks=(1, 8, 4), dtype="f4")
    with h5py.File(os.path.join(fx, "huge_tokens.h5"), "w") as f:
        for name in ("q", "k"):
            f.create_dataset(name, shape=(1, 4000000000, 8), chunks=(1, 64, 8), dtype="f4")
    open(os.path.join(fx, "huge.npy"), "wb").write(
        npy_with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000, 1000000), }"))
    open(os.path.join(fx, "overflow.npy"), "wb").write(
        npy_with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904, 4), }"))
    open(os.path.join(fx, "object.npy"), "wb").write(
        npy_with_header("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", b"\x80\x02]q\x00."))
    open(os.path.join(fx, "negative.npy"), "wb").write(
        npy_with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (-1, 8), }"))
    st = safetensors_bytes({"q": q[0]})
    open(os.path.join(fx, "st_huge_header.safetensors"), "wb").write(struct.pack("<Q", 1 << 62) + st[8:])
    open(os.path.join(fx, "st_lying.safetensors"), "wb").write(
        st.replace(b'"shape": [48, 8]', b'"shape": [4800000, 8000]'))

    # Truncated and corrupted copies of the bundled samples and of the small formats.
    for name in ("gaussian.h5", "vit_digits.h5", "q.npy", "good.npz", "good.safetensors"):
        raw = open(os.path.join(fx, name), "rb").read()
        stem, ext = os.path.splitext(name)
        for frac in (0.0, 0.01, 0.5, 0.99):
            open(os.path.join(fx, "trunc_%s_%d%s" % (stem, int(frac * 100), ext)), "wb").write(raw[: int(len(raw) * frac)])
        flipped = bytearray(raw)
        for i in range(64, len(flipped), max(1, len(flipped) // 97)):
            flipped[i] ^= 0xA5
        open(os.path.join(fx, "flip_%s%s" % (stem, ext)), "wb").write(bytes(flipped))

    # Names that are not UTF-8, and special files standing where data files should be.
    shutil.copy(os.path.join(fx, "good.h5"), os.fsencode(fx) + b"/bad\xff\xfe.h5")
    shutil.copy(os.path.join(fx, "good.h5"), os.path.join(fx, "new\nline.h5"))
    os.mkfifo(os.path.join(fx, "fifo.h5"))
    os.mkfifo(os.path.join(fx, "fifo.npy"))
    os.symlink("/dev/zero", os.path.join(fx, "zero.npy"))
    os.symlink("/dev/urandom", os.path.join(fx, "urandom.h5"))
    os.symlink(os.path.join(decoy, "passwd"), os.path.join(fx, "passwd.h5"))
    os.symlink("loop_b.h5", os.path.join(fx, "loop_a.h5"))
    os.symlink("loop_a.h5", os.path.join(fx, "loop_b.h5"))
    os.makedirs(os.path.join(fx, "dir.h5"), exist_ok=True)
    np.save(os.path.join(fx, "mix_big.npy"), np.ones((5000, 5000), dtype=np.float32))
    np.save(os.path.join(fx, "mix_nan.npy"), np.full((4, 4), np.nan))

    # A real shard set to lie about: two shards of a small job.
    os.makedirs(os.path.join(fx, "job"), exist_ok=True)
    shutil.copy(os.path.join(fx, "good.h5"), os.path.join(fx, "job", "good.h5"))
    shutil.copy(os.path.join(fx, "gaussian.h5"), os.path.join(fx, "job", "gaussian.h5"))
    open(os.path.join(fx, "job", "job.toml"), "w").write(
        'inputs = ["good.h5", "gaussian.h5"]\nq = "q"\nk = "k"\nheads = "all"\nmechanisms = ["linear"]\n'
        '[metrics]\nmetrics = "entropy"\n')
    shards_ok = True
    for i in range(2):
        r = subprocess.run([attnscope, "batch", os.path.join(fx, "job", "job.toml"), "--out",
                            os.path.join(fx, "shards", str(i)), "--shard", "%d/2" % i], capture_output=True,
                           env=base_env(os.path.join(fx, "..", "cache")), timeout=300)
        shards_ok = shards_ok and r.returncode == 0
    return shards_ok


# ---------------------------------------------------------------------------------------------------------
# Running one case


def base_env(cache):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTNSCOPE_") and k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env["QT_QPA_PLATFORM"] = "offscreen"
    env["ATTNSCOPE_CACHE_DIR"] = cache
    env["OPENBLAS_NUM_THREADS"] = "1"
    return env


def snapshot(root):
    """path -> (kind, size, digest) for everything under root (symlinks not followed)."""
    out = {}
    root_b = os.fsencode(root)
    for dirpath, dirnames, filenames in os.walk(root_b, followlinks=False):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            try:
                st = os.lstat(p)
            except FileNotFoundError:
                continue
            rel = os.path.relpath(p, root_b)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISREG(st.st_mode) and st.st_size > (64 << 20):
                # A huge (sparse) fixture: its size, inode and time stand for it (hashing 8 GiB takes a minute).
                out[rel] = ("file", st.st_size, st.st_ino, st.st_mtime_ns)
            elif stat.S_ISREG(st.st_mode):
                h = hashlib.sha256()
                with open(p, "rb") as f:
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        h.update(chunk)
                out[rel] = ("file", st.st_size, h.hexdigest())
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir",)
            else:
                out[rel] = ("special", stat.S_IFMT(st.st_mode))
    return out


def contains_secret(path):
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(st.st_mode):
        return False
    with open(path, "rb") as f:
        return SECRET in f.read(64 << 20)


USE_RLIMIT_AS = True   # off for sanitizer builds, which reserve terabytes of address space up front


def limit_resources():
    if USE_RLIMIT_AS:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.setsid()


def drain(path, stop):
    """A reader for a FIFO output: opens it (non-blocking until a writer comes) and reads until told to stop."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return
    try:
        while not stop.is_set():
            try:
                if not os.read(fd, 65536):
                    time.sleep(0.02)
            except BlockingIOError:
                time.sleep(0.02)
    finally:
        os.close(fd)


def expand(item, ctx):
    """{fx}, {sb}, {decoy}, {work} replaced (by hand: JSON and TOML texts hold braces of their own)."""
    for key in ("fx", "sb", "decoy", "work"):
        if key not in ctx:
            continue
        if isinstance(item, bytes):
            item = item.replace(b"{" + key.encode() + b"}", os.fsencode(ctx[key]))
        else:
            item = item.replace("{" + key + "}", ctx[key])
    return item


def slow(case, factor):
    """A case whose honest work takes several seconds (a 2000 mm figure): its hang timeout is `factor` times the
    sweep's, so that a loaded machine (CTest -j2 beside other heavy tests) does not read it as a hang."""
    case.time_factor = factor
    return case


def run_case(case, attnscope, work, timeout):
    timeout = timeout * getattr(case, "time_factor", 1)
    sb = os.path.join(work, "cases", case.id)
    os.makedirs(sb)
    ctx = {"fx": os.path.join(work, "fx"), "sb": sb, "decoy": os.path.join(work, "decoys", case.id), "work": work}
    make_decoy(ctx["decoy"])
    problems = []
    if case.setup:
        try:
            case.setup(sb, ctx)
        except Exception as e:  # a fixture this machine cannot make (mknod without the capability ...)
            return case, "SKIP", ["setup: %s" % e], ""
    before = snapshot(sb)
    decoy_before = snapshot(ctx["decoy"])
    args = [attnscope] + [expand(a, ctx) for a in case.args]
    env = base_env(os.path.join(work, "cache"))
    env.update({k: (expand(v, ctx) if v is not None else None) for k, v in case.env.items()})
    for k in [k for k, v in env.items() if v is None]:
        del env[k]
    stop = threading.Event()
    readers = [threading.Thread(target=drain, args=(os.path.join(sb, f), stop), daemon=True) for f in case.reader_fifos]
    for t in readers:
        t.start()
    stdout_target = open(expand(case.stdout, ctx), "wb") if case.stdout else subprocess.PIPE
    start = time.monotonic()
    try:
        p = subprocess.Popen(args, cwd=sb, env=env, stdin=subprocess.DEVNULL, stdout=stdout_target,
                             stderr=subprocess.PIPE, preexec_fn=limit_resources)
        if case.kill_after is not None:
            try:
                out, err = p.communicate(timeout=case.kill_after)
            except subprocess.TimeoutExpired:
                p.send_signal(signal.SIGTERM)
                out, err = p.communicate(timeout=timeout)
        else:
            out, err = p.communicate(timeout=timeout)
        status = p.returncode
    except OSError as e:   # the case itself is broken (an argument too long ...)
        stop.set()
        return case, "FAIL", ["harness: cannot start the case: %s" % e], ""
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        status = None
        problems.append("hang: still running after %d s (killed)" % timeout)
    finally:
        stop.set()
        if case.stdout:
            stdout_target.close()
    elapsed = time.monotonic() - start
    out = out or b""
    err = err or b""
    err_text = err.decode("utf-8", "replace")
    if status is not None:
        if status < 0 and not (case.kill_after is not None and -status == signal.SIGTERM):
            problems.append("crash: killed by signal %d (%s)" % (-status, signal.Signals(-status).name))
        elif status >= 0 and status not in (0, 2):
            problems.append("exit %d (only 0 and 2 are allowed; 1 is an internal failure)" % status)
        if status == 2:
            error_lines = [line for line in err_text.splitlines() if line.startswith("error: ")]
            if len(error_lines) != 1:
                problems.append("exit 2 with %d `error:` lines (exactly one expected)" % len(error_lines))
        if case.expect is not None and status != case.expect and status >= 0:
            problems.append("exit %d, expected %d%s" % (status, case.expect, (": " + case.note) if case.note else ""))
    if SECRET in out or SECRET in err:
        problems.append("leak: the decoy's secret appears on standard output or error")
    after = snapshot(sb)
    declared = set()
    for o in case.outputs:
        rel = os.fsencode(expand(o, ctx))
        declared.add(rel)
        parts = rel.split(b"/")
        for i in range(1, len(parts)):
            declared.add(b"/".join(parts[:i]))
    declared_dirs = tuple(d + b"/" for d in declared)
    for path, info in after.items():
        if path in declared or path.startswith(declared_dirs):
            if info[0] == "file" and contains_secret(os.path.join(os.fsencode(sb), path)):
                problems.append("leak: output %s holds the decoy's secret" % os.fsdecode(path))
            continue
        if path not in before:
            problems.append("created %s (not a named output)" % os.fsdecode(path))
        elif before[path] != info:
            problems.append("modified %s" % os.fsdecode(path))
    for path in before:
        if path not in after and path not in declared:
            problems.append("removed %s" % os.fsdecode(path))
    for special in case.unchanged:
        st = os.lstat(os.path.join(sb, special))
        if stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode) and not os.path.exists(os.path.join(sb, special)):
            problems.append("replaced the special file %s with a regular file" % special)
    if snapshot(ctx["decoy"]) != decoy_before:
        problems.append("the decoy folder changed")
    for f in case.forbidden:
        if os.path.lexists(expand(f, ctx)):
            problems.append("wrote %s (a path the case must never write)" % expand(f, ctx))
    if status == 0:
        named = {os.fsencode(a) if isinstance(a, str) else a for a in args}
        for o in case.outputs:
            if o.endswith("/") or os.fsencode(expand(o, ctx)) not in named:
                continue   # a folder, or an output this case's command does not name
            p_out = os.path.join(sb, expand(o, ctx))
            if not os.path.lexists(p_out):
                problems.append("exit 0 but the output %s is missing" % o)
    elif status is not None and status > 0:
        for o in case.outputs:
            if o.endswith("/") and case.args and case.args[0] == "batch":
                continue   # a batch keeps its folder when units fail at run time: records, failures.txt (docs/batch.md)
            p_out = os.path.join(sb, expand(o, ctx).rstrip("/"))
            if os.path.lexists(p_out) and os.fsencode(expand(o, ctx).rstrip("/")) not in before:
                problems.append("exit %d but the output %s was left behind" % (status, o))
    if status is not None:
        for n in case.needles:
            if expand(n, ctx) not in err_text:
                problems.append("standard error does not name %r" % n)
        if case.check:
            problems += case.check(sb, out)
    first_error = next((line for line in err_text.splitlines() if line.startswith("error: ")), "")
    detail = "exit %s in %.1f s%s" % (status, elapsed, (": " + first_error[:160]) if first_error else "")
    return case, ("FAIL" if problems else "PASS"), problems, detail


# ---------------------------------------------------------------------------------------------------------
# The cases


def qk(name, q="/q", k="/k"):
    if name.endswith((".h5", ".hdf5")):
        return ["--q", "{fx}/%s:%s" % (name, q), "--k", "{fx}/%s:%s" % (name, k)]
    if name.endswith(".npz") or name.endswith(".safetensors"):
        return ["--q", "{fx}/%s:q" % name, "--k", "{fx}/%s:k" % name]
    return ["--q", "{fx}/%s" % name, "--k", "{fx}/%s" % name]


def copy_into(*names):
    """A setup copying fixtures into the sandbox (for cases that may write beside them)."""
    def setup(sb, ctx):
        for n in names:
            src = os.path.join(ctx["fx"], n)
            if os.path.isdir(src):
                shutil.copytree(src, os.path.join(sb, n), symlinks=True)
            else:
                shutil.copy(src, os.path.join(sb, n))
    return setup


def write_into(files, then=None):
    """A setup writing {relative path: bytes or str (with {fx} ... expanded)} into the sandbox."""
    def setup(sb, ctx):
        for rel, content in files.items():
            path = os.path.join(sb, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if isinstance(content, str):
                content = expand(content, ctx).encode()
            open(path, "wb").write(content)
        if then:
            then(sb, ctx)
    return setup


def fifo_in(*names):
    def setup(sb, ctx):
        for n in names:
            os.mkfifo(os.path.join(sb, n))
    return setup


def chardev_in(name):
    def setup(sb, ctx):
        os.mknod(os.path.join(sb, name), stat.S_IFCHR | 0o666, os.makedev(1, 3))   # a null device of our own
    return setup


def number_cases():
    cases = []
    bad_ints = ["99999999999999999999", "-99999999999999999999", "9223372036854775808", "0x10", "1e3", "+1", "3.0", "010x"]
    analyze = ["analyze"] + qk("good.h5") + ["--json", "a.json"]
    int_options = [
        (analyze, "--seed", ["--feature-map", "favor"]), (analyze, "--favor-features", ["--feature-map", "favor"]),
        (analyze, "--blocks", []), (analyze, "--chunk", []), (analyze, "--head", []), (analyze, "--kv-head", []),
        (analyze, "--prefix-tokens", []), (analyze, "--top-k", []), (analyze, "--threads", []),
        (["sweep"] + qk("good.h5") + ["--vary", "n=16", "--subsample", "random", "--csv", "a.json"], "--draws", []),
        (["sweep"] + qk("good.h5") + ["--vary", "n=16", "--csv", "a.json"], "--subsample-seed", []),
        (["sweep", "--synth", "gaussian", "--vary", "n=16", "--csv", "a.json"], "--seeds", []),
        (["sweep", "--synth", "gaussian", "--vary", "n=16", "--csv", "a.json"], "--d", []),
        (["sweep", "--synth", "gaussian", "--vary", "m=1,2", "--csv", "a.json"], "--n", []),
        (["synth", "--d", "8", "--out", "a.json"], "--n", []), (["synth", "--n", "64", "--out", "a.json"], "--d", []),
        (["synth", "--n", "64", "--d", "8", "--out", "a.json"], "--heads", []),
        (["synth", "--n", "64", "--d", "8", "--out", "a.json"], "--seed", []),
        (["batch", "{fx}/job/job.toml", "--out", "a.json"], "--jobs", []),
        (["figure", "--view", "maps", "--out", "a.json"] + qk("good.h5"), "--query", []),
        (["figure", "--view", "maps", "--out", "a.json"] + qk("good.h5"), "--width", []),
        (["figure", "--view", "maps", "--out", "a.json"] + qk("good.h5"), "--height", []),
    ]
    for base, option, extra in int_options:
        for i, value in enumerate(bad_ints):
            cases.append(Case("int%s_%s_%d" % (base[0], option.strip("-"), i), base + extra + [option, value], ["a.json"],
                              expect=2, note="an integer that is not plain decimal within 64 bits must be refused"))
    bad_floats = ["nan", "-inf", "inf", "1e999", "0x1p3", "-nan(1)"]
    float_options = [(analyze, "--scale", []), (analyze, "--mixing-sigma", ["--mixing", "exp"]),
                     (analyze, "--mixing-threshold", ["--mixing", "local"]), (analyze, "--rank-rtol", [])]
    figure = ["figure", "--view", "maps", "--out", "f.png"] + qk("good.h5")
    float_options += [(figure, "--dpi", []), (figure, "--font-scale", []), (figure, "--width-mm", []),
                      (figure, "--height-mm", ["--width-mm", "80"]), (figure, "--font-size", ["--width-mm", "80"])]
    for base, option, extra in float_options:
        for i, value in enumerate(bad_floats):
            cases.append(Case("float%s_%s_%d" % (base[0], option.strip("-"), i), base + extra + [option, value],
                              ["a.json", "f.png"], expect=2, note="a float that is not finite decimal must be refused"))
    lists = [("--grid", ["--block-grid", "1,1"]), ("--block-grid", ["--grid", "6,8"]), ("--at", []), ("--token-grid", [])]
    bad_lists = ["17,4340410370284600384", "4611686018427387904,4", "0x8,6", "8,", ",", "99999999999999999999,1",
                 "-1,8", "6 8"]
    for option, extra in lists:
        for i, value in enumerate(bad_lists):
            if option == "--at":
                value = "h=" + value
            base = figure if option == "--token-grid" else analyze
            cases.append(Case("list_%s_%d" % (option.strip("-"), i), base + extra + [option, value], ["a.json", "f.png"],
                              expect=2, note="a list item that is not a size, or a grid whose product overflows"))
    for i, value in enumerate(["n=16,0x20", "n=99999999999999999999", "n=1e3", "m=-1", "x=4", "n=16,,32", "m=0"]):
        cases.append(Case("list_vary_%d" % i, ["sweep"] + qk("good.h5") + ["--vary", value, "--csv", "a.csv"], ["a.csv"],
                          expect=2))
    for i, value in enumerate(["0x1", "99999999999999999999", "-1", "1,,2", "all,0"]):
        cases.append(Case("list_heads_%d" % i, ["sweep"] + qk("good.h5") + ["--vary", "n=16", "--heads", value, "--csv", "a.csv"],
                          ["a.csv"], expect=2))
    for i, value in enumerate(["0x1/2", "1/0x2", "+1/2", "2/2", "1/0", "-1/2", "0/99999999999999999999", "0/1000001",
                               "0/2x", "1", " 0/2", "0/2/2"]):
        cases.append(Case("shard_%d" % i, ["batch", "{fx}/job/job.toml", "--out", "out", "--shard", value], ["out/"],
                          expect=2, note="--shard takes decimal I/N with 0 <= I < N"))
    for i, value in enumerate(["0x10G", "nanG", "infG", "1e999", "-1G", "G", "1.5.2G", "99999999999999999999T"]):
        cases.append(Case("maxmem_%d" % i, analyze + ["--max-memory", value], ["a.json"], expect=2))
    return cases


def count_cases():
    sweep = ["sweep"] + qk("good.h5") + ["--csv", "a.csv"]
    rows = [
        ("draws", sweep + ["--vary", "n=16", "--subsample", "random", "--draws", "1000000000"]),
        ("draws_max", sweep + ["--vary", "n=16", "--subsample", "random", "--draws", "9223372036854775807"]),
        ("draws_product", sweep + ["--vary", "n=16,32", "--subsample", "random", "--draws", "900000"]),
        ("seeds", ["sweep", "--synth", "gaussian", "--vary", "n=16", "--seeds", "1000000000", "--csv", "a.csv"]),
        ("seeds_product", ["sweep", "--synth", "gaussian", "--vary", "n=16,32", "--seeds", "400000", "--csv", "a.csv"]),
        ("synth_n", ["sweep", "--synth", "gaussian", "--vary", "m=1", "--n", "1000000000000", "--csv", "a.csv"]),
        ("synth_vary_n", ["sweep", "--synth", "gaussian", "--vary", "n=1000000000000", "--csv", "a.csv"]),
        ("synth_d", ["sweep", "--synth", "gaussian", "--vary", "n=16", "--d", "1000000000000", "--csv", "a.csv"]),
        ("vary_long", sweep + ["--vary", "n=" + ",".join(["16"] * 30000), "--subsample", "random", "--draws", "40"]),
        ("heads_all_huge", ["sweep"] + qk("huge_heads.h5") + ["--heads", "all", "--vary", "n=4", "--csv", "a.csv"]),
        ("overview_huge", ["figure", "--view", "overview", "--out", "a.csv"] + qk("huge_heads.h5")),
        ("tokens_huge", ["sweep"] + qk("huge_tokens.h5") + ["--vary", "m=1,2", "--csv", "a.csv"]),
        ("synth_cli", ["synth", "--n", "1000000000", "--d", "1000000000", "--out", "a.csv"]),
        ("synth_heads", ["synth", "--n", "64", "--d", "8", "--heads", "1000000000000", "--out", "a.csv"]),
        ("favor_features", ["analyze"] + qk("good.h5") + ["--feature-map", "favor", "--favor-features", "1000000",
                                                           "--json", "a.csv", "--max-memory", "1G"]),
        ("chunk_max", ["analyze"] + qk("good.h5") + ["--chunk", "9223372036854775807", "--json", "a.csv"]),
        ("blocks_max", ["analyze"] + qk("good.h5") + ["--blocks", "9223372036854775807", "--json", "a.csv"]),
        ("top_k_max", ["analyze"] + qk("good.h5") + ["--top-k", "9223372036854775807", "--json", "a.csv"]),
        ("matrix_huge", ["matrix"] + qk("huge_tokens.h5") + ["--mechanism", "softmax", "--out", "a.npy"]),
    ]
    cases = []
    for name, args in rows:
        expect = 0 if name in ("chunk_max",) else None if name in ("top_k_max", "favor_features", "blocks_max") else 2
        cases.append(Case("count_" + name, args, ["a.csv", "a.npy"], expect=expect,
                          note="a count checked against its cap or the memory budget before allocating"))
    cases.append(Case("count_batch_draws", ["batch", "job.toml", "--out", "out"], ["out/"], expect=2,
                      setup=write_into({"job.toml": 'inputs = ["{fx}/good.h5"]\n[[sweep]]\nname = "s"\nvary = "n=16"\n'
                                                    'subsample = "random"\ndraws = 1000000000\n'})))
    cases.append(Case("count_batch_heads", ["batch", "job.toml", "--out", "out"], ["out/"], expect=2,
                      setup=write_into({"job.toml": 'inputs = ["{fx}/huge_heads.h5"]\nheads = "all"\n'})))
    return cases


SECURITY_FILES = ["ext_secret.h5", "ext_rel.h5", "ext_fifo.h5", "ext_dev.h5", "vds_missing.h5", "vds_outside.h5"]
BROKEN_FILES = ["huge_heads.h5", "huge_tokens.h5", "huge.npy", "overflow.npy", "object.npy", "negative.npy",
                "st_huge_header.safetensors", "st_lying.safetensors", "fifo.h5", "fifo.npy", "zero.npy", "urandom.h5",
                "passwd.h5", "loop_a.h5", "dir.h5", "missing.h5"]


def data_cases(fx_names):
    cases = []
    for name in SECURITY_FILES:
        note = "HDF5 external storage / virtual datasets must be refused (they read other files)"
        cases.append(Case("sec_info_" + name, ["info", "{fx}/" + name], note=note))
        cases.append(Case("sec_analyze_" + name, ["analyze"] + qk(name) + ["--json", "o.json"], ["o.json"], expect=2, note=note))
        cases.append(Case("sec_matrix_" + name, ["matrix"] + qk(name) + ["--mechanism", "linear", "--out", "o.npy"],
                          ["o.npy"], expect=2, note=note))
        cases.append(Case("sec_sweep_" + name, ["sweep"] + qk(name) + ["--vary", "n=16", "--csv", "o.csv"], ["o.csv"],
                          expect=2, note=note))
        cases.append(Case("sec_shot_" + name, ["{fx}/" + name, "--screenshot", "o.png"], ["o.png"], expect=2, note=note))
    for name in BROKEN_FILES:
        cases.append(Case("bad_info_" + name, ["info", "{fx}/" + name]))
        expect = None if name == "huge_heads.h5" else 2   # head 0 of it is a real (never written) 8 x 4 slice
        cases.append(Case("bad_analyze_" + name, ["analyze"] + qk(name) + ["--json", "o.json"], ["o.json"], expect=expect))
        cases.append(Case("bad_matrix_" + name, ["matrix"] + qk(name) + ["--mechanism", "softmax", "--out", "o.npy"],
                          ["o.npy"], expect=expect))
    for name in sorted(fx_names):
        if name.startswith(("trunc_", "flip_")):
            cases.append(Case("trunc_info_" + name, ["info", "--json", "{fx}/" + name]))
            cases.append(Case("trunc_analyze_" + name, ["analyze"] + qk(name) + ["--json", "o.json"], ["o.json"]))
    for name in ("good.h5", "q.npy", "good.npz", "good.safetensors", "gaussian.h5", "char_llama_gqa.h5", "grid.h5"):
        refs = qk(name, "/layers/1/q", "/layers/1/k") if name == "char_llama_gqa.h5" else qk(name)
        cases.append(Case("ok_analyze_" + name, ["analyze"] + refs + ["--json", "o.json"], ["o.json"], expect=0))
    # Names that are not UTF-8 (and a newline): they work, and messages show them lossily.
    bad = b"{fx}/bad\xff\xfe.h5"
    cases.append(Case("utf8_info", ["info", bad], expect=0))
    cases.append(Case("utf8_analyze", ["analyze", "--q", bad + b":/q", "--k", bad + b":/k", "--json", "o.json"], ["o.json"],
                      expect=0))
    cases.append(Case("utf8_out", ["analyze"] + qk("good.h5") + ["--json", b"o\xff.json"], [os.fsdecode(b"o\xff.json")],
                      expect=0))
    cases.append(Case("utf8_missing", ["analyze", "--q", b"{fx}/nope\xff.h5:/q", "--k", bad + b":/k"], expect=2))
    cases.append(Case("utf8_batch_jobs2", ["batch", "job.toml", "--out", "out", "--jobs", "2"], ["out/"], expect=0,
                      setup=write_into({"job.toml": 'inputs = ["d/*.h5"]\nmechanisms = ["linear"]\n[metrics]\nmetrics = "entropy"\n'},
                                       then=lambda sb, ctx: [os.makedirs(os.path.join(sb, "d"), exist_ok=True)] + [
                                           shutil.copy(os.path.join(ctx["fx"], "good.h5"), os.fsencode(sb) + b"/d/bad\xff%d.h5" % i)
                                           for i in range(3)]),
                      note="non-UTF-8 input names must work with --jobs 2"))
    cases.append(Case("newline_analyze", ["analyze"] + qk("new\nline.h5") + ["--json", "o.json"], ["o.json"], expect=0))
    cases.append(Case("stem_collision", ["batch", "job.toml", "--out", "out"], ["out/"], expect=0,
                      setup=write_into({"job.toml": 'inputs = ["a/m.h5", "b/m.h5"]\nmechanisms = ["linear"]\n'
                                                    '[[figure]]\nview = "entropy"\n'},
                                       then=lambda sb, ctx: [(os.makedirs(os.path.join(sb, d), exist_ok=True),
                                                              shutil.copy(os.path.join(ctx["fx"], "good.h5"), os.path.join(sb, d, "m.h5")))
                                                             for d in ("a", "b")])))
    return cases


def output_cases():
    analyze = ["analyze"] + qk("good.h5")
    cases = [
        Case("out_fifo_json", analyze + ["--json", "p.json"], setup=fifo_in("p.json"), reader_fifos=["p.json"],
             unchanged=["p.json"], note="a FIFO output is written in place or refused, never replaced"),
        Case("out_fifo_matrix", ["matrix"] + qk("good.h5") + ["--mechanism", "softmax", "--out", "p.npy"],
             setup=fifo_in("p.npy"), reader_fifos=["p.npy"], unchanged=["p.npy"]),
        Case("out_fifo_csv", ["sweep"] + qk("good.h5") + ["--vary", "n=16", "--csv", "p.csv"], setup=fifo_in("p.csv"),
             reader_fifos=["p.csv"], unchanged=["p.csv"]),
        Case("out_fifo_synth", ["synth", "--n", "16", "--d", "4", "--out", "p.h5"], setup=fifo_in("p.h5"),
             reader_fifos=["p.h5"], unchanged=["p.h5"]),
        Case("out_fifo_session", ["{fx}/good.h5", "--save-session", "p.attnscope"], setup=fifo_in("p.attnscope"),
             reader_fifos=["p.attnscope"], unchanged=["p.attnscope"]),
        Case("out_fifo_figure", ["figure", "--view", "maps", "--out", "p.png"] + qk("good.h5"), setup=fifo_in("p.png"),
             reader_fifos=["p.png"], unchanged=["p.png"]),
        Case("out_dev_json", analyze + ["--json", "null.json"], setup=chardev_in("null.json"), unchanged=["null.json"],
             note="a device output is written in place or refused, never replaced"),
        Case("out_dev_npy", ["matrix"] + qk("good.h5") + ["--mechanism", "linear", "--out", "null.npy"],
             setup=chardev_in("null.npy"), unchanged=["null.npy"]),
        Case("out_dev_csv", ["sweep"] + qk("good.h5") + ["--vary", "n=16", "--csv", "null.csv"], setup=chardev_in("null.csv"),
             unchanged=["null.csv"]),
        Case("out_dev_session", ["{fx}/good.h5", "--save-session", "null.attnscope"], setup=chardev_in("null.attnscope"),
             unchanged=["null.attnscope"]),
        Case("out_missing_dir", analyze + ["--json", "nodir/o.json"], expect=2),
        Case("out_is_dir", analyze + ["--json", "adir"], expect=2, setup=lambda sb, ctx: os.mkdir(os.path.join(sb, "adir"))),
        Case("out_is_file_dir", analyze + ["--json", "afile/o.json"], expect=2,
             setup=write_into({"afile": b"x"})),
        Case("out_same_path", ["sweep"] + qk("good.h5") + ["--vary", "n=16", "--csv", "x.out", "--json", "./x.out"],
             ["x.out"], expect=2, note="two outputs on one path must be refused"),
        Case("out_same_symlink", ["sweep"] + qk("good.h5") + ["--vary", "n=16", "--csv", "x.out", "--json", "l.out"],
             ["x.out", "l.out"], expect=2, setup=lambda sb, ctx: os.symlink("x.out", os.path.join(sb, "l.out"))),
        Case("out_is_input", ["matrix", "--q", "in.h5:/q", "--k", "in.h5:/k", "--mechanism", "softmax", "--out", "in.h5"],
             expect=2, setup=lambda sb, ctx: shutil.copy(os.path.join(ctx["fx"], "good.h5"), os.path.join(sb, "in.h5")),
             note="an output that is an input"),
        Case("out_is_input_synth", ["synth", "--n", "16", "--d", "4", "--out", "in.h5"], ["in.h5"], expect=0,
             setup=write_into({"in.h5": b"old"})),
        Case("out_full_stdout", analyze + ["--json", "o.json"], ["o.json"], expect=2, stdout="/dev/full",
             note="a full standard output is an error and leaves no o.json"),
        Case("out_full_stdout_json", analyze + ["--json", "-"], expect=2, stdout="/dev/full"),
        Case("out_full_info", ["info", "{fx}/good.h5"], expect=2, stdout="/dev/full"),
        Case("out_link_to_decoy", analyze + ["--json", "link.json"], ["link.json"],
             setup=lambda sb, ctx: os.symlink(os.path.join(ctx["decoy"], "passwd"), os.path.join(sb, "link.json"))),
        Case("out_empty_name", analyze + ["--json", ""], expect=2),
        Case("out_newline_name", analyze + ["--json", "o\nx.json"], ["o\nx.json"], expect=0),
        Case("out_matrix_ext", ["matrix"] + qk("good.h5") + ["--mechanism", "softmax", "--out", "m.txt"], expect=2),
        Case("out_sigterm_matrix", ["matrix"] + qk("gaussian.h5") + ["--mechanism", "softmax", "--out", "m.h5"], ["m.h5"],
             kill_after=0.3, note="SIGTERM leaves no temporary file"),
        Case("out_sigterm_sweep", ["sweep", "--synth", "gaussian", "--vary", "n=512", "--seeds", "50", "--csv", "s.csv",
                                   "--json", "s.json"], ["s.csv", "s.json"], kill_after=1.0),
        Case("out_sigterm_synth", ["synth", "--n", "200000", "--d", "64", "--out", "s.h5"], ["s.h5"], kill_after=0.5),
        Case("out_plot_bad_ext", ["sweep"] + qk("good.h5") + ["--vary", "n=16", "--csv", "a.csv", "--plot", "p.bmp"],
             ["a.csv", "p.bmp"], expect=2),
    ]
    return cases


def session_text(extra, files=("good.h5",), tensors=None):
    doc = {
        "attnscope_session": 1,
        "files": list(files),
        "tensors": tensors or {"q": {"file": "good.h5", "name": "/q"}, "k": {"file": "good.h5", "name": "/k"}},
        "selection": {"layout": "", "at": {"h": 0}, "prefix_tokens": 0, "token_grid": []},
        "view": "maps",
    }
    doc.update(extra)
    return json.dumps(doc)


def session_cases():
    recipe = {"kind": "gaussian", "n": 16, "d": 4, "heads": 1, "seed": 0}
    variants = [
        ("plain", session_text({}), None, []),
        ("gen_absolute", session_text({"generate": {"{decoy}/pwn.h5": recipe}}), None, ["{decoy}/pwn.h5"]),
        ("gen_escape", session_text({"generate": {"../../../escape_{id}.h5": recipe}}), None, ["{work}/cases/escape_{id}.h5"]),
        ("gen_up", session_text({"generate": {"../../up.h5": recipe}}), None, ["{sb}/up.h5"]),
        ("gen_bashrc", session_text({"generate": {".bashrc": recipe}}), None, ["{sb}/a/b/.bashrc"]),
        ("gen_deep", session_text({"generate": {"x/y/z/../../../../../deep.h5": recipe}}), None, ["{sb}/deep.h5"]),
        ("gen_huge", session_text({"generate": {"g.h5": dict(recipe, n=1000000000000)}}), 2, []),
        ("gen_negative", session_text({"generate": {"g.h5": dict(recipe, n=-5)}}), 2, []),
        ("gen_text", session_text({"generate": {"g.h5": dict(recipe, n="many")}}), 2, []),
        ("gen_grid_overflow", session_text({"generate": {"g.h5": dict(recipe, n=64, grid=[17, 4340410370284600384])}}), 2, []),
        ("gen_kind", session_text({"generate": {"g.h5": dict(recipe, kind="../../etc")}}), 2, []),
        ("tensor_absolute", session_text({}, tensors={"q": {"file": "{decoy}/passwd", "name": "/q"},
                                                      "k": {"file": "{decoy}/passwd", "name": "/k"}}), 2, []),
        ("tensor_dotdot", session_text({}, tensors={"q": {"file": "../../../../decoy/secret.bin", "name": "/q"},
                                                    "k": {"file": "good.h5", "name": "/k"}}), 2, []),
        ("mixing_secret", session_text({"mechanism": {"mixing": "{decoy}/secret.bin", "mixing_file": "{decoy}/secret.bin"}}),
         None, []),
        ("head_99", session_text({"selection": {"layout": "", "at": {"h": 99}, "prefix_tokens": 0, "token_grid": []}}), 2, []),
        ("head_negative", session_text({"selection": {"layout": "", "at": {"h": -1}, "prefix_tokens": 0, "token_grid": []}}),
         2, []),
        ("token_grid_overflow", session_text({"selection": {"layout": "", "at": {"h": 0}, "prefix_tokens": 0,
                                                            "token_grid": [17, 4340410370284600384]}}), None, []),
        ("query_huge", session_text({"query": 1e300}), None, []),
        ("version_999", session_text({"attnscope_session": 999}), 2, []),
        ("not_json", "{ this is not json", 2, []),
        ("empty", "", 2, []),
        ("array", "[1, 2, 3]", 2, []),
        ("nested", "[" * 100000 + "]" * 100000, 2, []),
        ("blocks_huge", session_text({"mechanism": {"block_mode": "blocks", "blocks": 9223372036854775807}}), None, []),
        ("files_secret", session_text({}, files=("{decoy}/passwd",)), None, []),
    ]
    cases = []
    for name, text, expect, forbidden in variants:
        for mode in ("shot", "figure"):
            cid = "session_%s_%s" % (mode, name)
            content = text.replace("{id}", cid)
            setup = write_into({"a/b/s.attnscope": content},
                               then=lambda sb, ctx: shutil.copy(os.path.join(ctx["fx"], "good.h5"),
                                                                os.path.join(sb, "a", "b", "good.h5")))
            if mode == "shot":
                args = ["--session", "a/b/s.attnscope", "--screenshot", "shot.png"]
            else:
                args = ["figure", "--session", "a/b/s.attnscope", "--view", "maps", "--out", "shot.png"]
            cases.append(Case(cid, args, ["shot.png", "a/b/"], expect=expect,
                              forbidden=sorted(set(f.replace("{id}", cid) for f in forbidden) | {"{sb}/a/b/.bashrc"}),
                              setup=setup, note="a session is data: it never writes outside its own folder"))
    big = Case("session_shot_toolarge", ["--session", "a/b/s.attnscope", "--screenshot", "shot.png"], ["shot.png"], expect=2,
               setup=write_into({"a/b/s.attnscope": b" " * (65 << 20) + b"{}"}))
    fifo = Case("session_shot_fifo", ["--session", "s.attnscope", "--screenshot", "shot.png"], ["shot.png"], expect=2,
                setup=fifo_in("s.attnscope"), note="a FIFO session must not hang")
    fig_fifo = Case("session_figure_fifo", ["figure", "--session", "s.attnscope", "--view", "maps", "--out", "shot.png"],
                    ["shot.png"], expect=2, setup=fifo_in("s.attnscope"))
    return cases + [big, fifo, fig_fifo]


def merge_cases():
    def shard_setup(mutate=None):
        def setup(sb, ctx):
            shutil.copytree(os.path.join(ctx["fx"], "shards"), os.path.join(sb, "shards"), symlinks=True)
            if mutate:
                mutate(sb, ctx)
        return setup

    def edit_json(index, **changes):
        def mutate(sb, ctx):
            path = os.path.join(sb, "shards", str(index), "shard.json")
            doc = json.load(open(path))
            doc.update(changes)
            json.dump(doc, open(path, "w"))
        return mutate

    def both(*mutations):
        def mutate(sb, ctx):
            for m in mutations:
                m(sb, ctx)
        return mutate

    def replace(rel, content):
        def mutate(sb, ctx):
            path = os.path.join(sb, "shards", rel)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            elif os.path.lexists(path):
                os.remove(path)
            if content == "FIFO":
                os.mkfifo(path)
            elif isinstance(content, tuple):
                os.symlink(expand(content[1], ctx), path)
            elif content is not None:
                open(path, "wb").write(content)
        return mutate

    def results_head(index, keep):
        def mutate(sb, ctx):
            path = os.path.join(sb, "shards", str(index), "results.jsonl")
            raw = open(path, "rb").read()
            open(path, "wb").write(raw[:keep] if isinstance(keep, int) else keep(raw))
        return mutate

    merge = ["merge", "shards/0", "shards/1", "--out", "merged"]
    lie = "a shard set whose records do not match shard.json must be refused"
    rows = [
        ("ok", merge, None, 0, lie),
        ("shards_1", merge, both(edit_json(0, shards=1), edit_json(1, shards=1)), 2, lie),
        ("one_claims_1", ["merge", "shards/0", "--out", "merged"], edit_json(0, shards=1), 2, lie),
        ("units_empty", merge, both(edit_json(0, units=[]), edit_json(1, units=[])), 2, lie),
        ("mechanisms_empty", merge, both(edit_json(0, mechanisms=[]), edit_json(1, mechanisms=[])), 2, lie),
        ("shards_2e9", merge, both(edit_json(0, shards=2000000000), edit_json(1, shards=2000000000)), 2, lie),
        ("shard_wrap", merge, edit_json(1, shard=4294967297), 2, lie),
        ("shard_negative", merge, edit_json(1, shard=-1), 2, lie),
        ("shard_text", merge, edit_json(1, shard="1"), 2, lie),
        ("json_missing", merge, replace("0/shard.json", None), 2, lie),
        ("json_fifo", merge, replace("0/shard.json", "FIFO"), 2, "a FIFO in a shard must not hang"),
        ("json_garbage", merge, replace("0/shard.json", b"\xff\xfe{{{"), 2, lie),
        ("json_huge", merge, replace("0/shard.json", b"[" * 1000000), 2, lie),
        ("json_link", merge, replace("0/shard.json", ("link", "{decoy}/passwd")), 2, "never follow symlinks in a shard"),
        ("results_truncated", merge, results_head(0, lambda raw: raw[: len(raw) // 2]), 2, lie),
        ("results_garbage", merge, results_head(0, lambda raw: raw + b"\xff\xfe not json\n"), 2, lie),
        ("results_fifo", merge, replace("0/results.jsonl", "FIFO"), 2, "a FIFO in a shard must not hang"),
        ("results_link", merge, replace("0/results.jsonl", ("link", "{decoy}/passwd")), 2, "never follow symlinks"),
        ("results_dup", merge, results_head(0, lambda raw: raw + raw), 2, lie),
        ("figures_link", merge, replace("0/figures", ("link", "{decoy}")), None, "never follow symlinks in a shard"),
        ("same_twice", ["merge", "shards/0", "shards/0", "--out", "merged"], None, 2, lie),
        ("out_is_shard", ["merge", "shards/0", "shards/1", "--out", "shards/0"], None, 2, "never rewrite a shard"),
        ("out_is_file", ["merge", "shards/0", "shards/1", "--out", "f"], lambda sb, ctx: open(os.path.join(sb, "f"), "w").write("x"),
         2, ""),
        ("shard_is_file", ["merge", "shards/0", "{fx}/good.h5", "--out", "merged"], None, 2, ""),
        ("shard_missing", ["merge", "shards/0", "shards/9", "--out", "merged"], None, 2, ""),
        ("partial_ok", ["merge", "shards/0", "--partial", "--out", "merged"], None, 0, ""),
    ]
    cases = []
    for name, args, mutate, expect, note in rows:
        outputs = ["merged/"] if name != "out_is_shard" else []
        cases.append(Case("merge_" + name, args, outputs, expect=expect, setup=shard_setup(mutate), note=note))
    return cases


def batch_cases():
    rows = [
        ("draws", '[[sweep]]\nname = "s"\nvary = "n=16"\nsubsample = "random"\ndraws = 1000000000\n', 2),
        ("draws_float", '[[sweep]]\nname = "s"\nvary = "n=16"\nsubsample = "random"\ndraws = 1e9\n', 2),
        ("vary_overflow", '[[sweep]]\nname = "s"\nvary = "n=99999999999999999999"\n', 2),
        ("maxmem_hex", 'max_memory = "0x10G"\n', 2),
        ("grid_overflow", '[attention]\ngrid = [17, 4340410370284600384]\nblock_grid = [1, 1]\n', 2),
        ("scale_nan", '[attention]\nscale = nan\n', 2),
        ("sigma_inf", '[attention]\nmixing = "exp"\nmixing_sigma = inf\n', 2),
        ("rtol_nan", '[metrics]\nrank_rtol = nan\n', 2),
        ("seed_negative", '[attention]\nseed = -1\n', 2),
        ("figure_dpi_inf", '[[figure]]\nview = "maps"\ndpi = inf\n', 2),
        ("figure_width_huge", '[[figure]]\nview = "maps"\nwidth = 2000000000\nheight = 2000000000\n', 2),
        ("figure_query_huge", '[[figure]]\nview = "maps"\nquery = 99999999999\n', 2),
        ("mixing_secret", '[attention]\nmixing = "{decoy}/secret.bin"\n', 2),
        ("heads_huge_list", 'heads = [%s]\n' % ",".join(["0"] * 100000), 2),
        ("heads_long_list", 'heads = [%s]\n' % ",".join(str(i) for i in range(100000)), 2),
        ("nested_arrays", 'x = ' + "[" * 5000 + "]" * 5000 + "\n", 2),
        ("long_key", '"%s" = 1\n' % ("k" * 5000000), 2),
        ("unknown_key", 'bogus = 1\n', 2),
        ("at_huge", 'at = { h = 99999999999 }\n', 2),
        ("prefix_huge", 'prefix_tokens = 9223372036854775807\n', 2),
        ("mixing_name_too_long", '[attention]\nblocks = 4\nmixing = "%s.npy"\n' % ("F" * 300), 2),
    ]
    cases = []
    for name, extra, expect in rows:
        body = 'inputs = ["{fx}/good.h5"]\nmechanisms = ["linear"]\n' + extra
        cases.append(Case("batch_" + name, ["batch", "job.toml", "--out", "out"], ["out/"], expect=expect,
                          setup=write_into({"job.toml": body})))
    more = [
        Case("batch_job_fifo", ["batch", "job.toml", "--out", "out"], ["out/"], expect=2, setup=fifo_in("job.toml"),
             note="a FIFO job must not hang"),
        Case("batch_job_zero", ["batch", "job.toml", "--out", "out"], ["out/"], expect=2,
             setup=lambda sb, ctx: os.symlink("/dev/zero", os.path.join(sb, "job.toml"))),
        Case("batch_inputs_devices", ["batch", "job.toml", "--out", "out"], ["out/"],
             setup=write_into({"job.toml": 'inputs = ["/dev/zero", "{fx}/fifo.h5", "{fx}/urandom.h5"]\n'})),
        Case("batch_inputs_secret", ["batch", "job.toml", "--out", "out"], ["out/"],
             setup=write_into({"job.toml": 'inputs = ["{decoy}/*"]\n'})),
        Case("batch_inputs_external", ["batch", "job.toml", "--out", "out"], ["out/"],
             setup=write_into({"job.toml": 'inputs = ["{fx}/ext_secret.h5"]\nmechanisms = ["linear"]\n'})),
        Case("batch_out_name_too_long", ["batch", "{fx}/job/job.toml", "--out", "F" * 300], expect=2,
             note="a name the system refuses is an input error, not an internal one"),
        Case("batch_out_is_file", ["batch", "{fx}/job/job.toml", "--out", "f"], expect=2, setup=write_into({"f": b"x"})),
        Case("batch_ok", ["batch", "{fx}/job/job.toml", "--out", "out", "--jobs", "2"], ["out/"], expect=0),
        Case("batch_rerun_changed", ["batch", "job.toml", "--out", "out"], ["out/"], expect=0,
             setup=write_into({"job.toml": 'inputs = ["in.h5"]\nmechanisms = ["linear"]\n'},
                              then=lambda sb, ctx: rerun_after_change(sb, ctx))),
    ]
    return cases + more


def rerun_after_change(sb, ctx):
    """A batch that ran once on in.h5, whose in.h5 then changed (the case reruns it)."""
    shutil.copy(os.path.join(ctx["fx"], "good.h5"), os.path.join(sb, "in.h5"))
    subprocess.run([ctx["attnscope"], "batch", os.path.join(sb, "job.toml"), "--out", os.path.join(sb, "out")],
                   env=base_env(os.path.join(ctx["work"], "cache")), capture_output=True, timeout=120)
    shutil.copy(os.path.join(ctx["fx"], "gaussian.h5"), os.path.join(sb, "in.h5"))


def env_cases():
    analyze = ["analyze"] + qk("gaussian.h5") + ["--json", "o.json"]
    cache_file = "cache/gemm-choice.txt"

    def cache_with(content):
        def setup(sb, ctx):
            os.makedirs(os.path.join(sb, "cache"))
            path = os.path.join(sb, cache_file)
            if content == "FIFO":
                os.mkfifo(path)
            elif isinstance(content, tuple):
                os.symlink(content[1], path)
            else:
                open(path, "wb").write(content)
        return setup

    cache_env = {"ATTNSCOPE_CACHE_DIR": "{sb}/cache"}
    return [
        Case("env_gemm_typo", analyze, ["o.json"], expect=2, env={"ATTNSCOPE_GEMM": "openblass"},
             note="a misspelt ATTNSCOPE_* value must be an error"),
        Case("env_simd_typo", analyze, ["o.json"], expect=2, env={"ATTNSCOPE_SIMD": "avx9000"}),
        Case("env_gemm_empty", analyze, ["o.json"], env={"ATTNSCOPE_GEMM": ""}),
        Case("env_xcb_figure", ["figure", "--view", "maps", "--out", "f.png"] + qk("good.h5"), ["f.png"],
             env={"QT_QPA_PLATFORM": "xcb"}, note="a Qt platform that cannot start must be one error line"),
        Case("env_bogus_platform", ["figure", "--view", "maps", "--out", "f.png"] + qk("good.h5"), ["f.png"],
             env={"QT_QPA_PLATFORM": "nonsense"}),
        Case("env_cache_fifo", analyze, ["o.json", "cache/"], env=cache_env, setup=cache_with("FIFO"),
             unchanged=[cache_file], note="a FIFO kernel cache must not hang"),
        Case("env_cache_urandom", analyze, ["o.json", "cache/"], env=cache_env, setup=cache_with(("link", "/dev/urandom"))),
        Case("env_cache_huge", analyze, ["o.json", "cache/"], env=cache_env, setup=cache_with(b"x" * (50 << 20))),
        Case("env_cache_garbage", analyze, ["o.json", "cache/"], env=cache_env, setup=cache_with(b"\xff\xfe\x00garbage\n" * 100)),
        Case("env_cache_link_decoy", analyze, ["o.json", "cache/"], env=cache_env,
             setup=cache_with(("link", "/nonexistent/../dev/null"))),
        Case("env_cache_dir_is_file", analyze, ["o.json"], env={"ATTNSCOPE_CACHE_DIR": "{sb}/cfile"},
             setup=write_into({"cfile": b"x"})),
        Case("env_no_home", analyze, ["o.json"], env={"HOME": None, "XDG_CACHE_HOME": None, "ATTNSCOPE_CACHE_DIR": None}),
        Case("env_threads_huge", analyze, ["o.json"], env={"OPENBLAS_NUM_THREADS": "99999999999"}),
    ]


def figure_cases():
    fig = ["figure", "--view", "maps"] + qk("good.h5")
    return [
        Case("fig_pdf_20000", fig + ["--width", "20000", "--height", "20000", "--out", "f.pdf"], ["f.pdf"],
             note="a figure size Qt cannot draw must be refused, not crash"),
        Case("fig_png_20000_dpi", fig + ["--width", "20000", "--height", "20000", "--dpi", "2400", "--out", "f.png"],
             ["f.png"], expect=2, note="2 x 10^11 pixels cannot be drawn"),
        Case("fig_svg_20000", fig + ["--width", "20000", "--height", "20000", "--out", "f.svg"], ["f.svg"]),
        slow(Case("fig_width_mm_max", fig + ["--width-mm", "2000", "--height-mm", "2000", "--out", "f.pdf"], ["f.pdf"]), 4),
        Case("shot_size_wrap", ["{fx}/good.h5", "--screenshot", "s.png", "--size", "4294967616x240"], ["s.png"], expect=2,
             note="--size must not wrap around"),
        Case("shot_size_huge", ["{fx}/good.h5", "--screenshot", "s.png", "--size", "100000x100000"], ["s.png"], expect=2),
        Case("shot_size_garbage", ["{fx}/good.h5", "--screenshot", "s.png", "--size", "0x1x2"], ["s.png"], expect=2),
        Case("shot_size_nan", ["{fx}/good.h5", "--screenshot", "s.png", "--size", "nanxnan"], ["s.png"], expect=2),
        Case("fig_view_state_deep", fig + ["--view-state", "[" * 30000 + "]" * 30000, "--out", "f.png"], ["f.png"], expect=2),
        Case("fig_ok", fig + ["--out", "f.png"], ["f.png"], expect=0),
        Case("shot_ok", ["{fx}/good.h5", "--screenshot", "s.png"], ["s.png"], expect=0),
    ]


# ---------------------------------------------------------------------------------------------------------
# Issue 30 (docs/hardening.md "Issue 30"): scripted runs onto their inputs, strict session and view-state
# numbers, aggregate and merge against hostile records, --threads under the address-space limit, batch jobs.


def link_into(target, name, hard):
    """A setup: `name` in the sandbox as a hard link or a symlink to `target` (relative to the sandbox)."""
    def setup(sb, ctx):
        (os.link if hard else os.symlink)(os.path.join(sb, target), os.path.join(sb, name))
    return setup


def steps(*setups):
    def setup(sb, ctx):
        for s_ in setups:
            s_(sb, ctx)
    return setup


def data_in(*names):
    """good.h5 copied into the sandbox under each name."""
    def setup(sb, ctx):
        for n in names:
            os.makedirs(os.path.dirname(os.path.join(sb, n)) or sb, exist_ok=True)
            shutil.copy(os.path.join(ctx["fx"], "good.h5"), os.path.join(sb, n))
    return setup


def session_in(name, extra, files=("good.h5",), tensors=None):
    return write_into({name: session_text(extra, files, tensors)})


def record_line(unit, mechanism, metrics):
    doc = {"key": "u%s|%s" % (unit, mechanism), "unit": unit, "mechanism": mechanism}
    doc.update(metrics)
    return json.dumps(doc, separators=(",", ":"))


def results_in(lines, folder="r", name="results.jsonl", tail="\n"):
    """A batch results folder `folder` whose results.jsonl holds `lines` (a list, or a callable making it)."""
    def setup(sb, ctx):
        os.makedirs(os.path.join(sb, folder), exist_ok=True)
        body = lines() if callable(lines) else lines
        with open(os.path.join(sb, folder, name), "w") as f:
            f.write("\n".join(body) + (tail if body else ""))
    return setup


def sparse_in(rel, size):
    def setup(sb, ctx):
        path = os.path.join(sb, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if os.path.lexists(path):
            os.remove(path)
        with open(path, "wb") as f:
            f.truncate(size)
    return setup


def json_field(path_in_doc, want):
    """A check: stdout is JSON whose field at `path_in_doc` (a list of keys and indices) equals `want`."""
    def check(sb, out):
        try:
            v = json.loads(out)
            for k in path_in_doc:
                v = v[k]
        except Exception as e:   # not JSON, or the field is missing
            return ["standard output: %s" % e]
        return [] if v == want else ["standard output: %s is %r, expected %r" % (path_in_doc, v, want)]
    return check


def mode_follows_umask(rel):
    def check(sb, out):
        path = os.path.join(sb, rel)
        if not os.path.isdir(path):
            return ["%s was not made" % rel]
        mask = os.umask(0)
        os.umask(mask)
        mode = stat.S_IMODE(os.stat(path).st_mode)
        return [] if mode == 0o777 & ~mask else ["%s has mode %o, the umask gives %o" % (rel, mode, 0o777 & ~mask)]
    return check


MECHANISMS = ["softmax", "linear", "mhla", "decay", "gated", "cosformer"]


def issue30_scripted_cases():
    """--screenshot and --save-session onto their inputs (by identity), --screenshot's extension."""
    shot_data = lambda out: ["in.h5", "--screenshot", out]
    sess = {"mechanism": {"mixing": "", "blocks": 4}}
    rows = [
        ("onto_data", shot_data("in.h5"), data_in("in.h5"), ["--screenshot", ".png"]),
        ("onto_session", ["--session", "s.attnscope", "--screenshot", "s.attnscope"],
         steps(data_in("good.h5"), session_in("s.attnscope", sess)), [".png"]),
        ("onto_session_as_file", ["s.attnscope", "--screenshot", "s.attnscope"],
         steps(data_in("good.h5"), session_in("s.attnscope", sess)), [".png"]),
        ("hard_link_png", shot_data("h.png"), steps(data_in("in.h5"), link_into("in.h5", "h.png", True)), ["is the input", "FILE"]),
        ("symlink_png", shot_data("l.png"), steps(data_in("in.h5"), link_into("in.h5", "l.png", False)), ["is the input"]),
        ("second_file_link", ["in.h5", "b.h5", "--screenshot", "b.png"],
         steps(data_in("in.h5", "b.h5"), link_into("b.h5", "b.png", True)), ["is the input"]),
        ("dir_symlink", shot_data("d/in.png"),
         steps(data_in("in.h5"), lambda sb, ctx: os.symlink(sb, os.path.join(sb, "d")), link_into("in.h5", "in.png", True)),
         ["is the input"]),
        ("session_link", ["--session", "s.attnscope", "--screenshot", "s.png"],
         steps(data_in("good.h5"), session_in("s.attnscope", sess), link_into("s.attnscope", "s.png", True)), ["--session"]),
        ("session_symlink", ["--session", "s.attnscope", "--screenshot", "s.png"],
         steps(data_in("good.h5"), session_in("s.attnscope", sess), link_into("s.attnscope", "s.png", False)), ["--session"]),
        ("session_files", ["--session", "s.attnscope", "--screenshot", "g.png"],
         steps(data_in("good.h5"), session_in("s.attnscope", sess), link_into("good.h5", "g.png", True)), ["files[0]"]),
        ("session_tensor_file", ["--session", "s.attnscope", "--screenshot", "t.png"],
         steps(data_in("good.h5", "t.h5"),
               session_in("s.attnscope", sess, files=("good.h5", "t.h5"),
                          tensors={"q": {"file": "t.h5", "name": "/q"}, "k": {"file": "t.h5", "name": "/k"}}),
               link_into("t.h5", "t.png", True)), ["is the input"]),
        ("session_subfolder_files", ["--session", "a/s.attnscope", "--screenshot", "g.png"],
         steps(data_in("good.h5"), session_in("a/s.attnscope", sess, files=("../good.h5",),
                                              tensors={"q": {"file": "../good.h5", "name": "/q"},
                                                       "k": {"file": "../good.h5", "name": "/k"}}),
               link_into("good.h5", "g.png", True)), ["files[0]"]),
        ("session_mixing_file", ["--session", "s.attnscope", "--screenshot", "m.png"],
         steps(data_in("good.h5"), session_in("s.attnscope", {"mechanism": {"mixing_file": "m.npy"}}),
               lambda sb, ctx: np.save(os.path.join(sb, "m.npy"), np.eye(4)), link_into("m.npy", "m.png", True)),
         ["mechanism.mixing_file"]),
        ("session_gates_file", ["--session", "s.attnscope", "--screenshot", "gt.png"],
         steps(data_in("good.h5", "gates.h5"), session_in("s.attnscope", {"mechanism": {"gates": "gates.h5:/q"}}),
               link_into("gates.h5", "gt.png", True)), ["mechanism.gates"]),
        ("session_file_states", ["--session", "s.attnscope", "--screenshot", "o.png"],
         steps(data_in("good.h5", "o.h5"), session_in("s.attnscope", {"file_states": [{"file": "o.h5"}]}, files=("good.h5", "o.h5")),
               link_into("o.h5", "o.png", True)), ["is the input", "o.h5"]),
        ("session_file_states_only", ["--session", "s.attnscope", "--screenshot", "o.png"],
         steps(data_in("good.h5", "o.h5"), session_in("s.attnscope", {"file_states": [{"file": "o.h5"}]}),
               link_into("o.h5", "o.png", True)), ["file_states[0].file"]),
        ("figure_session_files", ["figure", "--session", "s.attnscope", "--view", "maps", "--out", "g.png"],
         steps(data_in("good.h5"), session_in("s.attnscope", sess), link_into("good.h5", "g.png", True)), ["--out", "files[0]"]),
        ("figure_session_mixing", ["figure", "--session", "s.attnscope", "--view", "maps", "--out", "m.png"],
         steps(data_in("good.h5"), session_in("s.attnscope", {"mechanism": {"mixing_file": "m.npy"}}),
               lambda sb, ctx: np.save(os.path.join(sb, "m.npy"), np.eye(4)), link_into("m.npy", "m.png", True)),
         ["mechanism.mixing_file"]),
        ("save_onto_data_link", ["in.h5", "--save-session", "l.attnscope"],
         steps(data_in("in.h5"), link_into("in.h5", "l.attnscope", False)), ["--save-session", "is the input"]),
        ("save_onto_data_hard", ["in.h5", "--save-session", "h.attnscope"],
         steps(data_in("in.h5"), link_into("in.h5", "h.attnscope", True)), ["--save-session", "is the input"]),
        ("save_onto_second_file", ["in.h5", "b.h5", "--save-session", "b.attnscope"],
         steps(data_in("in.h5", "b.h5"), link_into("b.h5", "b.attnscope", True)), ["is the input"]),
    ]
    cases = [Case("i30_shot_" + name, args, [], expect=2, setup=setup, needles=needles,
                  note="a scripted run's output must never be one of its inputs (issue 30)")
             for name, args, setup, needles in rows]
    for ext in ("o.h5", "o.jpg", "o.txt", "o.svg", "o.pdf", "o", "o.png.h5", "o.attnscope", "o.npy", "o.pngx"):
        cases.append(Case("i30_shot_ext_" + ext.replace(".", "_"), shot_data(ext), [ext], expect=2, setup=data_in("in.h5"),
                          needles=["--screenshot", ".png"], note="--screenshot writes PNG: only a .png name"))
    cases.append(Case("i30_shot_ext_upper", shot_data("o.PNG"), ["o.PNG"], expect=0, setup=data_in("in.h5")))
    cases.append(Case("i30_shot_ok", shot_data("o.png"), ["o.png"], expect=0, setup=data_in("in.h5")))
    cases.append(Case("i30_save_ok", ["in.h5", "--save-session", "o.attnscope"], ["o.attnscope"], expect=0, setup=data_in("in.h5")))
    return cases


def issue30_session_cases():
    """Whole numbers of a session (views, recipe and mechanism seeds, counts) and file_states against the data."""
    recipe = {"kind": "gaussian", "n": 16, "d": 4, "heads": 1}
    rows = [
        ("first_head_2p31", {"views": {"heads": {"first_head": 2 ** 31}}}, "views.heads.first_head"),
        ("first_head_negative", {"views": {"heads": {"first_head": -8}}}, "views.heads.first_head"),
        ("first_head_text", {"views": {"heads": {"first_head": "8"}}}, "views.heads.first_head"),
        ("first_head_fraction", {"views": {"heads": {"first_head": 8.5}}}, "views.heads.first_head"),
        ("first_head_bool", {"views": {"heads": {"first_head": True}}}, "views.heads.first_head"),
        ("first_head_2p64", {"views": {"heads": {"first_head": 2 ** 64 - 1}}}, "views.heads.first_head"),
        ("view_query_text", {"views": {"maps": {"query": "3"}}}, "views.maps.query"),
        ("view_query_minus2", {"views": {"query": {"query": -2}}}, "views.query.query"),
        ("recipe_seed_2p63", {"generate": {"g.h5": dict(recipe, seed=2 ** 63)}}, "seed"),
        ("recipe_seed_2p64", {"generate": {"g.h5": dict(recipe, seed=2 ** 64 - 1)}}, "seed"),
        ("recipe_seed_negative", {"generate": {"g.h5": dict(recipe, seed=-1)}}, "seed"),
        ("recipe_seed_text", {"generate": {"g.h5": dict(recipe, seed="1")}}, "seed"),
        ("mech_seed_2p63", {"mechanism": {"seed": 2 ** 63}}, "mechanism.seed"),
        ("mech_seed_2p31", {"mechanism": {"seed": 2 ** 31}}, "mechanism.seed"),
        ("mech_seed_negative", {"mechanism": {"seed": -1}}, "mechanism.seed"),
        ("mech_favor_zero", {"mechanism": {"favor_features": 0}}, "mechanism.favor_features"),
        ("mech_blocks_2p40", {"mechanism": {"blocks": 2 ** 40}}, "mechanism.blocks"),
        ("mech_chunk_zero", {"mechanism": {"chunk": 0}}, "mechanism.chunk"),
        ("mech_causal_text", {"mechanism": {"causal": "yes"}}, "mechanism.causal"),
        ("state_seed_2p63", {"file_states": [{"file": "o.h5", "mechanism": {"seed": 2 ** 63}}]}, "file_states[0].mechanism.seed"),
        ("state_head_99", {"file_states": [{"file": "o.h5", "tensors": ["/q", "/k", ""],
                                            "selection": {"at": {"h": 99}}}]}, "file_states[0].selection.at.h"),
        ("state_head_2", {"file_states": [{"file": "o.h5", "tensors": ["/q", "/k", ""],
                                           "selection": {"layout": "hnd", "at": {"h": 2}}}]}, "file_states[0].selection.at.h"),
        ("state_prefix_48", {"file_states": [{"file": "o.h5", "tensors": ["/q", "/k", ""],
                                              "selection": {"prefix_tokens": 48}}]}, "file_states[0].selection.prefix_tokens"),
        ("state_layout_rank", {"file_states": [{"file": "o.h5", "tensors": ["/q", "/k", ""],
                                                "selection": {"layout": "bhnd"}}]}, "file_states[0].selection.layout"),
        ("state_tensor_missing", {"file_states": [{"file": "o.h5", "tensors": ["/nope", "/k", ""]}]}, "file_states[0].tensors[0]"),
    ]
    cases = []
    for name, extra, key in rows:
        for mode in ("shot", "figure"):
            args = (["--session", "s.attnscope", "--screenshot", "o.png"] if mode == "shot" else
                    ["figure", "--session", "s.attnscope", "--view", "maps", "--out", "o.png"])
            cases.append(Case("i30_session_%s_%s" % (mode, name), args, ["o.png"], expect=2,
                              setup=steps(data_in("good.h5", "o.h5"), session_in("s.attnscope", extra, files=("good.h5", "o.h5"))),
                              needles=[key], note="a session's numbers are strict and checked against the data (issue 30)"))
    # 8.0 is 8 (Qt's JSON keeps every number as a double and writes 8.0 back as 8).
    cases.append(Case("i30_session_shot_first_head_8_0", ["--session", "s.attnscope", "--screenshot", "o.png"], ["o.png"], expect=0,
                      setup=steps(data_in("good.h5"), session_in("s.attnscope", {"views": {"heads": {"first_head": 8.0}}}))))
    cases.append(Case("i30_session_shot_states_ok", ["--session", "s.attnscope", "--screenshot", "o.png"], ["o.png"], expect=0,
                      setup=steps(data_in("good.h5", "o.h5"),
                                  session_in("s.attnscope", {"file_states": [{"file": "o.h5", "tensors": ["/q", "/k", ""],
                                                                              "selection": {"at": {"h": 1}, "prefix_tokens": 5}}],
                                                             "views": {"heads": {"first_head": 1}}},
                                             files=("good.h5", "o.h5")))))
    # --view-state: the same numbers, every key of the type the view saves.
    fig = ["figure"] + qk("good.h5") + ["--out", "f.png", "--view"]
    states = [
        ("first_head_2p31", "heads", {"first_head": 2 ** 31}, "first_head"),
        ("first_head_negative", "heads", {"first_head": -8}, "first_head"),
        ("first_head_text", "heads", {"first_head": "8"}, "first_head"),
        ("first_head_fraction", "heads", {"first_head": 8.5}, "first_head"),
        ("query_text", "maps", {"query": "3"}, "query"),
        ("query_fraction", "maps", {"query": 2.5}, "query"),
        ("log_text", "maps", {"log": "yes"}, "'log'"),
        ("colormap_number", "maps", {"colormap": 3}, "'colormap'"),
        ("x_range_number", "maps", {"x_range": 5}, "x_range"),
        ("x_range_text", "maps", {"x_range": [0, "a"]}, "x_range"),
        ("x_range_one", "maps", {"x_range": [0]}, "x_range"),
        ("hidden_runs_text", "maps", {"hidden_runs": "x"}, "hidden_runs"),
        ("spectrum_log_number", "spectrum", {"log_x": 1}, "'log_x'"),
        ("cumulative_text", "spectrum", {"cumulative": "true"}, "'cumulative'"),
    ]
    for name, view, state, key in states:
        cases.append(Case("i30_view_state_" + name, fig + [view, "--view-state", json.dumps(state)], ["f.png"], expect=2,
                          needles=["--view-state", key], note="--view-state values of the wrong type must be refused (issue 30)"))
    cases.append(Case("i30_view_state_heads_ok", fig + ["heads", "--view-state", '{"first_head": 1}'], ["f.png"], expect=0))
    return cases


def issue30_aggregate_cases():
    """aggregate against hostile results.jsonl: sizes, names, metric counts, the bootstrap's work, last lines."""
    ok = lambda n=3: [record_line(u, "softmax", {"rank": u + 1}) for u in range(n)]
    many_mechanisms = lambda count: (lambda: [record_line(u, "m%d" % u, {"rank": 1}) for u in range(count)])
    many_metrics = lambda count: (lambda: [record_line(u, "softmax", {"metric%d" % u: 1.5}) for u in range(count)])
    metrics = {"m%d" % m: (m * 7) % 13 + 0.25 for m in range(1000)}
    heavy = lambda: [record_line(u, mech, metrics) for u in range(500) for mech in MECHANISMS]
    agg = ["aggregate", "r"]
    rows = [
        ("huge_8g", agg, sparse_in("r/results.jsonl", 8 << 30), 2, ["results.jsonl", "--max-memory"]),
        ("huge_partial_8g", agg, sparse_in("r/results.partial.jsonl", 8 << 30), 2, ["results.partial.jsonl", "--max-memory"]),
        ("huge_2g_budget_1g", agg + ["--max-memory", "1G"], sparse_in("r/results.jsonl", 2 << 30), 2, ["results.jsonl: 2.0 GiB", "--max-memory"]),
        ("over_budget_small", agg + ["--max-memory", "1K"], results_in(ok()), 2, ["results.jsonl", "is more than", "--max-memory"]),
        ("max_memory_hex", agg + ["--max-memory", "0x10G"], results_in(ok()), 2, ["--max-memory 0x10G: expected a size"]),
        ("max_memory_nan", agg + ["--max-memory", "nan"], results_in(ok()), 2, ["--max-memory nan: expected a size"]),
        ("mechanisms_60000", agg, results_in(many_mechanisms(60000)), 2, ["is not a mechanism"]),
        ("mechanisms_3000", agg, results_in(many_mechanisms(3000)), 2, ["is not a mechanism"]),
        ("mechanism_upper", agg, results_in([record_line(0, "SOFTMAX", {"rank": 1})]), 2, ["is not a mechanism"]),
        ("mechanism_empty", agg, results_in([record_line(0, "", {"rank": 1})]), 2, ["is not a mechanism"]),
        ("mechanism_space", agg, results_in([record_line(0, "softmax ", {"rank": 1})]), 2, ["is not a mechanism"]),
        ("mechanism_number", agg, results_in(['{"key":"a","unit":0,"mechanism":3}']), 2, ["mechanism"]),
        ("metrics_30000", agg, results_in(many_metrics(30000)), 2, ["metric names", "--metric"]),
        ("metrics_2000", agg, results_in(many_metrics(2000)), 2, ["metric names", "--metric"]),
        ("metrics_30000_narrowed", agg + ["--metric", "metric7", "--json"], results_in(many_metrics(30000)), 0, []),
        ("draws_2e10", agg, results_in(heavy), 2, ["bootstrap", "--metric"]),
        ("draws_2e10_by_head", agg + ["--by", "head"], results_in(heavy), 2, ["bootstrap", "--metric"]),
        ("draws_narrowed", agg + ["--metric", "m1", "--json"], results_in(heavy), 0, []),
        ("torn_last_line", agg, results_in(ok() + [record_line(3, "softmax", {"rank": 4})[:25]], tail=""), 2,
         ["line 4", "cut short"]),
        ("torn_only_line", agg, results_in([record_line(0, "softmax", {"rank": 4})[:25]], tail=""), 2, ["line 1", "cut short"]),
        ("unit_negative", agg, results_in([record_line(-1, "softmax", {"rank": 1})]), 2, ["unit"]),
        ("unit_2p64", agg, results_in(['{"key":"a","unit":18446744073709551616,"mechanism":"softmax"}']), 2, ["unit"]),
        ("unit_text", agg, results_in([record_line("3", "softmax", {"rank": 1})]), 2, ["unit"]),
        ("unit_fraction", agg, results_in([record_line(1.5, "softmax", {"rank": 1})]), 2, ["unit"]),
        ("unit_twice", agg, results_in([record_line(0, "softmax", {"rank": 1})] * 2), 2, ["twice"]),
        ("nul_byte", agg, results_in(['{"key":"a\u0000","unit":0,"mechanism":"softmax"}\x00']), 2, []),
        ("deep_line", agg, results_in(["[" * 100000 + "]" * 100000]), 2, ["nested"]),
        ("metric_unknown", agg + ["--metric", "nope"], results_in(ok()), 2, ["--metric", "nope"]),
        ("by_bogus", agg + ["--by", "bogus"], results_in(ok()), 2, ["--by"]),
        ("cluster_is_by", agg + ["--by", "head", "--cluster", "head"], results_in(ok()), 2, ["--cluster"]),
        ("results_fifo", agg, lambda sb, ctx: (os.makedirs(os.path.join(sb, "r")), os.mkfifo(os.path.join(sb, "r", "results.jsonl"))),
         2, ["results.jsonl"]),
        ("results_link", agg, lambda sb, ctx: (os.makedirs(os.path.join(sb, "r")),
                                               os.symlink(os.path.join(ctx["decoy"], "passwd"), os.path.join(sb, "r", "results.jsonl"))),
         2, ["results.jsonl"]),
    ]
    cases = [Case("i30_agg_" + name, args, [], expect=expect, setup=setup, needles=needles,
                  note="aggregate must check sizes and counts before the work (issue 30)")
             for name, args, setup, expect, needles in rows]
    cases.append(Case("i30_agg_whole_last_line", agg + ["--json"], [], expect=0, setup=results_in(ok(), tail=""),
                      check=json_field(["groups", 0, "mechanisms", 0, "n"], 3),
                      note="a last line without its newline that is a whole record counts"))
    cases.append(Case("i30_agg_unit_2p64_minus_1", agg + ["--json"], [], expect=0,
                      setup=results_in([record_line(2 ** 64 - 1, "softmax", {"rank": 1}), record_line(0, "softmax", {"rank": 3})]),
                      check=json_field(["groups", 0, "units"], 2)))
    cases.append(Case("i30_agg_six_mechanisms", agg + ["--json"], [], expect=0,
                      setup=results_in([record_line(u, m, {"rank": u + i}) for u in range(4) for i, m in enumerate(MECHANISMS)]),
                      check=json_field(["groups", 0, "pairs", 14, "n"], 4)))
    return cases


def issue30_merge_cases():
    def shards(*mutations):
        def setup(sb, ctx):
            shutil.copytree(os.path.join(ctx["fx"], "shards"), os.path.join(sb, "shards"), symlinks=True)
            for m in mutations:
                m(sb, ctx)
        return setup

    def lines_of(index, edit):
        def mutate(sb, ctx):
            path = os.path.join(sb, "shards", str(index), "results.jsonl")
            raw = open(path, "rb").read()
            open(path, "wb").write(edit(raw))
        return mutate

    def extra_metrics(count):
        def edit(raw):
            out = []
            for line in raw.decode().splitlines():
                doc = json.loads(line)
                doc.update({"x%d" % i: 1.0 for i in range(count)})
                out.append(json.dumps(doc))
            return ("\n".join(out) + "\n").encode()
        return edit

    merge = ["merge", "shards/0", "shards/1", "--out", "merged"]
    rows = [
        ("huge_results", merge, shards(sparse_in("shards/0/results.jsonl", 8 << 30)), 2, ["results.jsonl", "--max-memory"]),
        ("huge_second_results", merge, shards(sparse_in("shards/1/results.jsonl", 8 << 30)), 2, ["shards/1/results.jsonl"]),
        ("huge_shard_json", merge, shards(sparse_in("shards/0/shard.json", 100 << 20)), 2, ["shard.json", "a shard.json holds"]),
        ("budget_1k", merge + ["--max-memory", "1K"], shards(), 2, ["results.jsonl", "is more than", "--max-memory"]),
        ("budget_hex", merge + ["--max-memory", "0x1G"], shards(), 2, ["--max-memory 0x1G: expected a size"]),
        ("metrics_2000", merge, shards(lines_of(0, extra_metrics(2000)), lines_of(1, extra_metrics(2000))), 2, ["metric names"]),
        ("torn_last_line", merge, shards(lines_of(0, lambda raw: raw[:-20])), 2, ["incomplete"]),
    ]
    cases = [Case("i30_merge_" + name, args, ["merged/"], expect=expect, setup=setup, needles=needles,
                  forbidden=["{sb}/merged"], note="merge must check sizes and counts before the work (issue 30)")
             for name, args, setup, expect, needles in rows]
    cases += [
        Case("i30_merge_torn_partial", merge + ["--partial"], ["merged/"], expect=0, setup=shards(lines_of(0, lambda raw: raw[:-20]))),
        Case("i30_merge_whole_last_line", merge, ["merged/"], expect=0, setup=shards(lines_of(0, lambda raw: raw.rstrip(b"\n"))),
             check=lambda sb, out: [] if os.path.exists(os.path.join(sb, "merged", "results.jsonl")) else
             ["a whole last line without its newline made the merge partial"]),
        Case("i30_merge_mode", merge, ["merged/"], expect=0, setup=shards(), check=mode_follows_umask("merged"),
             note="merge's output follows the umask (it was 0700)"),
        Case("i30_merge_mode_nested", ["merge", "shards/0", "shards/1", "--out", "a/b/merged"], ["a/"], expect=0, setup=shards(),
             check=mode_follows_umask("a/b/merged")),
    ]
    return cases


def issue30_thread_cases():
    analyze = ["analyze"] + qk("good.h5") + ["--json", "o.json"]
    cases = []
    for n in ("3", "32", "64", "1024"):
        cases.append(Case("i30_threads_analyze_" + n, analyze + ["--threads", n], ["o.json"], expect=0,
                          needles=["note: --threads " + n], note="--threads above the cores must be capped, never hang"))
    cases += [
        Case("i30_threads_1025", analyze + ["--threads", "1025"], ["o.json"], expect=2, needles=["--threads"]),
        Case("i30_threads_negative", analyze + ["--threads", "-1"], ["o.json"], expect=2, needles=["--threads"]),
        Case("i30_threads_matrix_64", ["matrix"] + qk("good.h5") + ["--mechanism", "softmax", "--out", "m.npy", "--threads", "64"],
             ["m.npy"], expect=0),
        Case("i30_threads_sweep_64", ["sweep"] + qk("good.h5") + ["--vary", "n=16,32", "--csv", "a.csv", "--threads", "64"],
             ["a.csv"], expect=0),
        Case("i30_threads_figure_64", ["figure", "--view", "maps", "--out", "f.png", "--threads", "64"] + qk("good.h5"), ["f.png"],
             expect=0),
        Case("i30_threads_env_64", analyze + ["--threads", "64"], ["o.json"], expect=0, env={"OPENBLAS_NUM_THREADS": "64"}),
        Case("i30_threads_gaussian_32", ["analyze"] + qk("gaussian.h5") + ["--json", "o.json", "--threads", "32"], ["o.json"], expect=0),
    ]
    return cases


def issue30_batch_cases():
    head = 'inputs = ["{fx}/good.h5"]\nmechanisms = ["linear"]\n'
    rows = [
        ("past_split_n", head + '[metrics]\npast_split = 48\n', 2, ["past split", "nothing was created"]),
        ("past_split_zero", head + '[metrics]\npast_split = 0\n', 2, ["past"]),
        ("past_split_over", head + '[metrics]\npast_split = 1000\n', 2, ["nothing was created"]),
        ("past_split_2p63", head + '[metrics]\npast_split = 9223372036854775807\n', 2, ["nothing was created"]),
        ("width_wrap", head + '[[figure]]\nview = "maps"\nwidth = 4294967312\n', 2, ["width", "16..20000"]),
        ("width_int64", head + '[[figure]]\nview = "maps"\nwidth = 9223372036854775807\n', 2, ["width", "16..20000"]),
        ("width_15", head + '[[figure]]\nview = "maps"\nwidth = 15\n', 2, ["width"]),
        ("width_20001", head + '[[figure]]\nview = "maps"\nwidth = 20001\n', 2, ["width"]),
        ("height_wrap", head + '[[figure]]\nview = "maps"\nheight = 4294967304\n', 2, ["height"]),
        ("height_negative", head + '[[figure]]\nview = "maps"\nheight = -5\n', 2, ["height", "16..20000"]),
        ("query_wrap", head + '[[figure]]\nview = "maps"\nquery = 4294967296\n', 2, ["query"]),
        ("query_negative", head + '[[figure]]\nview = "maps"\nquery = -1\n', 2, ["query"]),
        ("dpi_huge", head + '[[figure]]\nview = "maps"\ndpi = 1e300\n', 2, ["dpi"]),
        ("dpi_tiny", head + '[[figure]]\nview = "maps"\ndpi = 1e-300\n', 2, ["dpi"]),
        ("font_scale_huge", head + '[[figure]]\nview = "maps"\nfont_scale = 1e9\n', 2, ["font_scale"]),
        ("nul_input", 'inputs = ["{fx}/good.h5\\u0000.txt"]\n', 2, ["NUL"]),
        ("nul_q", head + 'q = "/q\\u0000"\n', 2, ["NUL"]),
        ("nul_layout", head + 'layout = "h\\u0000nd"\n', 2, ["NUL"]),
        ("nul_mixing", head + '[attention]\nmixing = "m.npy\\u0000x"\n', 2, ["NUL"]),
        ("nul_gates", head + '[attention]\ngates = "g.h5\\u0000:/g"\n', 2, ["NUL"]),
        ("nul_sweep_name", head + '[[sweep]]\nname = "s\\u0000x"\nvary = "n=16"\n', 2, ["NUL"]),
        ("nul_key", head + '"a\\u0000b" = 1\n', 2, ["NUL"]),
        ("nul_max_memory", head + 'max_memory = "1G\\u0000"\n', 2, ["NUL"]),
        ("grid_alone_mhla", 'inputs = ["{fx}/good.h5"]\nmechanisms = ["mhla"]\n[attention]\ngrid = [8, 6]\n', 2, ["--block-grid", "decay on a grid"]),
    ]
    cases = [Case("i30_batch_" + name, ["batch", "job.toml", "--out", "out"], ["out/"], expect=expect,
                  setup=write_into({"job.toml": body}), needles=needles, forbidden=["{sb}/out"],
                  note="a job is refused whole before its folder exists (issue 30)")
             for name, body, expect, needles in rows]
    cases.append(Case("i30_batch_past_split_ok", ["batch", "job.toml", "--out", "out"], ["out/"], expect=0,
                      setup=write_into({"job.toml": head + '[metrics]\npast_split = 47\n'})))
    cases.append(Case("i30_batch_decay_grid", ["batch", "job.toml", "--out", "out"], ["out/"], expect=0,
                      setup=write_into({"job.toml": 'inputs = ["{fx}/good.h5"]\nmechanisms = ["decay"]\n'
                                                    '[attention]\ngrid = [8, 6]\n'})))
    return cases


def issue30_grid_cases():
    def grid_file(grid, block_grid=None):
        def setup(sb, ctx):
            g = np.random.default_rng(3).normal(size=(48, 8))
            with h5py.File(os.path.join(sb, "g.h5"), "w") as f:
                f["q"], f["k"] = g, g[::-1]
                f.attrs["grid"] = np.array(grid, dtype=np.int64)
                if block_grid is not None:
                    f.attrs["block_grid"] = np.array(block_grid, dtype=np.int64)
        return setup

    g = ["analyze", "--q", "g.h5:/q", "--k", "g.h5:/k", "--json", "o.json"]
    decay = ["analyze"] + qk("good.h5") + ["--json", "o.json", "--mechanism", "decay"]
    return [
        Case("i30_grid_attr_2p62", g, ["o.json"], expect=2, setup=grid_file([2 ** 62, 2 ** 62]), needles=["grid", "overflows"]),
        Case("i30_grid_attr_3axes", g, ["o.json"], expect=2, setup=grid_file([2 ** 40, 2 ** 40, 2 ** 40]), needles=["overflows"]),
        Case("i30_grid_attr_2p62_blocks", g + ["--blocks", "4"], ["o.json"], expect=0, setup=grid_file([2 ** 62, 2 ** 62])),
        Case("i30_grid_attr_2p31", g, ["o.json"], expect=0, setup=grid_file([2 ** 31 - 1, 2 ** 31 - 1])),
        Case("i30_decay_grid_alone", decay + ["--grid", "8,6"], ["o.json"], expect=0),
        Case("i30_decay_grid_3d", decay + ["--grid", "4,3,4"], ["o.json"], expect=0),
        Case("i30_decay_grid_blocked", decay + ["--grid", "8,6", "--token-order", "blocked"], ["o.json"], expect=2,
             needles=["blocked token order"]),
        Case("i30_decay_grid_wrong_n", decay + ["--grid", "8,8"], ["o.json"], expect=2, needles=["N=48"]),
        Case("i30_mhla_grid_alone", ["analyze"] + qk("good.h5") + ["--json", "o.json", "--mechanism", "mhla", "--grid", "8,6"],
             ["o.json"], expect=2, needles=["--block-grid", "decay on a grid"]),
        Case("i30_grid_overflow_cli", decay + ["--grid", "4611686018427387904,4611686018427387904"], ["o.json"], expect=2,
             needles=["overflows"]),
    ]


def issue30_cases():
    return (issue30_scripted_cases() + issue30_session_cases() + issue30_aggregate_cases() + issue30_merge_cases() +
            issue30_thread_cases() + issue30_batch_cases() + issue30_grid_cases())


def all_cases(fx):
    fx_names = [n for n in os.listdir(fx) if isinstance(n, str)]
    cases = number_cases() + count_cases() + data_cases(fx_names) + output_cases() + session_cases() + merge_cases() + \
        batch_cases() + env_cases() + figure_cases() + issue30_cases()
    seen = set()
    for c in cases:
        assert c.id not in seen, c.id
        seen.add(c.id)
    return cases


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("attnscope")
    ap.add_argument("work")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default="")
    ap.add_argument("--timeout", type=float, default=30)
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    attnscope = os.path.abspath(a.attnscope)
    global USE_RLIMIT_AS
    with open(attnscope, "rb") as f:
        image = f.read()
        if b"__asan_init" in image or b"__tsan_init" in image:
            USE_RLIMIT_AS = False
            print("note: a sanitizer build: no address-space limit (unbounded allocations show as ASan reports)")
    work = os.path.abspath(a.work)
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(os.path.join(work, "cases"))
    os.makedirs(os.path.join(work, "decoys"))
    os.makedirs(os.path.join(work, "cache"))
    fx, decoy = os.path.join(work, "fx"), os.path.join(work, "decoy")
    shards_ok = make_fixtures(fx, decoy, attnscope)
    cases = [c for c in all_cases(fx) if a.only in c.id]
    if a.list:
        for c in cases:
            print(c.id)
        return 0
    for c in cases:   # setups that need the binary
        c.attnscope = attnscope
    fx_before = snapshot(fx)
    decoy_before = snapshot(decoy)
    results = []
    lock = threading.Lock()

    def one(case):
        ctx_setup = case.setup
        if ctx_setup:
            def setup(sb, ctx, inner=ctx_setup):
                ctx = dict(ctx, attnscope=attnscope)
                return inner(sb, ctx)
            case.setup = setup
        if case.id.startswith("merge_") and not shards_ok:
            return case, "FAIL", ["setup: the shard fixtures could not be made (batch --shard failed)"], ""
        try:
            r = run_case(case, attnscope, work, a.timeout)
        except Exception as e:   # a bug of the harness or of a fixture: reported, the other cases go on
            r = (case, "FAIL", ["harness: %s: %s" % (type(e).__name__, e)], "")
        with lock:
            print("%s %s  [%s]" % (r[1], r[0].id, r[3]), flush=True)
            for p in r[2]:
                print("       - " + p, flush=True)
        return r

    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
        results = list(pool.map(one, cases))
    problems_global = []
    if snapshot(fx) != fx_before:
        problems_global.append("the shared fixtures changed (a case wrote into an input folder)")
    if snapshot(decoy) != decoy_before:
        problems_global.append("the decoy folder changed")
    failed = [r for r in results if r[1] == "FAIL"]
    skipped = [r for r in results if r[1] == "SKIP"]
    print("\nhostile sweep: %d cases, %d passed, %d failed, %d skipped in %.0f s" %
          (len(results), len(results) - len(failed) - len(skipped), len(failed), len(skipped), time.monotonic() - start))
    for p in problems_global:
        print("FAIL (whole run): " + p)
    if failed:
        print("failed: " + " ".join(r[0].id for r in failed))
    return 1 if failed or problems_global else 0


if __name__ == "__main__":
    sys.exit(main())
