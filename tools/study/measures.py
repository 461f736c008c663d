"""The measures half of docs/trained-mechanisms.md from a study folder (tools/study/train.py): `attnscope batch`
over every model file, every layer and head and every held-out input (`at = { b = "all" }`), each model under
its own mechanism (MHLA with the Mc its file holds), then the three claims of the MHLA paper judged with the
measures of docs/maths.md (spec attention.md 2.1): the d bound on the causal past block, rank growth by excess
effective rank and energy ranks, sparsity by support-normalised entropy and entropy below the content-free
baseline. Statistics: `attnscope aggregate --cluster file` (docs/maths.md 5): clustered intervals over the seeds'
models (below 10 seeds the t interval over the seed means, attention.md 2.2; from 10 the two-stage bootstrap) and
sign tests over the seeds, per mechanism on the batch
folders, and between models of different mechanisms, or between M values of a sweep, on folders of the paired
units written here (units_folder); the per-seed means beside them.

Every number comes from the batch outputs (results.jsonl), from `attnscope sweep` over M on the MHLA models' q/k
and from `attnscope aggregate` over them; a measure the binary does not report is shown as missing, never filled
in. The metric paths are in METRICS (dotted paths into a results.jsonl record, the same names as aggregate.csv's).
The work folder is kept: a rerun with the same --work resumes the batches and reads the sweeps' CSVs instead of
redoing them (the aggregates run again). Figures: tools/study/figures.py.

Used by docs/make_trained_mechanisms.py --study DIR."""
import csv
import json
import os
import re
import subprocess
import sys
import time
from collections import defaultdict

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

MECHS = ("softmax", "linear", "mhla")
METRICS = {   # label -> dotted path in a results.jsonl record and metric name in aggregate.csv (docs/batch.md)
    "rank (default tolerance)": "rank",
    "rank at rtol 1e-3": "rank_at_rtol.1e-3",
    "effective rank": "effective_rank",
    "baseline A0: effective rank": "baseline.effective_rank",
    "excess effective rank": "excess_effective_rank",
    "energy rank 90%": "energy_rank_90",
    "energy rank 99%": "energy_rank_99",
    "baseline A0: energy rank 99%": "baseline.energy_rank_99",
    "normalised entropy (ln n_t)": "entropy.normalized_mean",
    "support-normalised entropy": "entropy.support_normalized_mean",
    "entropy below baseline (nats)": "entropy_below_baseline",
    "past block rank": "past_block.rank",
    "past block effective rank": "past_block.effective_rank",
    "past block energy rank 99%": "past_block.energy_rank_99",
}
PAST = ("past_block.rank", "past_block.effective_rank", "past_block.energy_rank_99")
TASK_OPTIONS = {"vit": "", "lm": "chunk = 32\n"}   # the LM's MHLA blocks (the file's attribute mhla_chunk)
TRAINED_M = {"vit": 16, "lm": 8}   # the models' own M (the sweep CSV's m is the block count)
SWEEP = {"vit": ("m=1,2,4,8", "cos"), "lm": ("m=1,2,4,8,16,32", "causal-local")}   # the Mc inits
SWEEP_INPUTS = 10   # held-out inputs per model in the M sweeps (b = 0..9)
FILE = re.compile(r"(vit|lm)_(softmax|linear|mhla)_s(\d+)\.h5$")


def run_batch(binary, work, study, task, mech, jobs=2):
    """The records and aggregate.csv rows of one batch: every `task` model trained with `mech`, under `mech`,
    every input as a unit. The MHLA models also run under linear attention (their q/k without Mc), so the
    batch's aggregate.csv pairs `linear - mhla` on the same units: what the learned Mc adds to the same q/k.
    The output folder is kept: a rerun with the same --work resumes it (docs/batch.md) instead of redoing it."""
    files = sorted(f for f in os.listdir(study) if FILE.match(f) and f.startswith(f"{task}_{mech}_"))
    if not files:
        return [], []
    mechanisms = ["linear", "mhla"] if mech == "mhla" else [mech]
    job = os.path.join(work, f"{task}_{mech}.toml")
    with open(job, "w") as f:
        inputs = ", ".join(json.dumps(os.path.join(os.path.abspath(study), x)) for x in files)
        f.write(f'inputs = [{inputs}]\nq = "/layers/0/q"\nk = "/layers/0/k"\nlayers = "all"\nheads = "all"\n'
                f'at = {{ b = "all" }}\nmechanisms = {json.dumps(mechanisms)}\n\n[attention]\n{TASK_OPTIONS[task]}')
    out = os.path.join(work, f"{task}_{mech}_out")
    t0 = time.time()
    p = subprocess.run([binary, "batch", job, "--out", out, "--jobs", str(jobs)], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"error: attnscope batch {job} exited {p.returncode}: {p.stderr.strip()}")
    if "(0 already recorded" in p.stdout + p.stderr:   # a clean run: its wall time is what the page reports
        with open(os.path.join(out, "wall_seconds.txt"), "w") as f:
            f.write(f"{time.time() - t0:.1f}\n")
    with open(os.path.join(out, "results.jsonl")) as f:
        records = [json.loads(line) for line in f]
    with open(os.path.join(out, "aggregate.csv")) as f:
        aggregate = list(csv.DictReader(f))
    return records, aggregate


