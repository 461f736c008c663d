"""Runs a notebook top to bottom with nbclient (python3-nbclient, the python3 kernel of python3-ipykernel) and
fails on the first cell that raises. Plots are rendered offscreen by the inline backend
(the notebook's `%matplotlib inline`) whatever MPLBACKEND says. The notebook is not rewritten. The kernel starts in
FOLDER (default: the notebook's own folder, as Jupyter starts it).
    run_notebook.py NOTEBOOK.ipynb [FOLDER]
"""
import os
import sys

import nbformat
from nbclient import NotebookClient


def main():
    path = sys.argv[1]
    folder = os.path.abspath(sys.argv[2]) if len(sys.argv) > 2 else os.path.dirname(os.path.abspath(path))
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")   # the kernel's debugger notice, not ours
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": folder}})
    client.execute()
    images = sum(1 for cell in nb.cells if cell.cell_type == "code"
                 for out in cell.get("outputs", []) if "image/png" in out.get("data", {}))
    print(f"{path}: {len(nb.cells)} cells ran from {folder}, {images} figures")
    if images < 3:
        print("expected at least three figures (spectra, maps, collapse curve)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
