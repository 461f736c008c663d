"""What the Python tests compare of two analyze documents: everything but what describes the run."""
import numpy as np

# Fields that differ between two runs of the same analysis (the kernels report, timings).
VARYING = ("kernels", "timing", "seconds", "elapsed_s")


def strip(o):
    """The document without what describes the run (kernels report, timings), arrays as lists."""
    if isinstance(o, dict):
        return {k: strip(v) for k, v in o.items() if k not in VARYING}
    if isinstance(o, list):
        return [strip(v) for v in o]
    if isinstance(o, np.ndarray):
        return [strip(v) for v in o.tolist()]
    return o
