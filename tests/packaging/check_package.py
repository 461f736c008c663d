#!/usr/bin/env python3
"""Checks of the Debian packages (tests/packaging/CMakeLists.txt says which test runs which step).

check_package.py [common options] build|contents|validate|install

Every check reads the .debs the real `package` target wrote (attnscope-cli, attnscope, python3-attnscope,
attnscope-data, attnscope-doc: docs/packaging.md); expected values come from the contract (docs/cli.md,
docs/packaging.md) and from the build's own executables, never from the packages themselves.
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


def package_names(args):
    """The packages the build makes: component -> package name."""
    names = {"cli": "attnscope-cli", "data": "attnscope-data", "doc": "attnscope-doc"}
    if args.gui:
        names["app"] = "attnscope"
    if args.python:
        names["python"] = "python3-attnscope"
    return names


def deb_arch(args, component):
    if component in ("data", "doc"):
        return "all"
    return check_run(["dpkg", "--print-architecture"]).strip()


def deb_path(args, component):
    name = package_names(args)[component]
    return os.path.join(args.deb_dir, f"{name}_{args.version}_{deb_arch(args, component)}.deb")


def the_debs(args):
    """component -> path of its .deb; every package present, no other of ours beside them."""
    debs = {c: deb_path(args, c) for c in package_names(args)}
    missing = [p for p in debs.values() if not os.path.isfile(p)]
    if missing:
        fail(f"the package target did not write {missing}")
    ours = set(glob.glob(os.path.join(args.deb_dir, "*attnscope*.deb")))
    extra = ours - set(debs.values())
    if extra:
        fail(f"packages beside the expected ones (a stale or an unplanned component?): {sorted(extra)}")
    return debs


def extract_all(args, debs, root):
    fresh(root)
    for deb in debs.values():
        check_run(["dpkg-deb", "-x", deb, root])
    return root


def fresh(path):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def cli_exe_name(args):
    return "attnscope-cli" if args.gui else "attnscope"


def expected_files(args, component):
    """(files the package must hold, prefixes under which it may hold more: the module, the pages, the samples)."""
    name = package_names(args)[component]
    files = [f"usr/share/doc/{name}/copyright", f"usr/share/doc/{name}/changelog.Debian.gz"]
    prefixes = []
    if component == "cli":
        files += [f"usr/lib/attnscope/{cli_exe_name(args)}", "usr/share/man/man1/attnscope.1.gz",
                  "usr/share/bash-completion/completions/attnscope"]
    elif component == "app":
        files += ["usr/lib/attnscope/attnscope",
                  f"usr/share/applications/{args.app_id}.desktop",
                  f"usr/share/metainfo/{args.app_id}.metainfo.xml",
                  "usr/share/mime/packages/attnscope.xml",
                  "usr/share/icons/hicolor/scalable/apps/attnscope.svg"]
        files += [f"usr/share/icons/hicolor/{s}x{s}/apps/attnscope.png" for s in (16, 24, 32, 48, 64, 128, 256)]
    elif component == "python":
        prefixes.append("usr/" + args.python_dir.strip("/") + "/attnscope/")
    elif component == "data":
        files += ["usr/share/doc/attnscope-data/README.md", "usr/share/attnscope/example_study.toml"]
        files += ["usr/share/attnscope/" + f for f in sorted(os.listdir(args.data)) if f.endswith(".h5")]
    elif component == "doc":
        files += ["usr/share/doc/attnscope-doc/html/index.html", "usr/share/doc-base/attnscope-doc"]
        prefixes.append("usr/share/doc/attnscope-doc/html/")
    return files, prefixes


# ---------------------------------------------------------------------------------------------------- build

def step_build(args):
    for old in glob.glob(os.path.join(args.deb_dir, "*attnscope*.deb")):
        os.remove(old)
    check_run(["cmake", "--build", args.build_dir, "--target", "package"])
    for deb in the_debs(args).values():
        print(f"built {deb} ({os.path.getsize(deb)} bytes)")


# ------------------------------------------------------------------------------------------------- contents

def check_fields(args, component, deb):
    fields = {f: check_run(["dpkg-deb", "-f", deb, f]).strip()
              for f in ("Package", "Version", "Architecture", "Depends", "Maintainer", "Section", "Description")}
    name = package_names(args)[component]
    want = {"Package": name, "Version": args.version, "Architecture": deb_arch(args, component)}
    for key, value in want.items():
        if fields[key] != value:
            fail(f"{name}: {key} is {fields[key]!r}, expected {value!r}")
    depends = {re.split(r"[ (]", d.strip())[0] for d in re.split(r"[,|]", fields["Depends"]) if d.strip()}
    # dpkg-shlibdeps ran: the C library, HDF5 and (with the app only) Qt are there by their package names.
    needed = {"cli": {"libc6", "libhdf5-103-1", "libopenblas0"},
              "app": {"libqt6widgets6", "attnscope-cli"},
              "python": {"python3", "python3-numpy", "attnscope-cli", "libhdf5-103-1"},
              "data": set(), "doc": set()}[component]
    missing = needed - depends
    if missing:
        fail(f"{name}: Depends lacks {sorted(missing)}: {fields['Depends']}")
    qt = sorted(d for d in depends if "qt" in d.lower())
    if component != "app" and qt:
        fail(f"{name} depends on Qt ({qt}): only the desktop app's package may")
    if component in ("app", "python") and f"attnscope-cli (= {args.version})" not in fields["Depends"]:
        fail(f"{name} must depend on exactly this version of attnscope-cli: {fields['Depends']}")
    if component in ("data", "doc") and fields["Depends"]:
        fail(f"{name} (architecture all) depends on {fields['Depends']}")
    print(f"{name}: {fields['Description'].splitlines()[0]}; Depends: {fields['Depends'] or '(none)'}")


def check_listing(args, component, deb):
    listing = check_run(["dpkg-deb", "-c", deb]).splitlines()
    files, prefixes = expected_files(args, component)
    name = package_names(args)[component]
    present = set()
    for line in listing:
        cols = line.split(None, 5)
        mode, owner, path = cols[0], cols[1], cols[5].split(" -> ")[0]
        if owner != "root/root":
            fail(f"{name}: {path} is owned by {owner}")
        if not path.startswith("./usr/"):
            if path not in ("./",):
                fail(f"{name}: {path} lies outside /usr")
            continue
        rel = path[2:]
        if mode.startswith("-"):
            present.add(rel)
            if rel not in files and not any(rel.startswith(p) for p in prefixes):
                fail(f"{name}: unexpected file /{rel} (a new install() rule? add it to docs/packaging.md and here)")
            executable = rel.startswith("usr/lib/attnscope/")
            if executable and mode != "-rwxr-xr-x" or not executable and not rel.endswith(".so") and mode != "-rw-r--r--":
                fail(f"{name}: /{rel} has mode {mode}")
        elif mode.startswith("d") and mode != "drwxr-xr-x":
            fail(f"{name}: folder /{rel} has mode {mode}")
        elif mode.startswith("l"):
            fail(f"{name}: /{rel} is a link (the packages ship none: /usr/bin/attnscope is an alternative)")
    missing = [f for f in files if f not in present]
    if missing:
        fail(f"{name} lacks {missing}")
    if component == "python" and not any(p.endswith(".so") for p in present):
        fail(f"{name} has no extension module: {sorted(present)}")
    print(f"{name}: {len(present)} files, every expected one present")
    return present


def needed_libraries(path):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", check_run(["readelf", "-d", path]))


def check_binary(args, root, rel, qt_allowed):
    exe = os.path.join(root, rel)
    dyn = check_run(["readelf", "-d", exe])
    if "RPATH" in dyn or "RUNPATH" in dyn:
        fail(f"/{rel} carries an RPATH/RUNPATH (it must find its libraries where Debian puts them)")
    if "no symbols" not in run(["nm", exe]).stderr:
        fail(f"/{rel} is not stripped")
    qt = [lib for lib in needed_libraries(exe) if "Qt" in lib or "qcustomplot" in lib.lower()]
    if qt and not qt_allowed:
        fail(f"/{rel} links Qt: {qt}")
    if not qt and qt_allowed:
        fail(f"/{rel} (the desktop app) links no Qt")
    version = check_run([exe, "--version"]).strip()
    if version != "attnscope " + args.version.rsplit("-", 1)[0]:
        fail(f"/{rel} --version printed {version!r}")
    # The stripped, packaged binary computes what the build's binary computes: the analysis of setup.sh's main job.
    cmd = ["analyze", "--q", f"{args.data}/vit_digits.h5:/layers/2/q", "--k", f"{args.data}/vit_digits.h5:/layers/2/k",
           "--head", "1", "--json", "-"]
    packaged = json.loads(check_run([exe] + cmd))
    built = json.loads(check_run([args.build_binary] + cmd))
    if packaged["results"] != built["results"]:
        fail(f"/{rel}'s analysis differs from the build's")
    print(f"/{rel}: {version}; {'links Qt' if qt else 'no Qt'}; analysis of vit_digits.h5 equal to the build's")


def check_headless_refusals(args, root):
    """The headless command line names the package for what only the desktop app draws, and writes nothing."""
    exe = os.path.join(root, "usr/lib/attnscope", cli_exe_name(args))
    out = fresh(os.path.join(args.work, "refusals"))
    sample = f"{args.data}/vit_digits.h5"
    cases = [["figure", "--view", "maps", "--q", f"{sample}:/layers/2/q", "--k", f"{sample}:/layers/2/k",
              "--out", f"{out}/maps.png"],
             [sample],
             ["sweep", "--synth", "local1d", "--d", "8", "--vary", "n=32,64", "--plot", f"{out}/curves.png"]]
    for cmd in cases:
        r = run([exe] + cmd)
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        if r.returncode != 2 or len(lines) != 1 or not lines[0].startswith("error:") or "package attnscope" not in lines[0]:
            fail(f"attnscope-cli {' '.join(cmd[:2])}: exit {r.returncode}, stderr {r.stderr!r}")
    if os.listdir(out):
        fail(f"the refused commands wrote {os.listdir(out)}")
    print("attnscope-cli: figure, the desktop app and sweep --plot refused with one error line naming the package")


def check_manpage(args, root):
    page = os.path.join(root, "usr/share/man/man1/attnscope.1.gz")
    env = dict(os.environ, LC_ALL="C.UTF-8", MANWIDTH="80")
    r = run(["man", "--warnings", "-E", "UTF-8", "-l", "-Tutf8", "-Z", page], env=env)
    if r.returncode != 0 or r.stderr.strip():
        fail(f"man reports problems in the page:\n{r.stderr}")
    text = check_run(["man", "-l", page], env=env)
    text = re.sub(r".\x08", "", text)
    for sub in subcommands(os.path.join(root, "usr/lib/attnscope", cli_exe_name(args))):
        if f"attnscope {sub}" not in text:
            fail(f"the man page has no section for attnscope {sub}")
    if "EXAMPLES" not in text or "attnscope report model.h5" not in text:
        fail("the man page has no EXAMPLES section (packaging/attnscope.h2m)")
    if "/usr/share/attnscope" not in text or "attnscope-doc/html" not in text:
        fail("the man page does not name the samples and the HTML docs (FILES, SEE ALSO)")
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
    # The man page and completion are the desktop app's command line (a superset: it has figure); the headless one
    # answers for every subcommand it has.
    full = os.path.join(root, "usr/lib/attnscope/attnscope")
    exe = full if args.gui else os.path.join(root, "usr/lib/attnscope", cli_exe_name(args))
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
    print(check_run([sys.executable, "-c", code, root, os.path.join(root, "usr/lib/attnscope", cli_exe_name(args))],
                    env=env).strip())
    so = glob.glob(os.path.join(site, "attnscope", "_attnscope*.so"))
    qt = [lib for lib in needed_libraries(so[0]) if "Qt" in lib]
    if qt:
        fail(f"the module links Qt: {qt}")


def check_data(args, root):
    """The samples are the repository's, byte for byte, and the example job runs from where they are installed."""
    folder = os.path.join(root, "usr/share/attnscope")
    for name in sorted(os.listdir(args.data)):
        if name.endswith(".h5") or name == "example_study.toml":
            with open(os.path.join(args.data, name), "rb") as a, open(os.path.join(folder, name), "rb") as b:
                if a.read() != b.read():
                    fail(f"/usr/share/attnscope/{name} differs from data/{name}")
    print(f"samples: {len(os.listdir(folder))} files in /usr/share/attnscope, each equal to data/'s")


