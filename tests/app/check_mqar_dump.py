"""The MQAR study's dumps (tools/study/mqar.py, docs/formats.md "Retrieval targets"): tiny models of every mechanism
(a few steps: the file's layout is checked, not the training) dumped with the bridge open in `attnscope analyze`
with no option (causal, MHLA's blocks and learned Mc, gated's gates from the file's attributes); each
retrieval target (t, j*) points at the value token that answers the query at t (mqar_labels[t] == mqar_inputs[j*],
j* - 1 the matching key); and analyze's retrieval_mass equals NumPy's mean of A[t, j*] over the targets, A from
`attnscope matrix` of the same selection. Skipped without PyTorch.
usage: check_mqar_dump.py ATTNSCOPE WORKDIR"""
import json
import math
import os
import sys

import h5py
import numpy as np

import cli_checks

torch = cli_checks.torch_or_skip()
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "study"))
import mqar  # noqa: E402

binary, work = sys.argv[1], sys.argv[2]
problems = []
run = cli_checks.runner(binary, problems)
N, P = 32, 4
for mech, variant in (("softmax", {}), ("linear", {}), ("mhla", {"blocks": 4}), ("mhla", {"chunk": 8}), ("decay", {}),
                      ("gated", {})):
    model, _ = mqar.train_one(mech, variant, N, P, 3e-3, 0, 3, log=lambda s: None)
    label = mech + "".join(f"_{k}{v}" for k, v in variant.items())
    path = mqar.dump(model, mech, variant, N, P, os.path.join(work, label + ".h5"), examples=4)
    with h5py.File(path, "r") as f:
        targets, inputs, labels = f["retrieval_targets"][()], f["mqar_inputs"][()], f["mqar_labels"][()]
    batched = targets.ndim == 3
    b = 1 if batched else 0
    tg, x, y = (targets[b], inputs[b], labels[b]) if batched else (targets, inputs, labels)
    if len(tg) != P:
        problems.append(f"{label}: {len(tg)} targets, {P} pairs")
    for t, j in tg:
        if y[t] < 0 or x[j] != y[t] or j % 2 != 1 or j >= 2 * P or not j <= t:
            problems.append(f"{label}: target ({t}, {j}) is not the value answering the query at {t}")
    sel = (["--at", f"b={b}"] if batched else []) + ["--head", "1"]
    refs = ["--q", path + ":/layers/1/q", "--k", path + ":/layers/1/k"]
    out = run(["analyze"] + refs + sel + ["--mechanism", mech, "--json", "-"])
    mat = os.path.join(work, "A.npy")
    if out is None or run(["matrix"] + refs + sel + ["--mechanism", mech, "--out", mat]) is None:
        continue
    r = json.loads(out)["results"][0]
    A = np.load(mat)
    want = float(np.mean([A[t, j] for t, j in tg]))
    if r.get("retrieval_mass") is None or not math.isclose(r["retrieval_mass"], want, rel_tol=1e-12):
        problems.append(f"{label}: retrieval_mass {r.get('retrieval_mass')!r}, numpy {want!r}")
    if not r["params"].get("causal"):
        problems.append(f"{label}: the dump was not read as causal: {r['params']}")
cli_checks.report(problems)