def value(record, path):
    """The number at a dotted path of a record, or None (missing, null, or not a number)."""
    v = record
    for part in _split(path):
        if not isinstance(v, dict) or part not in v:
            return None
        v = v[part]
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _split(path):
    """'rank_at_rtol.1e-3' -> ['rank_at_rtol', '1e-3'] (a key may hold a dot only in its numeric tail)."""
    head, _, tail = path.partition(".")
    return [head] + ([tail] if tail and re.match(r"^\d", tail) else _split(tail) if tail else [])


def unit_key(record):
    """(seed, input, layer, head): the same unit across the models of different mechanisms. A batch record names
    its file in input.file and, for an axis given as `all`, the unit's index in unit_at (docs/batch.md)."""
    m = FILE.search(str(record.get("input", {}).get("file", "")))
    at = record.get("unit_at") or {}
    return (int(m.group(3)) if m else -1, int(at.get("b", -1)), int(record.get("layer") or 0),
            int(record.get("head") or 0))




def own(records, mech):
    """The records of the models trained with `mech` analysed under `mech` (the MHLA batch also holds linear)."""
    return [r for r in records if r.get("mechanism") == mech]


def model_means(records, path):
    """{seed: mean over the model's units} of one metric."""
    per_seed = defaultdict(list)
    for r in records:
        v = value(r, path)
        if v is not None:
            per_seed[unit_key(r)[0]].append(v)
    return {s: float(np.mean(v)) for s, v in sorted(per_seed.items())}


def run_aggregate(binary, folder, extra=()):
    """`attnscope aggregate FOLDER --cluster file --json` (clustered intervals over the files = seeds, sign tests
    over them: docs/maths.md 5), or with `extra` instead of the clusters (e.g. ["--by", "file"]). Returns the JSON's
    groups as {group key text: ({(mechanism, metric): row}, {(a, b, metric): row})}. Run on every call (the
    page's script time includes it); the JSON is kept beside the records for reading."""
    args = list(extra) if extra else ["--cluster", "file"]
    p = subprocess.run([binary, "aggregate", folder, "--json"] + args, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"error: attnscope aggregate {folder} {' '.join(args)}: {p.stderr.strip()}")
    with open(os.path.join(folder, "aggregate_" + "_".join(a.strip("-") for a in args) + ".json"), "w") as f:
        f.write(p.stdout)
    doc = json.loads(p.stdout)
    out = {}
    for g in doc["groups"]:
        rows = {(r["mechanism"], r["metric"]): r for r in g["mechanisms"]}
        pairs = {(r["mechanism_a"], r["mechanism_b"], r["metric"]): r for r in g["pairs"]}
        out[json.dumps(g["group"], sort_keys=True)] = (rows, pairs)
    return out


def units_folder(binary, work, name, groups):
    """Per-unit values from different batches and sweeps as one records folder for `attnscope aggregate`: groups is
    [(label, {unit key (seed, b, layer, head): {metric: value}})], each label a "mechanism" of the folder, units
    paired across labels by key, each unit's file its seed (the cluster). Returns run_aggregate's one group.

    `attnscope aggregate` compares mechanisms of the mechanism table only (it refuses any other name: issue 30, a
    records file cannot ask for unbounded pairs). Labels that are not mechanisms ("mhla M=4", "learned") are
    therefore aggregated by tests/reference/attnref.py's `aggregate`, the independent implementation the test suite
    checks `attnscope aggregate` against to 1e-12 (tests/app/check_aggregate.py, clustered rows included): the same
    statistics, the same record order, written beside the records in the same JSON shape."""
    folder = os.path.join(work, name)
    os.makedirs(folder, exist_ok=True)
    keys = sorted(set().union(*(set(v) for _, v in groups)))
    index = {k: i for i, k in enumerate(keys)}
    if not all(label in MECHS for label, _ in groups):
        return reference_aggregate(folder, groups, index)
    lines = []
    for label, values in groups:
        for k in sorted(values):
            lines.append(json.dumps(dict({"key": f"{label}|{'|'.join(map(str, k))}", "unit": index[k],
                                          "mechanism": label, "input": {"file": f"seed{k[0]}"},
                                          "layer": k[2], "head": k[3]}, **values[k])))
    text = "\n".join(lines) + "\n"
    path = os.path.join(folder, "results.jsonl")
    if not os.path.exists(path) or open(path).read() != text:
        with open(path, "w") as f:
            f.write(text)
    return next(iter(run_aggregate(binary, folder).values()))