def check_docs(args, root):
    """Every page of the HTML docs links only to pages and images inside the folder (or to the web)."""
    html_dir = os.path.join(root, "usr/share/doc/attnscope-doc/html")
    pages = [f for f in os.listdir(html_dir) if f.endswith(".html")]
    want = {"index.html", "cli.html", "gui.html", "maths.html", "batch.html", "python.html", "pytorch.html",
            "packaging.html"}
    if not want <= set(pages):
        fail(f"the HTML docs lack {sorted(want - set(pages))}")
    links = 0
    for page in pages:
        text = open(os.path.join(html_dir, page), encoding="utf-8").read()
        for target in re.findall(r'(?:href|src)="([^"]+)"', text):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            links += 1
            path = os.path.normpath(os.path.join(html_dir, target.split("#")[0]))
            if not path.startswith(html_dir + os.sep) or not os.path.isfile(path):
                fail(f"{page} links to {target}, which the package does not hold")
        if ".md\"" in text or 'href="docs/' in text:
            fail(f"{page} still links to Markdown files")
        # A list GitHub renders (right after a paragraph line, nested by two spaces) must be a list here too.
        for para in re.findall(r"<p>(.*?)</p>", text, re.S):
            if re.search(r"\n\s*(?:[-*+]|\d+\.) \S", para):
                fail(f"{page}: a list rendered as a paragraph: {para[:200]!r}")
    print(f"docs: {len(pages)} HTML pages, {links} local links and images, every one inside the package")


