#!/usr/bin/python3
"""Every shell and Python block of README.md and docs/*.md, run as a reader pastes it (issue 36).

    tools/docs_test.py [--build DIR] [--only FILE[:LINE]] [--list] [--regenerate] [--keep]

Each fenced block has a language. `sh`/`bash` and `python` blocks run; a `console` block runs its `$ ` lines
and compares what they print with the lines under them; `text`, `toml`, `json` ... never run. A block without
a language is an error (tag it `sh` to have it run, `text` when it only shows something). A comment on the
line before the fence says more:

    <!-- docs-test: skip REASON -->      never run (the reason is required and listed by --list)
    <!-- docs-test: output -->           this block is what the run block above it prints, whole
    <!-- docs-test: output first -->     ... its first lines
    <!-- docs-test: given NAME -->       Python: run tools/docs_test_fixtures.py's NAME() in the session first
                                         (a model, inputs or files the text says are the reader's own)
    <!-- docs-test: timeout SECONDS -->  the block's time limit (default 300 s)

Markers combine: `<!-- docs-test: given vit; timeout 600 -->` (a skip comes last: its reason is the rest).

The blocks run in a fresh copy of the repository's files (git ls-files, as they are in the work tree) in a
scratch folder, with the repository's build linked as build/, from the copy's root, as the user running
this (root in CI) with no sudo (a `sudo` on PATH that fails), build/app on PATH as the README says, HOME in the
scratch folder. The blocks of one file run in order in one session: an `export` or `cd` of a shell block
holds for the next shell blocks, Python blocks share one interpreter (started with the environment of that
moment). A failing command, exception or time-out fails the block; a shown output that differs from what
the block prints now on standard output (progress and notes go to standard error) fails it too.
`--regenerate` rewrites the shown outputs from this run (never edit them by hand). Exit status: 0 when every
block passed, 1 otherwise, 2 for a usage error or an untagged block. The notebook (docs/notebook.ipynb) runs as
docs/python.md documents it in CTest's Python.NotebookAsDocumented.
"""

import argparse
import difflib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUN_KINDS = {"sh": "sh", "bash": "sh", "python": "python", "console": "console"}
SHOW_KINDS = {"text", "toml", "json", "ini", "csv", "markdown", "cmake", "yaml", "diff", "c", "cpp"}
MARKER = re.compile(r"^\s*<!--\s*docs-test:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
DEFAULT_TIMEOUT = 300


@dataclass
class Block:
    file: str
    line: int            # 1-based line of the opening fence
    kind: str            # sh, python, console, or a shown language
    body: list
    indent: str
    end: int             # 0-based index of the closing fence
    skip: str = ""
    output: str = ""     # "", "whole" or "first"
    given: str = ""
    timeout: int = DEFAULT_TIMEOUT

    @property
    def where(self):
        return f"{self.file}:{self.line}"


def die(message):
    print(message, file=sys.stderr)
    sys.exit(2)


def parse_marker(text, where):
    opts = {}
    text, _, reason = text.partition("skip")   # the reason (last) may hold anything
    if _:
        if not reason.strip():
            die(f"error: {where}: `docs-test: skip` needs its reason")
        opts["skip"] = reason.strip()
    for part in [p.strip() for p in text.split(";") if p.strip()]:
        word, _, rest = part.partition(" ")
        rest = rest.strip()
        if word == "output":
            if rest not in ("", "first"):
                die(f"error: {where}: `docs-test: output` takes nothing or `first`, not {rest!r}")
            opts["output"] = rest or "whole"
        elif word == "given":
            opts["given"] = rest
        elif word == "timeout":
            opts["timeout"] = int(rest)
        else:
            die(f"error: {where}: unknown docs-test marker {word!r}")
    return opts


def parse_file(rel):
    lines = (ROOT / rel).read_text(encoding="utf-8").split("\n")
    blocks, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, tag = m.group(1), m.group(2)
        j = i + 1
        while j < len(lines) and not re.match(r"^\s*```\s*$", lines[j]):
            j += 1
        if j == len(lines):
            die(f"error: {rel}:{i + 1}: a code block that never closes")
        body = [ln[len(indent):] if ln.startswith(indent) else ln for ln in lines[i + 1:j]]
        b = Block(rel, i + 1, tag, body, indent, j)
        k = i - 1
        while k >= 0 and MARKER.match(lines[k]):
            for key, value in parse_marker(MARKER.match(lines[k]).group(1), f"{rel}:{k + 1}").items():
                setattr(b, key, value)
            k -= 1
        if not tag:
            die(f"error: {b.where}: a code block without a language: tag it sh or python (it runs), "
                             "console ($ lines run, the rest is their output) or text (it only shows something)")
        if tag not in RUN_KINDS and tag not in SHOW_KINDS:
            die(f"error: {b.where}: unknown block language {tag!r}")
        if b.output and tag != "text":
            die(f"error: {b.where}: an output block is `text`")
        blocks.append(b)
        i = j + 1
    return blocks


def doc_files():
    return ["README.md"] + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))