def reference_aggregate(folder, groups, index):
    """units_folder's statistics by attnref.aggregate (clusters = seeds), as run_aggregate returns them; the JSON
    is kept beside the units (aggregate_cluster_file.json, with "by": "tests/reference/attnref.py")."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
    import attnref
    units = []
    for label, values in groups:
        for k in sorted(values):
            units.append(dict({"unit": index[k], "mechanism": label, "cluster": f"seed{k[0]}"}, **values[k]))
    doc = attnref.aggregate(units)
    with open(os.path.join(folder, "aggregate_cluster_file.json"), "w") as f:
        json.dump({"by": "tests/reference/attnref.py aggregate (labels that are not mechanisms)", "cluster": "file",
                   "groups": [dict(group={}, **doc)]}, f, indent=1)
    return ({(r["mechanism"], r["metric"]): r for r in doc["mechanisms"]},
            {(r["mechanism_a"], r["mechanism_b"], r["metric"]): r for r in doc["pairs"]})


def unit_values(records, paths):
    """{unit key: {metric path: value}} of records (values missing or null left out)."""
    out = {}
    for r in records:
        out[unit_key(r)] = {p: v for p in paths for v in [value(r, p)] if v is not None}
    return out


def _interval(row, digits=3, signed=False):
    """"mean [lo, hi]" of an aggregate row (mean or mean_diff)."""
    m = float(row["mean_diff"] if "mean_diff" in row else row["mean"])
    return (f"{m:+.{digits}f}" if signed else f"{m:.{digits}f}") + \
        f" [{float(row['ci_low']):.{digits}f}, {float(row['ci_high']):.{digits}f}]"


def _metrics(task):
    """(label, path) of the measures shown for a task (the ViT has no causal past block)."""
    return [(label, path) for label, path in METRICS.items() if not (task == "vit" and path in PAST)]


def table_own(ctx, task):
    """Per mechanism and metric: the mean over every unit of the models, its clustered 95% interval (seeds,
    then units: `attnscope aggregate --cluster file`), n, and the per-seed model means."""
    lines = ["| measure | " + " | ".join(f"{m}: mean [95% clustered interval], n; seed means" for m in MECHS) + " |",
             "|---|" + "---|" * len(MECHS)]
    for label, path in _metrics(task):
        cells = []
        for m in MECHS:
            row = ctx["own"][m][0].get((m, path))
            if row is None:
                cells.append("missing")
                continue
            seeds = model_means(own(ctx["batches"][m][0], m), path)
            cells.append(f"{_interval(row)}, {row['n']}; " + " / ".join(f"{v:.3f}" for v in seeds.values()))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


CROSS = (("mhla", "linear"), ("mhla", "softmax"), ("linear", "softmax"))


def _pair_cell(ctx, a, b, path):
    """A paired difference between the models trained with a and b on the same (seed, input, layer, head):
    mean [clustered 95% interval], sign-test p over the seeds' mean differences."""
    row = ctx["cross"][1].get((a, b, path))
    if row is None:
        return "missing"
    return f"{_interval(row, signed=True)}, p = {float(row['p_sign']):.2g} ({row['clusters']} seeds, n = {row['n']})"


def table_cross(ctx, task):
    """Paired over the same (seed, input, layer, head) between models trained with different mechanisms."""
    lines = ["| measure | MHLA - linear | MHLA - softmax | linear - softmax |", "|---|---|---|---|"]
    for label, path in _metrics(task):
        lines.append(f"| {label} | " + " | ".join(_pair_cell(ctx, a, b, path) for a, b in CROSS) + " |")
    return lines


def table_mc(ctx, task):
    """The MHLA batch's clustered pairs `linear - mhla`: the same q/k without and with the learned Mc."""
    lines = ["| measure | linear - MHLA on the MHLA models' q/k: mean [95% clustered interval], sign-test p over seeds (n) |",
             "|---|---|"]
    for label, path in _metrics(task):
        row = ctx["own"]["mhla"][1].get(("linear", "mhla", path))
        lines.append(f"| {label} | " + ("missing" if row is None else
                     f"{_interval(row, signed=True)}, p = {float(row['p_sign']):.2g} ({row['n']})") + " |")
    return lines


SWEEP_METRICS = (("rank", "rank"), ("rank at rtol 1e-3", "rank_at_rtol_1e-3"), ("effective rank", "effective_rank"),
                 ("excess effective rank", "excess_effective_rank"), ("energy rank 99%", "energy_rank_99"))