def step_contents(args):
    debs = the_debs(args)
    for component, deb in debs.items():
        check_fields(args, component, deb)
        check_listing(args, component, deb)
    root = extract_all(args, debs, os.path.join(args.work, "contents"))
    check_binary(args, root, f"usr/lib/attnscope/{cli_exe_name(args)}", qt_allowed=False)
    if args.gui:
        check_binary(args, root, "usr/lib/attnscope/attnscope", qt_allowed=True)
        check_headless_refusals(args, root)
    check_manpage(args, root)
    check_completion(args, root)
    check_python(args, root)
    check_data(args, root)
    check_docs(args, root)


# ------------------------------------------------------------------------------------------------- validate

# The one lintian warning the packages may have (docs/packaging.md, "lintian").
DOCUMENTED_WARNINGS = {"initial-upload-closes-no-bugs"}


def step_validate(args):
    debs = the_debs(args)
    root = extract_all(args, debs, os.path.join(args.work, "validate"))
    if args.gui:
        desktop = f"{root}/usr/share/applications/{args.app_id}.desktop"
        check_run(["desktop-file-validate", desktop])
        text = open(desktop).read()
        if "Exec=/usr/lib/attnscope/attnscope %F" not in text:
            fail("the desktop entry does not start the desktop app's executable")
        meta = f"{root}/usr/share/metainfo/{args.app_id}.metainfo.xml"
        print(check_run(["appstreamcli", "validate", "--no-net", meta]).strip())
        # The MIME database built from our XML alone maps *.attnscope to the session type.
        mime = f"{root}/usr/share/mime"
        check_run(["update-mime-database", mime])
        globs = open(f"{mime}/globs2").read()
        if "application/x-attnscope-session:*.attnscope" not in globs:
            fail(f"update-mime-database gave no glob for sessions:\n{globs}")
        if "application/x-attnscope-session" not in text or "application/x-hdf5" not in text:
            fail("the desktop entry does not open sessions and HDF5 files")
        print("desktop entry, metainfo and MIME type valid")
    for component, deb in debs.items():
        r = run(["lintian", "--tag-display-limit", "0", "--display-info", deb])
        print(r.stdout + r.stderr)
        lines = r.stdout.splitlines()
        errors = [l for l in lines if l.startswith("E:")]
        warnings = [l for l in lines if l.startswith("W:") and l.split()[2] not in DOCUMENTED_WARNINGS]
        if errors or warnings or r.returncode not in (0, 1):
            fail(f"lintian on {os.path.basename(deb)}: {len(errors)} errors, undocumented warnings {warnings} "
                 f"(exit {r.returncode})")
    print(f"lintian: {len(debs)} packages, no error, no warning but the documented one")


