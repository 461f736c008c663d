#!/usr/bin/env python3
"""The Python module as the Debian package installs it (issue 30): unpacked from the .deb the `package` target
wrote, imported with nothing of the build tree on any path, it refuses what the built module refuses and keeps
no state between calls; and the package's man page and completion say what the packaged --help says.

check_python_package.py --deb-dir DIR --version V --python-dir DIR --source SOURCE --work WORK

The module (python3-attnscope) is unpacked with the command line it runs (attnscope-cli: the headless executable,
no Qt), as the package's Depends installs them.

Each case prints PASS or FAIL with its reason; the script exits 1 when any fails, 77 (skipped) when the
package holds no Python module.
"""
import argparse
import glob
import gzip
import os
import re
import shutil
import subprocess
import sys

SKIP = 77
RESULTS = []


def case(name, ok, why=""):
    RESULTS.append((name, ok))
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else ": " + why))


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--deb-dir", required=True)
    ap.add_argument("--version", required=True)
    ap.add_argument("--python-dir", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    python_deb = glob.glob(os.path.join(a.deb_dir, f"python3-attnscope_{a.version}_*.deb"))
    if not python_deb:
        print("SKIPPED: no python3-attnscope package (ATTNSCOPE_BUILD_PYTHON is off)")
        return SKIP
    debs = python_deb + glob.glob(os.path.join(a.deb_dir, f"attnscope-cli_{a.version}_*.deb"))
    if len(debs) != 2:
        print(f"FAIL expected python3-attnscope and attnscope-cli {a.version} in {a.deb_dir}, found {debs}")
        return 1
    root = os.path.join(a.work, "python_package")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    for deb in debs:
        subprocess.run(["dpkg-deb", "-x", deb, root], check=True)
    site = os.path.join(root, "usr", a.python_dir.strip("/"))
    package = os.path.join(site, "attnscope")
    if not os.path.isdir(package):
        print(f"SKIPPED: the package has no Python module under /{a.python_dir}")
        return SKIP
    exe = os.path.join(root, "usr", "lib", "attnscope", "attnscope-cli")
    if not os.path.exists(exe):
        exe = os.path.join(root, "usr", "lib", "attnscope", "attnscope")   # a build without the desktop app
    build = os.path.realpath(a.build_dir)
    # Nothing of the build tree or the source tree reaches the child: only the unpacked package and the system.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "LD_", "ATTNSCOPE_"))}
    env.update(PYTHONPATH=site, PYTHONDONTWRITEBYTECODE="1", ATTNSCOPE_BINARY=exe,
               ATTNSCOPE_SOURCE_DIR=a.source, HOME=os.path.join(root, "home"))
    os.makedirs(env["HOME"], exist_ok=True)
    tests = os.path.join(a.source, "tests", "python")

    # 1. It imports from the package, and its shared libraries are the system's.
    p = run([sys.executable, "-c", "import attnscope, sys; print(attnscope.__file__); print(attnscope._attnscope.__file__);"
             "print(attnscope.__version__); print('\\n'.join(sys.path))"], env=env, cwd=root)
    lines = p.stdout.splitlines()
    case("imports from the unpacked package", p.returncode == 0 and lines[0].startswith(package)
         and lines[1].startswith(package), p.stderr or str(lines[:2]))
    # The unpacked package itself lies in the build tree's test folder; nothing else of the build tree may appear.
    unpacked = os.path.realpath(root)

    def from_build_tree(entry):
        real = os.path.realpath(entry)
        return real.startswith(build + os.sep) and not real.startswith(unpacked + os.sep)

    case("no build-tree folder on sys.path", p.returncode == 0 and not any(
        s and from_build_tree(s) for s in lines[3:]), str(lines[3:]))
    so = glob.glob(os.path.join(package, "_attnscope*.so"))
    ldd = run(["ldd", so[0]]) if so else None
    case("extension links only installed libraries", bool(so) and ldd.returncode == 0 and "not found" not in ldd.stdout
         and build not in ldd.stdout and a.source not in ldd.stdout, ldd.stdout if ldd else "no extension module")
    version = run(["dpkg-deb", "-f", debs[0], "Version"]).stdout.strip().split("-")[0]
    case("__version__ is the package's", len(lines) > 2 and lines[2] == version, f"{lines[2:3]} vs {version}")
    with open(os.path.join(package, "__init__.py")) as f, \
            open(os.path.join(a.source, "python", "attnscope", "__init__.py")) as g:
        case("the packaged __init__.py is the source's", f.read() == g.read())
    # The PyTorch recorder ships as attnscope.torch (tools/python/attnscope_dump.py under that name).
    with open(os.path.join(package, "torch.py")) as f, \
            open(os.path.join(a.source, "tools", "python", "attnscope_dump.py")) as g:
        case("the packaged attnscope/torch.py is the recorder", f.read() == g.read())
    p = run([sys.executable, "-c", "import attnscope.torch as t; print(t.AttnScopeRecorder.__name__, t.__file__)"],
            env=env, cwd=root)
    case("from attnscope.torch import AttnScopeRecorder (from the package)",
         p.returncode == 0 and p.stdout.startswith("AttnScopeRecorder " + package), p.stderr or p.stdout)
    stray = [f for f in os.listdir(package) if f.endswith(".pyc") or f == "__pycache__"]
    case("no compiled bytecode in the package", not stray, str(stray))

    # 2. The packaged module refuses what the built one refuses and keeps no state between calls: the issue-30
    # tests and the hostile sweep, run against the package and its own executable.
    for module, groups in (("test_issue30", ["FileRelativeReferences", "NoStateBetweenCalls", "NanAttributes",
                                             "ProgressIsChecked"]),
                           ("hostile_module", ["HostileArrays", "HostileOptions", "HostilePaths", "HostileCallbacks"])):
        for group in groups:
            p = run([sys.executable, "-m", "unittest", f"{module}.{group}"], env=env, cwd=tests)
            summary = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
            case(f"packaged module: {module}.{group} ({summary})", p.returncode == 0, p.stderr[-3000:])
    p = run([sys.executable, "-c", "import attnscope, sys; sys.exit(0 if attnscope.__file__.startswith(sys.argv[1]) else 1)",
             package], env=env, cwd=tests)
    case("those runs imported the package (run from the tests' folder)", p.returncode == 0, p.stderr)

    # 3. The man page and the completion list every option the packaged --help lists.
    with gzip.open(os.path.join(root, "usr/share/man/man1/attnscope.1.gz"), "rt") as f:
        man = f.read().replace("\\-", "-")
    completion = open(os.path.join(root, "usr/share/bash-completion/completions/attnscope")).read()
    top = run([exe, "--help"]).stdout
    subs = re.findall(r"^  ([a-z]+)  ", top.split("Subcommands:", 1)[-1], re.M)
    case("--help lists subcommands", len(subs) >= 8, top)
    for sub in subs:
        text = run([exe, sub, "--help"]).stdout
        options = sorted({m for m in re.findall(r"^\s{2}(?:-\w,)?(--[a-z][\w-]*)", text, re.M)})
        missing_man = [o for o in options if o not in man]
        missing_completion = [o for o in options if o not in completion]
        case(f"man page and completion list every option of {sub} ({len(options)})",
             options and not missing_man and not missing_completion,
             f"man lacks {missing_man}, completion lacks {missing_completion}")

    failed = [n for n, ok in RESULTS if not ok]
    print(f"{len(RESULTS) - len(failed)} of {len(RESULTS)} package cases pass")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