def sweep_units(ctx, rows, task):
    """The sweep rows as units of `attnscope aggregate` (label "MECH M=m", unit = (seed, input, layer, head),
    clusters = seeds): clustered intervals per (mechanism, M), and paired differences between any two."""
    ms = sorted({int(r["m"]) for r in rows})
    groups = []
    for mech in ("linear", "mhla"):
        for m in ms:
            vals = {(r["seed"], r["b"], r["layer"], int(r["head"])): {k: float(r[k]) for _, k in SWEEP_METRICS
                                                                      if r.get(k) not in (None, "")}
                    for r in rows if r["mechanism"] == mech and int(r["m"]) == m}
            groups.append((f"{mech} M={m}", vals))
    return units_folder(ctx["binary"], ctx["work"], f"{task}_sweep_units", groups), ms


def table_sweep(agg, ms):
    """Mean [clustered 95% interval] of each metric per (mechanism, M)."""
    lines = ["| mechanism | M | " + " | ".join(l for l, _ in SWEEP_METRICS) + " |",
             "|---|---|" + "---|" * len(SWEEP_METRICS)]
    for mech in ("linear", "mhla"):
        for m in ms:
            cells = [_interval(agg[0][(f"{mech} M={m}", k)], 1) if (f"{mech} M={m}", k) in agg[0] else ""
                     for _, k in SWEEP_METRICS]
            lines.append(f"| {mech} | {m} | " + " | ".join(cells) + " |")
    return lines


def learned_vs_preset(ctx, rows, task):
    """Paired over (seed, input b < SWEEP_INPUTS, layer, head): the learned Mc (batch) minus the preset at the same
    M (sweep), clustered intervals over seeds."""
    keys = (("excess effective rank", "excess_effective_rank"), ("energy rank 99%", "energy_rank_99"),
            ("effective rank", "effective_rank"))
    learned = {k: v for k, v in unit_values(own(ctx["batches"]["mhla"][0], "mhla"), [p for _, p in keys]).items()
               if k[1] < SWEEP_INPUTS}
    preset = {(r["seed"], r["b"], r["layer"], int(r["head"])): {p: float(r[p]) for _, p in keys if r.get(p) not in (None, "")}
              for r in rows if r["mechanism"] == "mhla" and int(r["m"]) == TRAINED_M[task]}
    agg = units_folder(ctx["binary"], ctx["work"], f"{task}_learned_vs_preset", [("learned", learned), ("preset", preset)])
    out = []
    for label, path in keys:
        d = agg[1].get(("learned", "preset", path))
        if d:
            out.append(f"{label}: learned {float(agg[0][('learned', path)]['mean']):.2f} vs preset "
                       f"{float(agg[0][('preset', path)]['mean']):.2f}, difference {_interval(d, 2, True)}, "
                       f"p = {float(d['p_sign']):.2g} ({d['clusters']} seeds, n = {d['n']})")
    return out


def run_sweeps(binary, work, study, task):
    """MHLA and linear attention on the MHLA models' own q/k (every seed, both layers, every head, the first
    SWEEP_INPUTS held-out inputs) with the preset that initialised Mc at each block count: `attnscope sweep`.
    Returns the CSV rows with seed, layer and b added. Cached in the work folder (a rerun reads the CSVs)."""
    vary, mixing = SWEEP[task]
    rows = []
    for f in sorted(x for x in os.listdir(study) if FILE.match(x) and x.startswith(f"{task}_mhla_")):
        seed = int(FILE.match(f).group(3))
        path = os.path.join(os.path.abspath(study), f)
        for layer in (0, 1):
            for b in range(SWEEP_INPUTS):
                out = os.path.join(work, f"sweep_{task}_s{seed}_l{layer}_b{b}.csv")
                if not os.path.exists(out):
                    t0 = time.time()
                    p = subprocess.run([binary, "sweep", "--q", f"{path}:/layers/{layer}/q", "--k",
                                        f"{path}:/layers/{layer}/k", "--at", f"b={b}", "--heads", "all", "--vary",
                                        vary, "--mechanism", "linear,mhla", "--mixing", mixing, "--csv", out],
                                       capture_output=True, text=True)
                    if p.returncode != 0:
                        sys.exit(f"error: attnscope sweep on {f} layer {layer} b={b}: {p.stderr.strip()}")
                    with open(out + ".seconds", "w") as fh:
                        fh.write(f"{time.time() - t0:.2f}\n")
                with open(out) as fh:
                    rows += [dict(r, seed=seed, layer=layer, b=b) for r in csv.DictReader(fh)]
    return rows


