#!/usr/bin/env python3
"""Checks of the Debian package (tests/packaging/CMakeLists.txt says which test runs which step).

check_package.py [common options] build|contents|validate|install

Every check reads the .deb the real `package` target wrote; expected values come from the contract (docs/cli.md,
docs/packaging.md) and from the build's own executable, never from the package itself.
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
SUBCOMMANDS = ["info", "analyze", "matrix", "synth", "sweep", "figure", "batch", "merge", "aggregate", "depth", "report"]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run(cmd, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    return subprocess.run(cmd, **kw)


def check_run(cmd, **kw):
    r = run(cmd, **kw)
    if r.returncode != 0:
        fail(f"{' '.join(cmd)} exited {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def the_deb(args):
    debs = glob.glob(args.deb_glob)
    if len(debs) != 1:
        fail(f"expected exactly one package {args.deb_glob}, found {debs}")
    return debs[0]


def fresh(path):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def expected_files(args):
    """Every file the package must hold, and the folder the Python module goes to (checked separately)."""
    files = ["usr/bin/attnscope", "usr/share/man/man1/attnscope.1.gz",
             "usr/share/bash-completion/completions/attnscope",
             "usr/share/doc/attnscope/copyright", "usr/share/doc/attnscope/changelog.Debian.gz"]
    if args.gui:
        files += [f"usr/share/applications/{args.app_id}.desktop",
                  f"usr/share/metainfo/{args.app_id}.metainfo.xml",
                  "usr/share/mime/packages/attnscope.xml",
                  "usr/share/icons/hicolor/scalable/apps/attnscope.svg"]
        files += [f"usr/share/icons/hicolor/{s}x{s}/apps/attnscope.png" for s in (16, 24, 32, 48, 64, 128, 256)]
    return files, "usr/" + args.python_dir.strip("/") + "/attnscope/"


# ---------------------------------------------------------------------------------------------------- build

def step_build(args):
    for old in glob.glob(args.deb_glob):
        os.remove(old)
    check_run(["cmake", "--build", args.build_dir, "--target", "package"])
    deb = the_deb(args)
    print(f"built {deb} ({os.path.getsize(deb)} bytes)")


# ------------------------------------------------------------------------------------------------- contents

def check_fields(args, deb):
    fields = {f: check_run(["dpkg-deb", "-f", deb, f]).strip()
              for f in ("Package", "Version", "Architecture", "Depends", "Maintainer", "Section")}
    arch = check_run(["dpkg", "--print-architecture"]).strip()
    want = {"Package": "attnscope", "Version": args.version, "Architecture": arch}
    for key, value in want.items():
        if fields[key] != value:
            fail(f"{key} is {fields[key]!r}, expected {value!r}")
    if not os.path.basename(deb) == f"attnscope_{args.version}_{arch}.deb":
        fail(f"package file name {os.path.basename(deb)}")
    depends = {re.split(r"[ (]", d.strip())[0] for d in re.split(r"[,|]", fields["Depends"])}
    # dpkg-shlibdeps ran: the C library, HDF5 and (with the app) Qt are there by their package names.
    needed = {"libc6", "libhdf5-103-1", "libopenblas0"} | ({"libqt6widgets6"} if args.gui else set())
    needed |= {"python3", "python3-numpy"} if args.python else set()
    missing = needed - depends
    if missing:
        fail(f"Depends lacks {sorted(missing)}: {fields['Depends']}")
    print("fields:", fields)


def check_listing(args, deb):
    listing = check_run(["dpkg-deb", "-c", deb]).splitlines()
    files, python_dir = expected_files(args)
    present = set()
    for line in listing:
        cols = line.split(None, 5)
        mode, owner, path = cols[0], cols[1], cols[5].split(" -> ")[0]
        if owner != "root/root":
            fail(f"{path} is owned by {owner}")
        if not path.startswith("./usr/"):
            if path not in ("./",):
                fail(f"{path} lies outside /usr")
            continue
        rel = path[2:]
        if mode.startswith("-"):
            present.add(rel)
            if rel not in files and not rel.startswith(python_dir):
                fail(f"unexpected file in the package: /{rel} (a new install() rule? add it to docs/packaging.md and here)")
            want_mode = "-rwxr-xr-x" if rel == "usr/bin/attnscope" else None
            if want_mode and mode != want_mode:
                fail(f"/{rel} has mode {mode}")
        elif mode.startswith("d") and mode != "drwxr-xr-x":
            fail(f"folder /{rel} has mode {mode}")
    missing = [f for f in files if f not in present]
    if missing:
        fail(f"the package lacks {missing}")
    module = sorted(p for p in present if p.startswith(python_dir))
    if args.python and not any(p.endswith(".so") for p in module):
        fail(f"the Python module is built but the package has no extension module under /{python_dir}: {module}")
    print(f"{len(present)} files, every expected one present; module files: {module}")


def check_binary(args, root):
    exe = os.path.join(root, "usr/bin/attnscope")
    dyn = check_run(["readelf", "-d", exe])
    if "RPATH" in dyn or "RUNPATH" in dyn:
        fail("the packaged attnscope carries an RPATH/RUNPATH (it must find its libraries where Debian puts them)")
    if "no symbols" not in run(["nm", exe]).stderr:
        fail("the packaged attnscope is not stripped")
    version = check_run([exe, "--version"]).strip()
    if version != "attnscope " + args.version.rsplit("-", 1)[0]:
        fail(f"--version printed {version!r}")
    # The stripped, packaged binary computes what the build's binary computes: the analysis of setup.sh's main job.
    cmd = ["analyze", "--q", f"{args.data}/vit_digits.h5:/layers/2/q", "--k", f"{args.data}/vit_digits.h5:/layers/2/k",
           "--head", "1", "--json", "-"]
    packaged = json.loads(check_run([exe] + cmd))
    built = json.loads(check_run([args.build_binary] + cmd))
    if packaged["results"] != built["results"]:
        fail("the packaged attnscope's analysis differs from the build's")
    print(f"{version}; analysis of vit_digits.h5 equal to the build's ({len(built['results'])} mechanisms)")


def check_manpage(args, root):
    page = os.path.join(root, "usr/share/man/man1/attnscope.1.gz")
    env = dict(os.environ, LC_ALL="C.UTF-8", MANWIDTH="80")
    r = run(["man", "--warnings", "-E", "UTF-8", "-l", "-Tutf8", "-Z", page], env=env)
    if r.returncode != 0 or r.stderr.strip():
        fail(f"man reports problems in the page:\n{r.stderr}")
    text = check_run(["man", "-l", page], env=env)
    text = re.sub(r".\x08", "", text)
    for sub in subcommands(os.path.join(root, "usr/bin/attnscope")):
        if f"attnscope {sub}" not in text:
            fail(f"the man page has no section for attnscope {sub}")
    if "EXAMPLES" not in text or "attnscope report model.h5" not in text:
        fail("the man page has no EXAMPLES section (packaging/attnscope.h2m)")
    for opt in ("--mechanism", "--block-grid", "--vary", "--shard", "--view"):
        if opt not in text:
            fail(f"the man page never mentions {opt}")
    print(f"man page: {len(text.splitlines())} lines, every subcommand")


def complete(script, words):
    """COMPREPLY of the completion for the command line `words` (the last word is the one being completed)."""
    bash = ("source \"$1\"; shift; COMP_WORDS=(\"$@\"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); "
            "_attnscope; printf '%s\\n' \"${COMPREPLY[@]}\"")
    out = check_run(["bash", "--norc", "-c", bash, "complete", script] + words, cwd=tempfile.gettempdir())
    return [w for w in out.split("\n") if w]


def subcommands(exe):
    """docs/cli.md's subcommands, and any the packaged binary's --help lists besides."""
    text = check_run([exe, "--help"])
    listed = re.findall(r"^  ([a-z]+)  ", text.split("Subcommands:", 1)[-1], re.M)
    return SUBCOMMANDS + [s for s in listed if s not in SUBCOMMANDS]


def help_options(exe, sub):
    text = check_run([exe, sub, "--help"])
    return sorted({m for m in re.findall(r"^\s{2}(?:-\w,)?(--[a-z][\w-]*)", text, re.M)})


def check_completion(args, root):
    script = os.path.join(root, "usr/share/bash-completion/completions/attnscope")
    if "analyze" not in complete(script, ["attnscope", "an"]):
        fail("attnscope an<TAB> does not offer analyze")
    got = complete(script, ["attnscope", "analyze", "--feature-map", ""])
    if sorted(got) != sorted(["relu", "elu1", "identity", "favor"]):        # docs/cli.md's feature maps
        fail(f"attnscope analyze --feature-map <TAB> offers {got}")
    got = complete(script, ["attnscope", "sweep", "--subsample", ""])
    if sorted(got) != sorted(["first", "random", "crop"]):
        fail(f"attnscope sweep --subsample <TAB> offers {got}")
    if complete(script, ["attnscope", "analyze", "--threads", ""]):
        fail("a number option offers completions")
    exe = os.path.join(root, "usr/bin/attnscope")
    for sub in subcommands(exe):
        offered = sorted(w for w in complete(script, ["attnscope", sub, "--"]) if w.startswith("--"))
        if offered != help_options(exe, sub):
            fail(f"attnscope {sub} --<TAB> offers {offered}, its --help lists {help_options(exe, sub)}")
    print("completion: subcommands, every option of every subcommand, listed values")


def check_python(args, root):
    if not args.python:
        print("SKIPPED Python module checks: the module is not built (ATTNSCOPE_BUILD_PYTHON is off)")
        return
    site = os.path.join(root, "usr", args.python_dir.strip("/"))
    code = r"""