# ---- the scratch copy ------------------------------------------------------------------------------------

def tracked_files():
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], check=True, capture_output=True).stdout
        return [p for p in out.decode().split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        return [str(p.relative_to(ROOT)) for p in ROOT.rglob("*")
                if p.is_file() and not str(p.relative_to(ROOT)).startswith(("build", ".git/"))]


def make_copy(scratch, build):
    repo = scratch / "repo"
    for rel in tracked_files():
        src = ROOT / rel
        if not src.exists() and not src.is_symlink():
            continue            # deleted in the work tree, not yet committed
        dst = repo / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), dst)
        else:
            shutil.copy2(src, dst)
    os.symlink(build, repo / "build")
    bin_dir = scratch / "bin"
    bin_dir.mkdir()
    sudo = bin_dir / "sudo"
    sudo.write_text("#!/bin/sh\necho 'docs-test: a block used sudo (the docs must work as root without it)' >&2\nexit 127\n")
    sudo.chmod(0o755)
    (scratch / "home").mkdir()
    return repo, bin_dir


# ---- running ---------------------------------------------------------------------------------------------

KERNEL = r'''
import os, sys, traceback
namespace = {"__name__": "__main__"}
status = os.fdopen(os.dup(1), "w")
fixtures = {}
for line in sys.stdin:
    code_path, out_path, err_path, given = line.rstrip("\n").split("\t")
    out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    err = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    saved = os.dup(1), os.dup(2)
    sys.stdout.flush(); sys.stderr.flush()
    os.dup2(out, 1); os.dup2(err, 2)
    ok = True
    try:
        if given:
            import importlib.util
            spec = importlib.util.spec_from_file_location("docs_test_fixtures", os.environ["DOCS_TEST_FIXTURES"])
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            for name in given.split(","):
                namespace.update(getattr(module, name.strip())())
        code = open(code_path).read()
        exec(compile(code, code_path, "exec"), namespace)
    except BaseException:
        traceback.print_exc()
        ok = False
    sys.stdout.flush(); sys.stderr.flush()
    os.dup2(saved[0], 1); os.dup2(saved[1], 2)
    for fd in (out, err, *saved):
        os.close(fd)
    status.write("ok\n" if ok else "failed\n"); status.flush()
'''