def mixing_ranks(study, task):
    """Per MHLA model: the numerical rank (numpy.linalg.matrix_rank, docs/maths.md 2) of every learned Mc, its
    smallest and largest entries, and M."""
    import h5py
    out = []
    for f in sorted(x for x in os.listdir(study) if FILE.match(x) and x.startswith(f"{task}_mhla_")):
        with h5py.File(os.path.join(study, f), "r") as h:
            for layer in sorted(h["layers"], key=int):
                mc = np.asarray(h[f"layers/{layer}/mixing"], dtype=np.float64)
                for head in range(mc.shape[0]):
                    out.append((int(FILE.match(f).group(3)), int(layer), head, mc.shape[1],
                                int(np.linalg.matrix_rank(mc[head])), float(mc[head].min()), float(mc[head].max())))
    return out


def warnings_of(records):
    """The distinct warnings of the records, with how many records carry each."""
    count = defaultdict(int)
    for r in records:
        for w in r.get("warnings") or []:
            count[re.sub(r"\d+(\.\d+)?(e-?\d+)?", "#", str(w))] += 1
    return dict(count)


def _own_row(ctx, mech, path):
    """The two-stage row of (mech, path) of the models trained with mech, or None."""
    return ctx["own"][mech][0].get((mech, path))


def verdict_d_bound(ctx, d):
    """Claim 1 on the causal LM: the strictly-past block of linear attention has rank <= d; MHLA's may exceed it."""
    batches = ctx["batches"]
    ranks = {m: np.array([value(r, "past_block.rank") for r in own(batches[m][0], m)], dtype=float) for m in MECHS}
    if any(len(v) == 0 or np.isnan(v).any() for v in ranks.values()):
        return "1. *d bound (past block)*: no reading: the batch records lack `past_block.rank`."
    lin, mh, sm = ranks["linear"], ranks["mhla"], ranks["softmax"]
    e99 = {m: model_means(own(batches[m][0], m), "past_block.energy_rank_99") for m in MECHS}
    above = float(np.mean(mh > d))
    holds = lin.max() <= d and above > 0.5
    whole = ", ".join(f"{m} {_interval(_own_row(ctx, m, 'rank'), 1)}" for m in MECHS)
    return (f"1. *Linear attention's rank is at most d; MHLA lifts it*, judged on the strictly-past block "
            f"`A[128:, :128]` of the causal LM (the whole matrix has mean rank {whole} of 256: the mask decides "
            f"it). Linear: max {lin.max():.0f}, exactly d = {d} in {100 * np.mean(lin == d):.0f}% of {len(lin)} units. "
            f"MHLA with its learned Mc: {_interval(_own_row(ctx, 'mhla', 'past_block.rank'), 1)}, max {mh.max():.0f}, "
            f"above d in {100 * above:.0f}% of units (its past block sees 4 key chunks of 32, so its rank is at most "
            f"4 d = 64). Softmax: {sm.mean():.1f} of 128. Reading: {'above d' if holds else 'not above d'} at the default "
            f"tolerance (figure: past-block rank per seed against d). But the lift is thin where the tolerance does "
            f"not decide: the past block's 99% energy rank (seed means) is softmax {_seeds(e99['softmax'])}, linear "
            f"{_seeds(e99['linear'])}, MHLA {_seeds(e99['mhla'])} (MHLA - linear paired: "
            f"{_pair_cell(ctx, 'mhla', 'linear', 'past_block.energy_rank_99')}). What would change it: MHLA past-block "
            f"ranks at or below d in most units, or an energy rank no higher than linear's (paired interval reaching "
            f"0); linear's bound holds by construction (docs/maths.md 2.2), so a linear unit above d would be a bug, "
            f"not a finding.")