# -------------------------------------------------------------------------------------------------- install

# Mounts a throw-away root (an overlay of /, its upper layer on a tmpfs of this private mount namespace: it works
# where the build folder is itself on an overlay, and it vanishes with the namespace) and runs the phase's script
# in it with the packages in /tmp/debs.
MOUNT_SCRIPT = r"""
set -eu
work=$1 debs=$2 script=$3
mount -t tmpfs tmpfs "$work/layers" || exit 77
mkdir "$work/layers/upper" "$work/layers/ovl"
mount -t overlay overlay -o "lowerdir=/,upperdir=$work/layers/upper,workdir=$work/layers/ovl" "$work/root" || exit 77
for m in proc sys dev; do mount --rbind "/$m" "$work/root/$m"; done
mount -t tmpfs tmpfs "$work/root/tmp"
mkdir "$work/root/tmp/debs"
cp "$debs"/*.deb "$work/root/tmp/debs/"
cp "$script" "$work/root/tmp/phase.sh"
chroot "$work/root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp DEBIAN_FRONTEND=noninteractive \
    LC_ALL=C.UTF-8 QT_QPA_PLATFORM=offscreen /bin/sh -eu /tmp/phase.sh
"""

# Phase "desktop": every package; /usr/bin/attnscope is the desktop app's, then attnscope-cli's once the app is
# removed; the purge leaves nothing.
DESKTOP_PHASE = r"""
cd /tmp   # apt makes a .deb path absolute from the working folder, which must exist inside the root
if command -v attnscope >/dev/null; then echo "attnscope already on PATH before the install"; exit 3; fi
apt-get install -y /tmp/debs/*.deb >/tmp/apt.log 2>&1 || { cat /tmp/apt.log; exit 4; }
echo "path=$(command -v attnscope)"
echo "target=$(readlink -f /usr/bin/attnscope)"
echo "version=$(attnscope --version)"
for p in $PACKAGES; do echo "status_$p=$(dpkg-query -W -f='${Status}' $p)"; done
for f in /usr/share/applications/*.desktop; do echo "desktop=$f"; done
grep -h "x-attnscope-session" /usr/share/applications/mimeinfo.cache 2>/dev/null | sed "s/^/mimecache=/" || true
grep -h "attnscope" /usr/share/mime/globs2 2>/dev/null | sed "s/^/mimeglob=/" || true
sh /tmp/examples.sh
apt-get remove -y attnscope >/tmp/apt.log 2>&1 || { cat /tmp/apt.log; exit 5; }
echo "after_app_removed=$(readlink -f /usr/bin/attnscope)"
apt-get purge -y $PACKAGES >/tmp/apt.log 2>&1 || { cat /tmp/apt.log; exit 5; }
if command -v attnscope >/dev/null; then echo "attnscope still on PATH after purge"; exit 6; fi
echo "left=$(ls -d /usr/share/doc/*attnscope* /usr/share/attnscope /usr/lib/attnscope /var/lib/dpkg/alternatives/attnscope 2>/dev/null | wc -l)"
"""