class Session:
    """The blocks of one file: shell state carried between shell blocks, one Python interpreter."""

    def __init__(self, repo, bin_dir, scratch, tag):
        self.repo, self.scratch, self.tag = repo, scratch, tag
        self.state = scratch / f"{tag}.state"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DOCS_TEST", "PYTHON"))}
        env.update(PATH=f"{repo}/build/app:{bin_dir}:{env.get('PATH', '/usr/bin:/bin')}", HOME=str(scratch / "home"),
                   QT_QPA_PLATFORM=env.get("QT_QPA_PLATFORM", "offscreen"),
                   DOCS_TEST_FIXTURES=str(Path(__file__).resolve().parent / "docs_test_fixtures.py"))
        self.state.write_text("".join(f"export {k}={shell_quote(v)}\n" for k, v in sorted(env.items())) +
                              f"cd {shell_quote(str(repo))}\n")
        self.python = None
        self.count = 0

    def files(self):
        self.count += 1
        stem = self.scratch / f"{self.tag}.{self.count}"
        return Path(f"{stem}.code"), Path(f"{stem}.out"), Path(f"{stem}.err")

    def run_shell(self, script, timeout):
        code, out, err = self.files()
        code.write_text(f"source {shell_quote(str(self.state))}\nset -eo pipefail\n{script}\n"
                        f"export -p > {shell_quote(str(self.state))}.new\n"
                        f"echo \"cd $(printf %q \"$PWD\")\" >> {shell_quote(str(self.state))}.new\n")
        rc = run_limited(["/bin/bash", str(code)], out, err, timeout, cwd=self.repo)
        new = Path(str(self.state) + ".new")
        if rc == 0 and new.exists():
            new.replace(self.state)
        return rc, read_text(out), read_text(err)

    def run_python(self, source, given, timeout):
        if self.python is None:
            env = self.shell_env()
            self.python = subprocess.Popen(["/usr/bin/python3", "-u", "-c", KERNEL], stdin=subprocess.PIPE,
                                           stdout=subprocess.PIPE, text=True, env=env, cwd=env.get("PWD", self.repo),
                                           start_new_session=True)
        code, out, err = self.files()
        code.write_text(source)
        self.python.stdin.write(f"{code}\t{out}\t{err}\t{given}\n")
        self.python.stdin.flush()
        answer = read_line(self.python.stdout, timeout)
        if answer is None:
            self.close()
            return 124, read_text(out), read_text(err) + f"\n(timed out after {timeout} s)\n"
        return (0 if answer.strip() == "ok" else 1), read_text(out), read_text(err)

    def shell_env(self):
        text = subprocess.run(["/bin/bash", "-c", f"source {shell_quote(str(self.state))}; env -0; echo -n PWD=; pwd"],
                              capture_output=True, check=True).stdout.decode()
        env = {}
        for item in text.split("\0"):
            key, _, value = item.partition("=")
            if key:
                env[key] = value.rstrip("\n") if key == "PWD" else value
        return env

    def close(self):
        if self.python is not None:
            try:
                os.killpg(self.python.pid, signal.SIGKILL)
            except OSError:
                pass
            self.python.wait()
            self.python = None


def read_text(path):
    return Path(path).read_text(errors="replace") if Path(path).exists() else ""


def read_line(stream, timeout):
    import selectors
    sel = selectors.DefaultSelector()
    sel.register(stream, selectors.EVENT_READ)
    if not sel.select(timeout):
        return None
    line = stream.readline()
    return line or "failed\n"


def run_limited(argv, out_path, err_path, timeout, cwd):
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        p = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=cwd, start_new_session=True)
        try:
            return p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            err.write(f"\n(timed out after {timeout} s)\n".encode())
            return 124


def shell_quote(s):
    return "'" + s.replace("'", "'\\''") + "'"


def console_commands(block):
    """The `$ ` commands of a console block, each with the lines shown under it (continued lines joined)."""
    items, cmd, shown = [], None, []
    for ln in block.body:
        if ln.startswith("$ "):
            if cmd is not None:
                items.append((cmd, shown))
            cmd, shown = ln[2:], []
        elif cmd is not None and cmd.endswith("\\") and not shown:
            cmd += "\n" + ln
        elif cmd is not None:
            shown.append(ln)
    if cmd is not None:
        items.append((cmd, shown))
    return items