def verdict_vit_rank(ctx, d, mc):
    """Claim 1 on the non-causal ViT: linear attention's rank <= d by construction; MHLA's above d, and how much of
    that its learned Mc (and the rank cap) decides."""
    batches = ctx["batches"]
    ranks = {m: np.array([value(r, "rank") for r in own(batches[m][0], m)], dtype=float) for m in MECHS}
    r3 = {m: model_means(own(batches[m][0], m), "rank_at_rtol.1e-3") for m in MECHS}
    lin, mh = ranks["linear"], ranks["mhla"]
    caps = [x[4] * d for x in mc]
    eer = ctx["cross"][1].get(("mhla", "linear", "excess_effective_rank"))
    zero = eer is not None and float(eer["ci_low"]) <= 0 <= float(eer["ci_high"])
    return (f"1. *Linear attention's rank is at most d; MHLA lifts it* (non-causal, whole matrix). Linear: max "
            f"{lin.max():.0f} (d = {d}), by construction (docs/maths.md 3). MHLA with its learned Mc: "
            f"{_interval(_own_row(ctx, 'mhla', 'rank'), 1)}, above d in {100 * np.mean(mh > d):.0f}% of {len(mh)} "
            f"units; its cap rank(Mc) x d is {min(caps)} to {max(caps)} (the rank-cap sentence above wherever it is "
            f"below 256). At rtol 1e-3 (seed means): softmax {_seeds(r3['softmax'])}, linear {_seeds(r3['linear'])}, "
            f"MHLA {_seeds(r3['mhla'])}. Reading: {'linear within d, MHLA above it' if lin.max() <= d and np.mean(mh > d) > 0.5 else 'not linear within d with MHLA above it'}: "
            f"MHLA's rank exceeds d, at the default tolerance and at 1e-3 (paired MHLA - softmax at 1e-3: "
            f"{_pair_cell(ctx, 'mhla', 'softmax', 'rank_at_rtol.1e-3')}; at the default tolerance softmax's rank is "
            f"higher, {_interval(_own_row(ctx, 'softmax', 'rank'), 1)}: singular values below 1e-3 s_1). What would "
            f"change it: MHLA ranks at or below d at a tolerance that matters for the task (e.g. 1e-2), or an excess "
            f"effective rank no larger than linear's (MHLA - linear {_pair_cell(ctx, 'mhla', 'linear', 'excess_effective_rank')})"
            f"{': its interval reaches 0, so the lift in rank is matched by the content-free A0 of the learned Mc: it is what Mc allows rather than what the inputs add' if zero else ''}.")


def _seeds(means, digits=1):
    return " / ".join(f"{v:.{digits}f}" for v in means.values()) if means else "missing"


def verdict_growth(ctx, sweep_agg, ms, learned):
    """Claim 2: MHLA's rank grows with M, beyond what its mask and Mc give (excess effective rank, energy ranks),
    judged by paired differences between consecutive M on the same units (clustered intervals over seeds)."""
    rows, pairs = sweep_agg
    def curve(key):
        return [float(rows[(f"mhla M={m}", key)]["mean"]) for m in ms if (f"mhla M={m}", key) in rows]
    steps = []
    for a, b in zip(ms, ms[1:]):
        p = pairs.get((f"mhla M={a}", f"mhla M={b}", "excess_effective_rank"))
        if p:   # the pair is M=a - M=b: its negation is the step up
            steps.append((f"{a} -> {b}", -float(p["mean_diff"]), -float(p["ci_high"]), -float(p["ci_low"]),
                          float(p["p_sign"])))
    grows = bool(steps) and all(lo > 0 for _, _, lo, _, _ in steps)
    step_text = "; ".join(f"M = {b}: {m:+.2f} [{lo:.2f}, {hi:.2f}]" for b, m, lo, hi, _ in steps)
    eer, e99, rk = curve("excess_effective_rank"), curve("energy_rank_99"), curve("rank")
    mlist = ", ".join(str(m) for m in ms)
    return (f"2. *MHLA's rank grows with the number of blocks M.* The models have one M each, so growth is judged "
            f"on the MHLA models' own q/k with the preset that initialised Mc at M = {mlist} (table above; "
            f"{SWEEP_INPUTS} inputs x {ctx['sweep_seeds']} seeds x 2 layers x every head): rank {' -> '.join(f'{v:.1f}' for v in rk)}, "
            f"energy rank 99% {' -> '.join(f'{v:.1f}' for v in e99)}, excess effective rank (over the content-free "
            f"A0 at that M) {' -> '.join(f'{v:.2f}' for v in eer)}. Each step's paired change of the excess effective "
            f"rank (clustered 95% interval over seeds): {step_text}. Reading: {'rises at every step' if grows else 'does not rise at every step'} for the "
            f"excess effective rank{'' if grows else ' (not every step rises with an interval above 0)'}. At the "
            f"trained M, the learned Mc against the preset on the same q/k and inputs: " + "; ".join(learned) + ". "
            f"What would change it: models trained at several M (the study trains one M per task) whose excess "
            f"effective rank under their own learned Mc rises with M with paired intervals excluding 0.")