# Phase "noqt": Qt purged from the root first, then the command line, the module, the samples and the docs.
NOQT_PHASE = r"""
cd /tmp
apt-get purge -y '?name(^libqt6)' >/tmp/apt.log 2>&1 || { cat /tmp/apt.log; exit 4; }
echo "qt_libraries=$(find /usr/lib /lib -name 'libQt6*' 2>/dev/null | wc -l)"
echo "qt_packages=$(dpkg-query -W -f='${Package} ${Status}\n' 2>/dev/null | grep -ci 'qt6.*installed$' || true)"
apt-get install -y $NOQT_DEBS >/tmp/apt.log 2>&1 || { cat /tmp/apt.log; exit 4; }
echo "path=$(command -v attnscope)"
echo "target=$(readlink -f /usr/bin/attnscope)"
echo "module=$(PYTHONDONTWRITEBYTECODE=1 python3 -c 'import attnscope; print(attnscope.__file__)')"
echo "torch_recorder=$(PYTHONDONTWRITEBYTECODE=1 python3 -c 'import attnscope.torch as t; print(t.AttnScopeRecorder.__name__)' 2>&1 | tail -1)"
echo "man_examples=$(man attnscope 2>/dev/null | grep -c '^EXAMPLES')"
echo "docs_index=$(ls /usr/share/doc/attnscope-doc/html/index.html)"
sh /tmp/examples.sh
PYTHONDONTWRITEBYTECODE=1 python3 -c '
import json, attnscope
r = attnscope.report("/usr/share/attnscope/vit_digits.h5", out="/tmp/pyreport")
print("pyreport=" + ("ok" if "ATTNSCOPE_REPORT" in open("/tmp/pyreport/data.js").read() else "no data"))
'
apt-get purge -y $PACKAGES_NOQT >/tmp/apt.log 2>&1 || { cat /tmp/apt.log; exit 5; }
if command -v attnscope >/dev/null; then echo "attnscope still on PATH after purge"; exit 6; fi
echo "left=$(ls -d /usr/share/doc/*attnscope* /usr/share/attnscope /usr/lib/attnscope /var/lib/dpkg/alternatives/attnscope 2>/dev/null | wc -l)"
"""