def normalise(text):
    lines = [ln.rstrip() for ln in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def compare(shown, printed, mode):
    got = normalise(printed)
    want = normalise("\n".join(shown))
    if mode == "first":
        got = got[:len(want)]
    if got == want:
        return ""
    return "\n".join(difflib.unified_diff(want, got, "shown in the docs", "printed now", lineterm="", n=1))


# ---- main ------------------------------------------------------------------------------------------------

def main():
    global ROOT
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=str(ROOT / "build"), help="the build to use (default ./build)")
    ap.add_argument("--only", action="append", default=[], help="FILE or FILE:LINE (repeatable)")
    ap.add_argument("--list", action="store_true", help="list the blocks and what happens to each, run nothing")
    ap.add_argument("--regenerate", action="store_true", help="rewrite the shown outputs from this run")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder")
    ap.add_argument("--root", help="the repository whose README.md and docs/*.md run (default: this one; tests)")
    args = ap.parse_args()
    if args.root:
        ROOT = Path(args.root).resolve()

    files = doc_files()
    blocks = {f: parse_file(f) for f in files}
    if args.list:
        for f in files:
            for b in blocks[f]:
                what = ("skip: " + b.skip if b.skip else "output of the block above" if b.output
                        else "runs" + (f" (given {b.given})" if b.given else "") if b.kind in RUN_KINDS else "shown")
                print(f"{b.where:32} {b.kind:8} {what}")
        return 0
    build = Path(args.build).resolve()
    if not (build / "app" / "attnscope").exists():
        print(f"error: --build {build}: no app/attnscope in it (build first: tools/build.sh)", file=sys.stderr)
        return 2

    def chosen(b):
        if not args.only:
            return True
        return any(o == b.file or o == f"{b.file}:{b.line}" for o in args.only)

    scratch = Path(tempfile.mkdtemp(prefix="attnscope-docs-"))
    repo, bin_dir = make_copy(scratch, build)
    failures, ran, skipped, compared, rewrites = [], 0, 0, 0, {}
    start = time.monotonic()
    try:
        for f in files:
            todo = [b for b in blocks[f] if chosen(b) or (b.output and chosen_previous(blocks[f], b, chosen))]
            if not todo:
                continue
            session = Session(repo, bin_dir, scratch, re.sub(r"\W", "_", f))
            last = None          # (block, what it printed) of the last run block
            for b in blocks[f]:
                if b.kind not in RUN_KINDS and not b.output:
                    continue
                if b.output:
                    if last is None or not (chosen(last[0]) or chosen(b)):
                        continue
                    if last[1] is None:
                        continue      # the block above failed or was skipped
                    diff = compare(b.body, last[1], b.output)
                    compared += 1
                    if diff:
                        if args.regenerate:
                            rewrites.setdefault(f, []).append((b, last[1]))
                        else:
                            failures.append(f"{b.where}: the output shown differs from what {last[0].where} prints now "
                                            f"(tools/docs_test.py --regenerate rewrites it)\n{diff}")
                    continue
                if not chosen(b):
                    continue
                if b.skip:
                    skipped += 1
                    last = (b, None)
                    continue
                ran += 1
                t0 = time.monotonic()
                if b.kind == "sh":
                    rc, printed, errors = session.run_shell("\n".join(b.body), b.timeout)
                elif b.kind == "python":
                    rc, printed, errors = session.run_python("\n".join(b.body) + "\n", b.given, b.timeout)
                else:
                    rc, printed, errors = run_console(session, b, args.regenerate, rewrites, failures)
                    compared += 1
                took = time.monotonic() - t0
                print(f"{b.where:32} {b.kind:8} {'ok' if rc == 0 else 'FAILED'}  {took:6.1f} s", flush=True)
                if rc != 0:
                    tail = "\n".join(normalise(printed)[-20:] + ["--- standard error:"] + normalise(errors)[-30:])
                    failures.append(f"{b.where}: the {b.kind} block failed (status {rc})\n{tail}")
                    last = (b, None)
                else:
                    last = (b, printed)
            session.close()
    finally:
        if args.keep:
            print(f"scratch folder kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    for f, items in rewrites.items():
        rewrite(f, items)
        print(f"rewrote {len(items)} shown output(s) in {f}")
    print(f"docs test: {ran} blocks run, {skipped} skipped (marked, with reasons), {compared} outputs compared, "
          f"{len(failures)} failed, {time.monotonic() - start:.0f} s")
    for msg in failures:
        print("\nFAILED " + msg, file=sys.stderr)
    return 1 if failures else 0


def chosen_previous(blocks, b, chosen):
    prev = [x for x in blocks if x.line < b.line and x.kind in RUN_KINDS]
    return bool(prev) and chosen(prev[-1])


def run_console(session, b, regenerate, rewrites, failures):
    printed_all, rc = [], 0
    for cmd, shown in console_commands(b):
        rc, printed, errors = session.run_shell(cmd, b.timeout)
        printed_all.append((cmd, printed))
        if rc != 0:
            return rc, printed, errors
        diff = compare(shown, printed, "whole")
        if diff and not regenerate:
            failures.append(f"{b.where}: `$ {cmd.splitlines()[0]}` prints other lines than shown "
                            f"(tools/docs_test.py --regenerate rewrites them)\n{diff}")
    if regenerate:
        rewrites.setdefault(b.file, []).append((b, printed_all))
    return 0, "", ""


def rewrite(rel, items):
    path = ROOT / rel
    lines = path.read_text(encoding="utf-8").split("\n")
    for b, printed in sorted(items, key=lambda it: -it[0].line):
        if b.kind == "console":
            body = []
            for cmd, out in printed:
                body.append("$ " + cmd)
                body.extend(normalise(out))
        else:
            body = normalise(printed)
            if b.output == "first":
                body = body[:len(normalise("\n".join(b.body)))]
        lines[b.line:b.end] = [(b.indent + ln) if ln else ln for ln in body]
    path.write_text("\n".join(lines), encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