def verdict_sparsity(ctx):
    """Claim 3: MHLA's attention is sparser, by support-normalised entropy and entropy below baseline."""
    batches = ctx["batches"]
    means = {}
    for path in ("entropy.support_normalized_mean", "entropy_below_baseline"):
        means[path] = {m: model_means(own(batches[m][0], m), path) for m in MECHS}
    pairs = ctx["cross"][1]
    def clear(a, b, path, sign):
        """The pair's interval excludes 0 on the side `sign` (a - b)."""
        p = pairs.get((a, b, path))
        return p is not None and (float(p["ci_high"]) < 0 if sign < 0 else float(p["ci_low"]) > 0)
    sne = "entropy.support_normalized_mean"
    below = [m for m in ("linear", "softmax") if clear("mhla", m, sne, -1)]
    sharper = clear("mhla", "linear", "entropy_below_baseline", +1) and clear("mhla", "softmax", "entropy_below_baseline", +1)
    return (f"3. *MHLA's attention is sparser (lower entropy) than linear and softmax attention.* Support-normalised "
            f"entropy (seed means): " + "; ".join(f"{m} {_seeds(means[sne][m], 3)}" for m in MECHS) +
            f"; entropy below the content-free baseline (nats): " +
            "; ".join(f"{m} {_seeds(means['entropy_below_baseline'][m], 3)}" for m in MECHS) +
            f". Paired support-normalised entropy: MHLA - linear {_pair_cell(ctx, 'mhla', 'linear', sne)}; MHLA - "
            f"softmax {_pair_cell(ctx, 'mhla', 'softmax', sne)}. Reading: {'lower than both' if len(below) == 2 else 'not lower than both'} "
            f"by support-normalised entropy (MHLA below {' and '.join(below) if below else 'neither'} with a clustered "
            f"interval excluding 0); by entropy below baseline MHLA is {'the sharpest' if sharper else 'not the sharpest'} "
            f"relative to what its mask and Mc give any input (MHLA - linear "
            f"{_pair_cell(ctx, 'mhla', 'linear', 'entropy_below_baseline')}; MHLA - softmax "
            f"{_pair_cell(ctx, 'mhla', 'softmax', 'entropy_below_baseline')}), so "
            f"{'its lower entropy is learned, not only structural' if sharper else 'much of its lower entropy is the structure its mask and Mc give any input'}. "
            f"What would change it: paired differences of the other sign with clustered intervals excluding 0.")


def section(binary, work, study, task, d):
    """Markdown lines of one task's measures and verdicts, and its figures (tools/study/figures.py)."""
    import figures
    batches = {m: run_batch(binary, work, study, task, m) for m in MECHS}
    sweep_rows = run_sweeps(binary, work, study, task)
    seconds = wall_seconds(work, task)
    folders = {m: os.path.join(work, f"{task}_{m}_out") for m in MECHS}
    paths = [p for _, p in _metrics(task)]
    ctx = {"binary": binary, "work": work, "batches": batches,
           "own": {m: next(iter(run_aggregate(binary, folders[m]).values())) for m in MECHS},
           "per_seed": {m: run_aggregate(binary, folders[m], ["--by", "file"]) for m in MECHS}}
    ctx["cross"] = units_folder(binary, work, f"{task}_cross",
                                [(m, unit_values(own(batches[m][0], m), paths)) for m in ("mhla", "linear", "softmax")])
    n = {m: len(own(batches[m][0], m)) for m in MECHS}
    g = len({unit_key(r)[0] for r in own(batches["mhla"][0], "mhla")})
    lines = [f"Units: every (seed, held-out input, layer, head) of each model under its own mechanism ({n['softmax']}, "
             f"{n['linear']} and {n['mhla']} for softmax, linear and MHLA). Clusters are the {g} seeds' models "
             "(`attnscope aggregate --cluster file`): with fewer than 10 clusters an interval is the Student t interval "
             f"over the {g} seed means (attention.md 2.2, docs/maths.md 5), so it carries the spread between seeds and "
             f"not the thousands of units; sign tests are over the {g} seeds' mean differences (the smallest p {g} seeds "
             f"can give is {2 * 0.5 ** g:.3g}), `agree` says how many seeds share the mean's sign. The per-seed means and "
             "the figures show the spread they summarise. "
             "Support-normalised entropy equals the ln n_t one here: the clamped Mc has no zero among the entries the "
             "mechanism uses, and softmax and linear attention have none by construction.", ""]
    lines += table_own(ctx, task) + ["", "#### Paired between models (same seed, input, layer and head)", "",
             "Differences of per-unit values between the models trained with two mechanisms, mean [clustered 95% "
             "interval], sign-test p over the seeds (`attnscope aggregate --cluster file` over the units of both "
             "models).", ""] + table_cross(ctx, task)
    lines += ["", "#### What the learned Mc adds to the same queries and keys", "",
              "The MHLA models were also analysed under linear attention (their q/k, no Mc): the clustered paired "
              "rows of that batch.", ""] + table_mc(ctx, task)
    mc = mixing_ranks(study, task)
    if mc:
        ranks = [x[4] for x in mc]
        lines += ["", f"Learned Mc ({len(mc)} matrices, {mc[0][3]} x {mc[0][3]}): numerical rank (numpy's rule) "
                      f"{min(ranks)} to {max(ranks)}; entries from {min(x[5] for x in mc):.2g} to "
                      f"{max(x[6] for x in mc):.3g}."]
    warns = warnings_of(own(batches["mhla"][0], "mhla"))
    lines += ["", "Warnings of the MHLA records (numbers written #): " +
              ("; ".join(f"\"{w}\" ({c})" for w, c in warns.items()) if warns else
               "none: no rank-cap sentence (the learned Mc never caps MHLA below min(N, M d) here"
               + (", and causal MHLA gets no such sentence" if task == "lm" else "") + ").")]
    ctx["sweep_seeds"] = len({r["seed"] for r in sweep_rows})
    sweep_agg, ms = sweep_units(ctx, sweep_rows, task)
    lines += ["", f"#### Rank against M on the MHLA models' q/k (preset `{SWEEP[task][1]}` mixing at each M)", "",
              f"`attnscope sweep --vary {SWEEP[task][0]} --mechanism linear,mhla --mixing {SWEEP[task][1]}` on each "
              f"MHLA model, layers 0 and 1, every head, held-out inputs 0 to {SWEEP_INPUTS - 1}; mean [clustered 95% "
              "interval over seeds, then units].", ""] + table_sweep(sweep_agg, ms)
    lines += ["", "#### Figures", ""] + figures.task_figures(ctx, task, d, sweep_agg, ms)
    learned = learned_vs_preset(ctx, sweep_rows, task)
    lines += ["", "#### Readings of the paper's claims", "",
              "Descriptive: what the numbers above say of each claim. The verdicts are the rule-computed table that "
              "follows (tools/study/verdicts.py from tools/study/claims.toml), not these readings.", ""]
    lines.append(verdict_d_bound(ctx, d) if task == "lm" else verdict_vit_rank(ctx, d, mc))
    lines += [verdict_growth(ctx, sweep_agg, ms, learned), verdict_sparsity(ctx), "",
              f"(Measures of this section, from a clean work folder: {seconds[0]:.0f} s of `attnscope batch --jobs 2` and "
              f"{seconds[1]:.0f} s of sweeps, wall time on this machine.)", ""]
    return lines


