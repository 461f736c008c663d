"""The installed module works from its install location alone (the Debian package's layout).

    check_installed.py BUILD_DIR WORK_DIR
Installs the `python` component of BUILD_DIR into WORK_DIR/root/usr (cmake --install), then, in a fresh
interpreter whose path holds only that dist-packages folder, imports attnscope, compares attnscope.matrix with
the NumPy reference (1e-12) and checks the module file lies inside the installed tree.
"""
import os
import shutil
import subprocess
import sys

SOURCE = os.environ["ATTNSCOPE_SOURCE_DIR"]


def main():
    build, work = sys.argv[1], sys.argv[2]
    root = os.path.join(work, "root")
    shutil.rmtree(root, ignore_errors=True)
    subprocess.run(["cmake", "--install", build, "--component", "python", "--prefix", os.path.join(root, "usr")],
                   check=True, stdout=subprocess.DEVNULL)
    site = os.path.join(root, "usr", "lib", "python3", "dist-packages")
    probe = (
        "import sys, numpy as np\n"
        f"sys.path.insert(0, {os.path.join(SOURCE, 'tests', 'reference')!r})\n"
        "import attnscope, attnref\n"
        f"assert attnscope.__file__.startswith({site!r}), attnscope.__file__\n"
        "rng = np.random.default_rng(0)\n"
        "q, k = rng.standard_normal((80, 12)), rng.standard_normal((80, 12))\n"
        "for m in ('softmax', 'linear', 'mhla'):\n"
        "    err = np.max(np.abs(attnscope.matrix(q, k, m) - attnref.attention_matrix(m, q, k)))\n"
        "    assert err < 1e-12, (m, err)\n"
        "print('installed module: matrix equals the NumPy reference for softmax, linear, mhla')\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = site
    return subprocess.run([sys.executable, "-c", probe], env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