import json, subprocess, sys
import numpy as np
import attnscope
root, exe = sys.argv[1], sys.argv[2]
assert attnscope.__file__.startswith(root), f"attnscope imported from {attnscope.__file__}, not the package"
rng = np.random.default_rng(5)
q, k = rng.standard_normal((40, 8)), rng.standard_normal((40, 8))
s = q @ k.T / np.sqrt(8)
ref = np.exp(s - s.max(axis=1, keepdims=True))
ref /= ref.sum(axis=1, keepdims=True)
a = attnscope.matrix(q, k, mechanism="softmax")
err = np.abs(np.asarray(a) - ref).max()
assert err <= 1e-12, f"matrix differs from the NumPy softmax by {err}"
np.save(root + "/q.npy", q); np.save(root + "/k.npy", k)
cli = json.loads(subprocess.run([exe, "analyze", "--q", root + "/q.npy", "--k", root + "/k.npy", "--json", "-"],
                                check=True, capture_output=True, text=True).stdout)
doc = attnscope.analyze(q, k)
for mine, theirs in zip(doc["results"], cli["results"]):
    assert mine["mechanism"] == theirs["mechanism"]
    sv = np.asarray(mine["singular_values"])
    assert np.allclose(sv, theirs["singular_values"], rtol=1e-12, atol=0), mine["mechanism"]
    assert mine["rank"] == theirs["rank"], mine["mechanism"]
    assert np.isclose(mine["entropy"]["mean"], theirs["entropy"]["mean"], rtol=1e-12, atol=0), mine["mechanism"]
