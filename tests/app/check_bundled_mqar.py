"""The bundled MQAR models (data/trained_mqar_*.h5, data/README.md): one per mechanism, each under 2 MB; `attnscope
analyze` opens each with no option but the selection and the mechanisms (the default list leaves out decay and
gated; gated only where the file has gates), reads causal, MHLA's blocks and Mc, gated's gates and the
retrieval targets from the file, and prints every mechanism's retrieval mass, equal to its `--json` value; the
mechanism the model was trained with matches the file's attribute; and data/README.md's table gives each file's
learning rate and test accuracy as its attributes hold them.
usage: check_bundled_mqar.py ATTNSCOPE [WORKDIR]"""
import json
import os
import re
import sys

import h5py

import cli_checks

binary = sys.argv[1]
problems = []
run = cli_checks.runner(binary, problems)
data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data")
expected = {"softmax": "softmax", "linear": "linear", "mhla_blocks16": "mhla", "decay": "decay", "gated": "gated"}
readme = open(os.path.join(data, "README.md"), encoding="utf-8").read()
for stem, mechanism in expected.items():
    path = os.path.join(data, f"trained_mqar_{stem}.h5")
    if not os.path.exists(path):
        problems.append(f"{path} is missing")
        continue
    if os.path.getsize(path) >= 2 * 1024 * 1024:
        problems.append(f"{path} is {os.path.getsize(path)} bytes, not under 2 MB")
    with h5py.File(path, "r") as f:
        attrs = dict(f.attrs)
        batched = f["layers/0/q"].ndim == 4
    if attrs.get("mechanism") != mechanism or attrs.get("task") != "mqar" or not attrs.get("causal"):
        problems.append(f"{path}: attributes mechanism={attrs.get('mechanism')} task={attrs.get('task')} causal={attrs.get('causal')}")
    row = re.search(r"^\| `trained_mqar_%s\.h5` \|[^|]*\| ([0-9.]+) \| ([0-9.]+) \|$" % re.escape(stem), readme, re.M)
    if not row:
        problems.append(f"data/README.md has no table row for trained_mqar_{stem}.h5")
    elif float(row.group(1)) != float(attrs["lr"]) or row.group(2) != "%.3f" % attrs["test_accuracy"]:
        problems.append(f"data/README.md says lr {row.group(1)}, accuracy {row.group(2)} for {stem}; the file: "
                        f"{attrs['lr']}, {attrs['test_accuracy']:.3f}")
    at = ["--at", "b=0,h=1"] if batched else ["--head", "1"]
    wanted = ["softmax", "linear", "mhla", "decay"] + (["gated"] if mechanism == "gated" else [])   # gated needs gates
    for layer in (0, 1):
        args = ["analyze", "--q", f"{path}:/layers/{layer}/q", "--k", f"{path}:/layers/{layer}/k",
                "--mechanism", ",".join(wanted)] + at
        text = run(args)
        doc = run(args + ["--json", "-"])
        if text is None or doc is None:
            continue
        doc = json.loads(doc)
        if "causal=true" not in text or "retrieval (the file's retrieval_targets" not in text:
            problems.append(f"{stem} layer {layer}: no causal rows or no retrieval line in:\n{text}")
        if mechanism == "mhla" and "blocks=16" not in text or mechanism == "mhla" and "mixing_head=1" not in text:
            problems.append(f"{stem} layer {layer}: MHLA's blocks and Mc not read from the file:\n{text}")
        if mechanism == "gated" and "gates=" not in text:
            problems.append(f"{stem} layer {layer}: the gates not read from the file:\n{text}")
        if sorted(m["mechanism"] for m in doc["results"]) != sorted(wanted):
            problems.append(f"{stem} layer {layer}: results for {[m['mechanism'] for m in doc['results']]}")
        for m in doc["results"]:
            mass = m.get("retrieval_mass")
            if mass is None or not 0.0 <= mass <= 1.0:
                problems.append(f"{stem} layer {layer} {m.get('mechanism')}: retrieval mass {mass}")
            elif "%s: mass %.4f" % (m["mechanism"], mass) not in text:
                problems.append(f"{stem} layer {layer} {m['mechanism']}: mass {mass:.4f} is not what the table prints")
cli_checks.report(problems)
