"""What the Python tests compare of two analyze documents: everything but what describes the run."""
import re

import numpy as np

import attnscope

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


def keyword_spelling(message):
    """A command-line message as the module says it (issue 33): an option named at the start of a message, or
    after "contradicts", "needs" or "in", is named by its keyword (--top-k -> top_k); deeper hints keep the flag."""
    # q and k are depth()'s dataset names, not the tensors the core's deeper messages name as --q, --k.
    names = {row[0] for rows in attnscope._attnscope.option_table().values() for row in rows} - {"q", "k"} | {"mechanism"}

    def spell(m):
        keyword = m.group(2).replace("-", "_")
        return m.group(1) + (keyword if keyword in names else "--" + m.group(2))

    return re.sub(r"(^|contradicts |needs | in )--([a-z][a-z-]*)", spell, message)