def readme_examples(args):
    """The README's usage lines (its first sh block that runs build/app/attnscope), as they read once installed:
    `attnscope` on PATH, the samples in /usr/share/attnscope."""
    text = open(os.path.join(args.source, "README.md"), encoding="utf-8").read()
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        if "build/app/attnscope info" in block:
            break
    else:
        fail("README.md has no usage block (an sh block with build/app/attnscope info)")
    commands = []
    for line in block.replace("\\\n", " ").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        line = line.replace("build/app/attnscope", "attnscope").replace(" data/", " /usr/share/attnscope/")
        line = line.replace(":data/", ":/usr/share/attnscope/")
        if "data/" in line.replace("/usr/share/attnscope/", ""):
            fail(f"a README example names data/ in a way this test cannot rewrite: {line}")
        commands.append(re.sub(r"\s+", " ", line))
    return commands


def examples_script(commands, desktop):
    """A shell script that runs each command, printing example=<status> <first word after attnscope> for each; the
    headless phase expects the desktop app's commands refused with one error line naming the package."""
    out = ["set +e"]
    for i, cmd in enumerate(commands):
        needs_app = " figure " in f" {cmd} " or " --plot " in f" {cmd} "
        quoted = cmd.replace("'", "'\\''")
        out.append(f"{cmd} >/tmp/ex{i}.out 2>/tmp/ex{i}.err; s=$?")
        if needs_app and not desktop:
            out.append(f"if [ $s = 2 ] && [ $(wc -l </tmp/ex{i}.err) = 1 ] && grep -q '^error: .*package attnscope' "
                       f"/tmp/ex{i}.err; then echo 'example=refused-as-expected {i}'; "
                       f"else echo 'example=FAILED {i} (status '$s') {quoted}'; cat /tmp/ex{i}.err; fi")
        else:
            out.append(f"if [ $s = 0 ]; then echo 'example=ok {i}'; "
                       f"else echo 'example=FAILED {i} (status '$s') {quoted}'; tail -5 /tmp/ex{i}.err; fi")
    out.append("[ -s /tmp/report/index.html ] && echo 'report_page=yes' || echo 'report_page=no'")
    out.append("ls /tmp/report/runs/*/figures/*_maps.png >/dev/null 2>&1 && echo 'report_maps=yes' || echo 'report_maps=no'")
    out.append("grep -q maps_missing /tmp/report/data.js && echo 'report_maps_note=yes' || echo 'report_maps_note=no'")
    return "\n".join(out) + "\n"