def wall_seconds(work, task):
    """(batch seconds, sweep seconds) of the clean runs that made this task's outputs in `work`."""
    batch = sweep = 0.0
    for m in MECHS:
        path = os.path.join(work, f"{task}_{m}_out", "wall_seconds.txt")
        batch += float(open(path).read()) if os.path.exists(path) else float("nan")
    for f in os.listdir(work):
        if f.startswith(f"sweep_{task}_") and f.endswith(".seconds"):
            sweep += float(open(os.path.join(work, f)).read())
    return batch, sweep


def free_note(binary, work, study):
    """Markdown lines on the `free` ViT (study/free/vit_mhla_s<seed>.h5: Mc signed and shared, the authors' vision
    code), analysed like the others: how many units have a defined MHLA matrix under row normalisation."""
    folder = os.path.join(study, "free")
    files = sorted(f for f in os.listdir(folder) if FILE.match(f)) if os.path.isdir(folder) else []
    if not files:
        return []
    job = os.path.join(work, "vit_free.toml")
    with open(job, "w") as f:
        inputs = ", ".join(json.dumps(os.path.join(os.path.abspath(folder), x)) for x in files)
        f.write(f'inputs = [{inputs}]\nq = "/layers/0/q"\nk = "/layers/0/k"\nlayers = "all"\nheads = "all"\n'
                f'at = {{ b = "all" }}\nmechanisms = ["mhla"]\n')
    out = os.path.join(work, "vit_free_out")
    p = subprocess.run([binary, "batch", job, "--out", out, "--jobs", "2"], capture_output=True, text=True)
    if p.returncode not in (0, 2):   # 2: some units failed (failures.txt); their records say why
        sys.exit(f"error: attnscope batch {job} exited {p.returncode}: {p.stderr.strip()}")
    with open(os.path.join(out, "results.jsonl")) as f:
        records = [json.loads(line) for line in f]
    defined = [r for r in records if value(r, "rank") is not None]
    per_layer = {layer: sum(1 for r in records if r.get("layer") == layer and value(r, "rank") is None)
                 for layer in sorted({r.get("layer") for r in records})}
    example = next((w for r in records if value(r, "rank") is None for w in r.get("warnings") or []), "")
    import h5py
    acc = [float(h5py.File(os.path.join(folder, f), "r").attrs["test_accuracy"]) for f in files]
    return ["", f"The `free` ViT ({', '.join(files)}: Mc signed and shared across heads, test accuracy "
                f"{', '.join(f'{a:.3f}' for a in acc)}; not used above) analysed the same way: MHLA is defined on "
                f"{len(defined)} of {len(records)} units; undefined per layer {per_layer}. A row whose normaliser "
                f"is <= 0 has no attention distribution (docs/maths.md 1.4 and 4), e.g. \"{example.split(' (')[0]}\"; "
                f"the reference layer divides by such normalisers anyway in training, a possible cause of its low "
                f"accuracy.", ""]