assert len(doc["results"]) == len(cli["results"]) == 3
print(f"module {attnscope.__file__}: matrix within {err:.1e} of NumPy, analyze equal to the CLI")
"""
    env = dict(os.environ, PYTHONPATH=site, PYTHONDONTWRITEBYTECODE="1")
    print(check_run([sys.executable, "-c", code, root, os.path.join(root, "usr/bin/attnscope")], env=env).strip())


def step_contents(args):
    deb = the_deb(args)
    check_fields(args, deb)
    check_listing(args, deb)
    root = fresh(os.path.join(args.work, "contents"))
    check_run(["dpkg-deb", "-x", deb, root])
    check_binary(args, root)
    check_manpage(args, root)
    check_completion(args, root)
    check_python(args, root)


# ------------------------------------------------------------------------------------------------- validate

def step_validate(args):
    deb = the_deb(args)
    root = fresh(os.path.join(args.work, "validate"))
    check_run(["dpkg-deb", "-x", deb, root])
    if args.gui:
        desktop = f"{root}/usr/share/applications/{args.app_id}.desktop"
        check_run(["desktop-file-validate", desktop])
        meta = f"{root}/usr/share/metainfo/{args.app_id}.metainfo.xml"
        print(check_run(["appstreamcli", "validate", "--no-net", meta]).strip())
        # The MIME database built from our XML alone maps *.attnscope to the session type.
        mime = f"{root}/usr/share/mime"
        check_run(["update-mime-database", mime])
        globs = open(f"{mime}/globs2").read()
        if "application/x-attnscope-session:*.attnscope" not in globs:
            fail(f"update-mime-database gave no glob for sessions:\n{globs}")
        text = open(desktop).read()
        if "application/x-attnscope-session" not in text or "application/x-hdf5" not in text:
            fail("the desktop entry does not open sessions and HDF5 files")
        print("desktop entry, metainfo and MIME type valid")
    r = run(["lintian", "--tag-display-limit", "0", "--display-info", deb])
    print(r.stdout + r.stderr)
    errors = [line for line in r.stdout.splitlines() if line.startswith("E:")]
    if errors or r.returncode not in (0, 1):
        fail(f"lintian reports {len(errors)} errors (exit {r.returncode})")
    print(f"lintian: no errors, {sum(1 for l in r.stdout.splitlines() if l.startswith('W:'))} warnings")


# -------------------------------------------------------------------------------------------------- install

INSTALL_SCRIPT = r"""
set -eu
work=$1 deb=$2 module=$3
# The upper layer lives in a tmpfs of this namespace: it works where the build folder is itself on an overlay
# (containers), and it vanishes with the namespace.
mount -t tmpfs tmpfs "$work/layers" || exit 77
mkdir "$work/layers/upper" "$work/layers/ovl"
mount -t overlay overlay -o "lowerdir=/,upperdir=$work/layers/upper,workdir=$work/layers/ovl" "$work/root" || exit 77
for m in proc sys dev; do mount --rbind "/$m" "$work/root/$m"; done
mount -t tmpfs tmpfs "$work/root/tmp"
cp "$deb" "$work/root/tmp/"
chroot "$work/root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
    /bin/sh -eu -c '
      cd /tmp   # apt makes the .deb path absolute from the working folder, which must exist inside the root
      if command -v attnscope >/dev/null; then echo "attnscope already on PATH before the install"; exit 3; fi
      apt-get install -y /tmp/'"$(basename "$deb")"' >/tmp/apt.log 2>&1 \
        || { cat /tmp/apt.log; exit 4; }
      echo "path=$(command -v attnscope)"
      echo "version=$(attnscope --version)"
      echo "status=$(dpkg-query -W -f="\${Status}" attnscope)"
      if [ '"$module"' = 1 ]; then
        echo "module=$(PYTHONDONTWRITEBYTECODE=1 python3 -c "import attnscope; print(attnscope.__file__)")"
      fi
      for f in /usr/share/applications/*.desktop; do echo "desktop=$f"; done
      grep -h "x-attnscope-session" /usr/share/applications/mimeinfo.cache 2>/dev/null | sed "s/^/mimecache=/" || true
      grep -h "attnscope" /usr/share/mime/globs2 2>/dev/null | sed "s/^/mimeglob=/" || true
      apt-get purge -y attnscope >/tmp/apt.log 2>&1 || { cat /tmp/apt.log; exit 5; }
      if command -v attnscope >/dev/null; then echo "attnscope still on PATH after purge"; exit 6; fi
      echo "purged=$(ls /usr/share/doc/attnscope 2>/dev/null | wc -l)"
    '
"""


def step_install(args):
    if os.geteuid() != 0:
        print("SKIPPED: the throw-away apt install needs root (an overlay of / in a private mount namespace)")
        sys.exit(SKIP)
    for tool in ("unshare", "apt-get", "chroot"):
        if not shutil.which(tool):
            print(f"SKIPPED: {tool} is not installed")
            sys.exit(SKIP)
    probe = run(["unshare", "--mount", "--propagation", "private", "true"])
    if probe.returncode != 0:
        print(f"SKIPPED: no private mount namespace here: {probe.stderr.strip()}")
        sys.exit(SKIP)
    deb = os.path.abspath(the_deb(args))
    work = fresh(os.path.join(args.work, "install"))
    for sub in ("layers", "root"):
        os.makedirs(os.path.join(work, sub))
    try:
        r = run(["unshare", "--mount", "--propagation", "private", "sh", "-c", INSTALL_SCRIPT, "install", work, deb,
                 "1" if args.python else "0"])
        print(r.stdout + r.stderr)
        if r.returncode == SKIP:
            print("SKIPPED: cannot mount an overlay of / here (no overlayfs, or no CAP_SYS_ADMIN in this container)")
            sys.exit(SKIP)
        if r.returncode != 0:
            fail(f"the throw-away install failed (exit {r.returncode})")
        out = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line and not line.startswith(" "))
        if out.get("path") != "/usr/bin/attnscope" or out.get("status") != "install ok installed":
            fail(f"after apt-get install: {out}")
        if out.get("version") != "attnscope " + args.version.rsplit("-", 1)[0]:
            fail(f"the installed attnscope --version printed {out.get('version')!r}")
        if args.python and out.get("module") != f"/usr/{args.python_dir.strip('/')}/attnscope/__init__.py":
            fail(f"python3 does not import the installed module: {out.get('module')!r}")
        if args.gui:
            desktops = [l.split("=", 1)[1] for l in r.stdout.splitlines() if l.startswith("desktop=")]
            if f"/usr/share/applications/{args.app_id}.desktop" not in desktops:
                fail(f"no desktop entry in the menu folder: {desktops}")
            if f"{args.app_id}.desktop" not in out.get("mimecache", ""):
                fail("update-desktop-database did not register the entry for sessions (mimeinfo.cache)")
            if "*.attnscope" not in out.get("mimeglob", ""):
                fail("update-mime-database did not register *.attnscope")
        if out.get("purged") != "0":
            fail("files left in /usr/share/doc/attnscope after purge")
        print("apt-get install in a throw-away root: attnscope on PATH, desktop entry and MIME type registered"
              + (", import attnscope works" if args.python else "") + "; purge clean")
    finally:
        # The namespace is gone with its process, so the mounts are too: only plain folders remain.
        shutil.rmtree(work, ignore_errors=True)
    if os.path.exists("/usr/bin/attnscope"):
        print("note: /usr/bin/attnscope exists on the real system (installed outside this test)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("step", choices=["build", "contents", "validate", "install"])
    ap.add_argument("--deb-glob", required=True)
    ap.add_argument("--version", required=True, help="Debian version, VERSION-REVISION")
    ap.add_argument("--app-id", required=True)
    ap.add_argument("--gui", type=lambda s: s in ("1", "ON", "TRUE", "true"), required=True)
    ap.add_argument("--python", type=lambda s: s in ("1", "ON", "TRUE", "true"), required=True)
    ap.add_argument("--python-dir", required=True)
    ap.add_argument("--build-binary", required=True)
    ap.add_argument("--build-dir")
    ap.add_argument("--data", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    {"build": step_build, "contents": step_contents, "validate": step_validate, "install": step_install}[args.step](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