def run_phase(args, debs, name, script, env_lines):
    work = fresh(os.path.join(args.work, "install-" + name))
    for sub in ("layers", "root", "debs"):
        os.makedirs(os.path.join(work, sub))
    for deb in debs:
        shutil.copy(deb, os.path.join(work, "debs"))
    body = "\n".join(env_lines) + "\n" + script
    with open(os.path.join(work, "phase.sh"), "w") as f:
        f.write("cat > /tmp/examples.sh <<'ATTNSCOPE_EXAMPLES'\n" + examples_script(readme_examples(args), name == "desktop")
                + "ATTNSCOPE_EXAMPLES\n" + body)
    try:
        r = run(["unshare", "--mount", "--propagation", "private", "sh", "-c", MOUNT_SCRIPT, "install", work,
                 os.path.join(work, "debs"), os.path.join(work, "phase.sh")])
    finally:
        # The namespace is gone with its process, so the mounts are too: only plain folders remain.
        shutil.rmtree(work, ignore_errors=True)
    print(f"--- phase {name}\n" + r.stdout + r.stderr)
    if r.returncode == SKIP:
        print("SKIPPED: cannot mount an overlay of / here (no overlayfs, or no CAP_SYS_ADMIN in this container)")
        sys.exit(SKIP)
    if r.returncode != 0:
        fail(f"the throw-away install ({name}) failed (exit {r.returncode})")
    out = {}
    for line in r.stdout.splitlines():
        if "=" in line and not line.startswith(" "):
            key, value = line.split("=", 1)
            out.setdefault(key, []).append(value)
    failed = [v for v in out.get("example", []) if v.startswith("FAILED")]
    if failed:
        fail(f"README examples failed in phase {name}: {failed}")
    return {k: v[0] if len(v) == 1 else v for k, v in out.items()}


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
    debs = the_debs(args)
    names = package_names(args)
    version = "attnscope " + args.version.rsplit("-", 1)[0]
    cli_path = f"/usr/lib/attnscope/{cli_exe_name(args)}"
    n_examples = len(readme_examples(args))

    if args.gui:
        out = run_phase(args, debs.values(), "desktop", DESKTOP_PHASE, [f"PACKAGES='{' '.join(names.values())}'"])
        for p in names.values():
            if out.get(f"status_{p}") != "install ok installed":
                fail(f"{p} is not installed: {out.get(f'status_{p}')}")
        if out.get("path") != "/usr/bin/attnscope" or out.get("target") != "/usr/lib/attnscope/attnscope":
            fail(f"with the desktop app installed /usr/bin/attnscope should be it: {out.get('path')} -> {out.get('target')}")
        if out.get("version") != version:
            fail(f"the installed attnscope --version printed {out.get('version')!r}")
        desktops = out.get("desktop", [])
        desktops = desktops if isinstance(desktops, list) else [desktops]
        if f"/usr/share/applications/{args.app_id}.desktop" not in desktops:
            fail(f"no desktop entry in the menu folder: {desktops}")
        if f"{args.app_id}.desktop" not in str(out.get("mimecache", "")):
            fail("update-desktop-database did not register the entry for sessions (mimeinfo.cache)")
        if "*.attnscope" not in str(out.get("mimeglob", "")):
            fail("update-mime-database did not register *.attnscope")
        if out.get("report_page") != "yes" or out.get("report_maps") != "yes":
            fail(f"the README's report with the desktop app: page {out.get('report_page')}, maps {out.get('report_maps')}")
        if out.get("after_app_removed") != cli_path:
            fail(f"after removing the desktop app /usr/bin/attnscope is {out.get('after_app_removed')}, not {cli_path}")
        if out.get("left") != "0":
            fail(f"{out.get('left')} folders of the packages left after purge")
        print(f"desktop phase: all {len(names)} packages installed; /usr/bin/attnscope -> the desktop app, then -> "
              f"attnscope-cli when it is removed; desktop entry and MIME type registered; the README's {n_examples} "
              "examples ran against /usr/share/attnscope; purge clean")

    noqt = [debs[c] for c in ("cli", "python", "data", "doc") if c in debs]
    noqt_names = " ".join(names[c] for c in ("cli", "python", "data", "doc") if c in names)
    env = [f"NOQT_DEBS='{' '.join('/tmp/debs/' + os.path.basename(d) for d in noqt)}'", f"PACKAGES_NOQT='{noqt_names}'"]
    script = NOQT_PHASE if args.python else NOQT_PHASE.replace("PYTHONDONTWRITEBYTECODE=1 python3", ": ")
    out = run_phase(args, noqt, "noqt", script, env)
    if out.get("qt_libraries") != "0" or out.get("qt_packages") != "0":
        fail(f"Qt is still in the root: {out.get('qt_libraries')} libQt6 files, {out.get('qt_packages')} packages")
    if out.get("path") != "/usr/bin/attnscope" or out.get("target") != cli_path:
        fail(f"without the desktop app /usr/bin/attnscope should be {cli_path}: {out.get('target')}")
    if args.python:
        if out.get("module") != f"/usr/{args.python_dir.strip('/')}/attnscope/__init__.py":
            fail(f"python3 does not import the installed module without Qt: {out.get('module')!r}")
        if out.get("torch_recorder") != "AttnScopeRecorder":
            fail(f"attnscope.torch: {out.get('torch_recorder')!r}")
        if out.get("pyreport") != "ok":
            fail(f"attnscope.report without Qt: {out.get('pyreport')!r}")
    if out.get("man_examples") != "1":
        fail("man attnscope has no EXAMPLES section once installed")
    if out.get("report_page") != "yes" or out.get("report_maps") != "no" or out.get("report_maps_note") != "yes":
        fail(f"the headless report: page {out.get('report_page')}, maps {out.get('report_maps')}, "
             f"note {out.get('report_maps_note')} (expected a page without maps that says why)")
    if out.get("left") != "0":
        fail(f"{out.get('left')} folders of the packages left after purge")
    print(f"no-Qt phase: Qt purged (0 libQt6 files); {noqt_names} installed; import attnscope and attnscope.torch work; "
          f"man attnscope has EXAMPLES; the README's {n_examples} examples ran against /usr/share/attnscope (figure refused "
          "naming the package; the report without maps, saying why); purge clean")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("step", choices=["build", "contents", "validate", "install"])
    ap.add_argument("--deb-dir", required=True, help="the folder the package target writes the .debs to")
    ap.add_argument("--version", required=True, help="Debian version, VERSION-REVISION")
    ap.add_argument("--app-id", required=True)
    ap.add_argument("--gui", type=lambda s: s in ("1", "ON", "TRUE", "true"), required=True)
    ap.add_argument("--python", type=lambda s: s in ("1", "ON", "TRUE", "true"), required=True)
    ap.add_argument("--python-dir", required=True)
    ap.add_argument("--build-binary", required=True)
    ap.add_argument("--build-dir")
    ap.add_argument("--data", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    {"build": step_build, "contents": step_contents, "validate": step_validate, "install": step_install}[args.step](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
