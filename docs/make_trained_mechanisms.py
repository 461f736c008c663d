#!/usr/bin/python3
"""Makes docs/trained-mechanisms.md and its figures (docs/figures/trained/) from the bundled models trained
with softmax, linear and MHLA attention (data/trained_{vit,lm}_{softmax,linear,mhla}.h5, made by
data/make_trained_mechanisms.py), with `attnscope batch`, `sweep` and `figure` only: every number on the
page comes from their outputs, and rerunning this script reproduces the page.

usage: docs/make_trained_mechanisms.py [ATTNSCOPE (default build/app/attnscope)] [--work DIR] [--study DIR]

--study DIR: the page from the study instead (tools/study/train.py's folder, e.g. build/study: five seeds per
mechanism, each model dumped on its whole held-out set): training results against baselines with intervals
(tools/study/report.py) and the measures over every input, layer and head with the paper's claims judged
(tools/study/measures.py, `attnscope batch` with `at = { b = "all" }`).
"""
import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "data")
FIGS = os.path.join(ROOT, "docs", "figures", "trained")
MECHS = ("softmax", "linear", "mhla")
TASKS = {
    "vit": dict(title="Vision transformer, digits at 16x16 (N = 256, d = 16; MHLA on a 4x4 block grid, M = 16)",
                attention="", query=119, figure_opts=[]),
    "lm": dict(title="Causal character model, license texts (N = 512, d = 16; MHLA on chunks of 64, M = 8)",
               attention="chunk = 64\n", query=400, figure_opts=["--chunk", "64"]),
}


def run(binary, args, **kw):
    p = subprocess.run([binary] + args, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit(f"error: attnscope {' '.join(args)} exited {p.returncode}: {p.stderr.strip()}")
    return p.stdout


def batch(binary, work, task):
    """Every layer and head of the three models of `task` under all three mechanisms (each model's learned
    Mc and block layout from its file; the LM's chunks of 64 from the job)."""
    job = os.path.join(work, f"{task}.toml")
    files = ", ".join(f'"{os.path.join(DATA, f"trained_{task}_{m}.h5")}"' for m in MECHS)
    with open(job, "w") as f:
        f.write(f'inputs = [{files}]\nq = "/layers/0/q"\nk = "/layers/0/k"\nlayers = "all"\nheads = "all"\n'
                f'mechanisms = ["softmax", "linear", "mhla"]\n\n[attention]\n{TASKS[task]["attention"]}')
    out = os.path.join(work, f"{task}_out")
    shutil.rmtree(out, ignore_errors=True)
    run(binary, ["batch", job, "--out", out])
    with open(os.path.join(out, "summary.csv")) as f:
        rows = list(csv.DictReader(f))
    with open(os.path.join(out, "results.jsonl")) as f:
        records = [json.loads(line) for line in f]
    return rows, records


def trained_with(path):
    return os.path.basename(path).split("_")[-1].split(".")[0]


def mean(rows, key):
    return float(np.mean([float(r[key]) for r in rows]))


def table_own(rows):
    """Per model under its own mechanism: per layer and head, and the model's mean."""
    lines = ["| trained with | layer | head | rank | relative rank | effective rank | normalised entropy |",
             "|---|---|---|---|---|---|---|"]
    means = {}
    for m in MECHS:
        own = [r for r in rows if trained_with(r["file"]) == m and r["mechanism"] == m]
        for r in own:
            lines.append(f"| {m} | {r['layer']} | {r['head']} | {r['rank']} | {float(r['relative_rank']):.3f} | "
                         f"{float(r['effective_rank']):.1f} | {float(r['entropy_normalized_mean']):.3f} |")
        means[m] = {k: mean(own, k) for k in ("rank", "relative_rank", "effective_rank", "entropy_normalized_mean")}
        lines.append(f"| **{m}, mean** | | | **{means[m]['rank']:.1f}** | **{means[m]['relative_rank']:.3f}** | "
                     f"**{means[m]['effective_rank']:.1f}** | **{means[m]['entropy_normalized_mean']:.3f}** |")
    return "\n".join(lines), means


def table_cross(rows):
    """Mean rank and normalised entropy of every model under every mechanism (the 'what if')."""
    lines = ["| model trained with | " + " | ".join(f"{m}: rank / entropy" for m in MECHS) + " |",
             "|---|" + "---|" * len(MECHS)]
    for t in MECHS:
        cells = []
        for m in MECHS:
            sel = [r for r in rows if trained_with(r["file"]) == t and r["mechanism"] == m]
            cells.append(f"{mean(sel, 'rank'):.1f} / {mean(sel, 'entropy_normalized_mean'):.3f}")
        lines.append(f"| {t} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def mixing_table(task):
    """The MHLA model's learned Mc per layer and head: size, numerical rank (NumPy's default tolerance,
    s_1 * M * eps) and how far it moved from its initialisation's structure."""
    path = os.path.join(DATA, f"trained_{task}_mhla.h5")
    lines = ["| layer | head | M | rank of Mc | s_min / s_1 | largest entry | zero entries (of those used) |", "|---|---|---|---|---|---|---|"]
    ranks = []
    with h5py.File(path, "r") as f:
        for layer in sorted(f["layers"], key=int):
            mc = np.asarray(f[f"layers/{layer}/mixing"], dtype=np.float64)
            for h in range(mc.shape[0]):
                s = np.linalg.svd(mc[h], compute_uv=False)
                rank = int(np.linalg.matrix_rank(mc[h]))
                ranks.append(rank)
                lines.append(f"| {layer} | {h} | {mc.shape[1]} | {rank} | {s[-1] / s[0]:.2e} | {mc[h].max():.3f} | "
                             f"{int((mc[h][allowed(task, mc.shape[1])] == 0).sum())} of {int(allowed(task, mc.shape[1]).sum())} |")
    return "\n".join(lines), ranks


def allowed(task, m):
    """The entries of an M x M mixing matrix the mechanism uses (causal: the lower triangle)."""
    return np.tril(np.ones((m, m), dtype=bool)) if task == "lm" else np.ones((m, m), dtype=bool)


def mix_zero_count(task):
    """Zeros among the entries the mechanism uses, and how many it uses."""
    with h5py.File(os.path.join(DATA, f"trained_{task}_mhla.h5"), "r") as f:
        mcs = [np.asarray(f[f"layers/{layer}/mixing"]) for layer in f["layers"]]
    zeros = sum(int((m[:, allowed(task, m.shape[1])] == 0).sum()) for m in mcs)
    return zeros, sum(m.shape[0] * int(allowed(task, m.shape[1]).sum()) for m in mcs)


def sweep_m(binary, work, task):
    """MHLA's rank against the block count on the MHLA model's queries and keys (layer 1, every head), with
    preset mixing at each M (a learned Mc exists only for its own M)."""
    path = os.path.join(DATA, f"trained_{task}_mhla.h5")
    vary = "m=1,2,4,8" if task == "vit" else "m=1,2,4,8,16,32"
    mixing = "cos" if task == "vit" else "causal-local"
    out = os.path.join(work, f"{task}_sweep.csv")
    run(binary, ["sweep", "--q", path + ":/layers/1/q", "--k", path + ":/layers/1/k", "--heads", "all", "--vary", vary,
                 "--mechanism", "linear,mhla", "--mixing", mixing, "--csv", out,
                 "--plot", os.path.join(FIGS, f"{task}_rank_vs_m.svg")])
    with open(out) as f:
        rows = list(csv.DictReader(f))
    points = {}
    for r in rows:
        if r["mechanism"] == "mhla":
            points.setdefault(int(r["m"]), []).append((float(r["rank"]), float(r["effective_rank"])))
    return {m: tuple(np.mean(v, axis=0)) for m, v in sorted(points.items())}, mixing


def figures(binary, task):
    """Each model's own attention (layer 1, head 0) as a map, and one query's attention."""
    opts = TASKS[task]["figure_opts"]
    for m in MECHS:
        path = os.path.join(DATA, f"trained_{task}_{m}.h5")
        sel = ["--q", path + ":/layers/1/q", "--k", path + ":/layers/1/k", "--head", "0", "--mechanism", m]
        run(binary, ["figure", "--view", "maps"] + sel + (opts if m == "mhla" else []) +
            ["--preset", "column", "--out", os.path.join(FIGS, f"{task}_{m}_maps.png"), "--dpi", "150"])
        run(binary, ["figure", "--view", "query"] + sel + (opts if m == "mhla" else []) +
            ["--query", str(TASKS[task]["query"]), "--preset", "column", "--out",
             os.path.join(FIGS, f"{task}_{m}_query.png"), "--dpi", "150"])
    path = os.path.join(DATA, f"trained_{task}_mhla.h5")
    run(binary, ["figure", "--view", "mixing", "--q", path + ":/layers/1/q", "--k", path + ":/layers/1/k", "--head", "0",
                 "--mechanism", "mhla"] + opts + ["--preset", "column", "--out", os.path.join(FIGS, f"{task}_mhla_mixing.png"),
                                                  "--dpi", "150"])


def model_line(task, m):
    with h5py.File(os.path.join(DATA, f"trained_{task}_{m}.h5"), "r") as f:
        a = f.attrs
        if task == "vit":
            return f"| {m} | {a['train_loss']:.3f} | {a['train_accuracy']:.3f} | {a['test_accuracy']:.3f} |"
        return f"| {m} | {a['train_loss']:.3f} | {a['val_loss']:.3f} | {a['val_bits_per_char']:.3f} |"


def verdicts(task, means, rows, mix_ranks, sweep, d):
    causal = task == "lm"
    linear = [r for r in rows if trained_with(r["file"]) == "linear" and r["mechanism"] == "linear"]
    v = []
    if not causal:
        top = max(int(r["rank"]) for r in linear)
        v.append(f"1. *Linear attention's rank stays at most d.* **{'Holds' if top <= d else 'Does not hold'}**: the "
                 f"linear-trained model's largest rank is {top} with d = {d} (N = {rows[0]['n']}). This holds by "
                 f"construction (docs/maths.md 3: rank <= rank of the features), so it checks the tool more than the model.")
    else:
        v.append(f"1. *Linear attention's rank stays at most d.* **Not testable by rank when causal**: a causal matrix is "
                 f"lower triangular with a positive diagonal, so every mechanism's rank is close to N (linear: "
                 f"{means['linear']['rank']:.1f} of {rows[0]['n']}; the few missing are rows whose diagonal falls below "
                 f"the rank tolerance). The d bound is a statement about non-causal attention (the ViT above). The "
                 f"effective rank, which weighs the spectrum, separates them: softmax {means['softmax']['effective_rank']:.1f}, "
                 f"linear {means['linear']['effective_rank']:.1f}, MHLA {means['mhla']['effective_rank']:.1f}.")
    ms = list(sweep)
    k = 1 if causal else 0   # causal: effective rank (the rank is ~N for every M)
    what = "effective rank" if causal else "rank"
    grows = all(sweep[a][k] <= sweep[b][k] + 1e-9 for a, b in zip(ms, ms[1:])) and sweep[ms[-1]][k] > sweep[ms[0]][k]
    v.append(f"2. *MHLA's rank grows with the number of blocks M.* **{'Holds' if grows else 'Does not hold'}** for the "
             f"{what} on the MHLA model's layer 1 (mean over heads, preset mixing at each M): " +
             ", ".join(f"M = {m}: {p[k]:.1f}" for m, p in sweep.items()) +
             f". At the trained M the learned Mc has rank {min(mix_ranks)} to {max(mix_ranks)} of "
             f"{'16' if task == 'vit' else '8'}.")
    e = {m: means[m]["entropy_normalized_mean"] for m in MECHS}
    sparser = e["mhla"] < e["linear"] and e["mhla"] < e["softmax"]
    v.append(f"3. *MHLA's attention is sparser (lower entropy) than linear and softmax attention.* "
             f"**{'Holds' if sparser else 'Does not hold'}** at this scale: mean normalised entropy of each model under "
             f"its own mechanism: softmax {e['softmax']:.3f}, linear {e['linear']:.3f}, MHLA {e['mhla']:.3f}"
             f"{'' if sparser else ' (MHLA is ' + ('below linear but not below softmax' if e['mhla'] < e['linear'] else 'not below linear') + ')'}.")
    return "\n".join(v)


def task_verdicts(task, work, study):
    """The task's aggregate file (tools/study/task_aggregate.py: the clustered measure rows of WORK/<task>_cross and
    every model's score with the control without attention) in tools/study/results/<task>/, then the verdict rows
    of this task computed by tools/study/verdicts.py from tools/study/claims.toml: never typed here."""
    import task_aggregate
    import verdicts
    results = os.path.join(ROOT, "tools", "study", "results")
    cross = os.path.join(work, f"{task}_cross", "aggregate_cluster_file.json")
    doc = task_aggregate.task_document(task, study, cross if os.path.isfile(cross) else None)
    os.makedirs(os.path.join(results, task), exist_ok=True)
    with open(os.path.join(results, task, "aggregate.json"), "w") as f:
        json.dump(doc, f, indent=1)
    with open(os.path.join(ROOT, "tools", "study", "claims.toml"), "rb") as f:
        rules = verdicts.tomllib.load(f)
    rows = [r for r in verdicts.verdicts(rules, results) if r["task"] in (task, "all")]
    passed, why = verdicts.gate(task, rules, results)
    return ["#### Verdicts (rule-computed)", "",
            f"From `tools/study/claims.toml` and `tools/study/results/{task}/aggregate.json` by "
            f"`tools/study/verdicts.py` (Holm over every claim and task the script tests; docs/associative-recall.md "
            f"has the whole table). Validity gate: {'passed' if passed else 'failed'} ({why}).", "",
            verdicts.markdown(rows), ""]


def study_page(binary, work, study):
    """docs/trained-mechanisms.md from a study folder (see the usage above); every number from its files and
    from `attnscope batch` and `sweep` over them."""
    sys.path.insert(0, os.path.join(ROOT, "tools", "study"))
    import measures
    import report

    t0 = time.time()
    clean = not os.listdir(work)   # an empty work folder: this run's wall time is the whole measures half
    models = report.load_models(study)
    base = json.load(open(os.path.join(study, "baselines.json")))
    seeds = sorted({s for (_, _, s) in models})
    out = ["# Models trained with each mechanism: softmax, linear and MHLA compared", "",
           "Made by `docs/make_trained_mechanisms.py --study DIR` from the models of `tools/study/train.py` (rerun both",
           "to reproduce every number): the same models, split and budget, trained with each mechanism at seeds "
           f"{', '.join(map(str, seeds))}; MHLA's Mc parametrisation is each file's `parametrisation` attribute",
           "(`clamp`: Mc in [1e-5, 1] after each step, one per head, as the authors' language-model code; their vision",
           "code's `free`, signed and shared across heads, reached 44% test accuracy on the ViT at seed 0: Adam's steps",
           "flip the sign of entries near 1/16 within tens of steps). Each model is dumped on its whole held-out set and",
           "analysed on every input, layer and head under its own mechanism with its learned Mc (`attnscope batch`,",
           "`at = { b = \"all\" }`); the measures are those of docs/maths.md 2.2 (content-free baseline A0, excess",
           "effective rank, entropy below baseline, support-normalised entropy, energy ranks, rank against the tolerance,",
           "the causal past block) and the statistics those of docs/maths.md 5. The MHLA paper (arXiv 2601.07832) makes",
           "three claims; each task ends with readings of them and the verdicts computed by tools/study/verdicts.py from the",
           "rules of tools/study/claims.toml, fixed before the models were measured. A small-model analogue of the paper's",
           "settings, not a reproduction; the control without attention (`none`) is each task's validity gate.", ""]
    at_reproduce = len(out)
    for task, title, section in (("vit", "Vision transformer, digits at 16x16 (N = 256, d = 16; MHLA on a 4x4 "
                                  "block grid, M = 16)", lambda m, b: report.vit_section(m, b, study)),
                                 ("lm", "Causal character model, license texts (N = 256, d = 16; MHLA on chunks of "
                                  "32, M = 8)", lambda m, b: report.lm_section(m, b, study))):
        out += [f"## {title}", "", "### Training and baselines", ""] + section(models, base)
        out += ["### Measures over every held-out input, layer and head", ""]
        out += measures.section(binary, work, study, task, d=16)
        out += task_verdicts(task, work, study)
        if task == "vit":
            out += measures.free_note(binary, work, study)
    if clean:
        with open(os.path.join(work, "page_clean_seconds.txt"), "w") as f:
            f.write(f"{time.time() - t0:.0f}\n")
    out[at_reproduce:at_reproduce] = reproduce(models, study, work, time.time() - t0)
    with open(os.path.join(ROOT, "docs", "trained-mechanisms.md"), "w") as f:
        f.write("\n".join(out))
    print(f"wrote docs/trained-mechanisms.md from {study} (work files in {work})")


def reproduce(models, study, work, script_seconds):
    """How to redo the page from a clean checkout, and how long each part took here: training (the models'
    train_seconds), the measures (the batches' and sweeps' wall time from a clean work folder, recorded in it by
    tools/study/measures.py) and this run of the script."""
    import measures
    train = sum(float(a["train_seconds"]) for a in models.values())
    none = [json.load(open(os.path.join(study, f))) for f in sorted(os.listdir(study))
            if "_none_s" in f and f.endswith(".json")]   # both tasks' controls without attention
    train_none = sum(float(a["train_seconds"]) for a in none)
    batch, sweep = (sum(x) for x in zip(*(measures.wall_seconds(work, t) for t in ("vit", "lm"))))
    path = os.path.join(work, "page_clean_seconds.txt")   # written by a run of this script on an empty work folder
    clean_text = (f"; the whole script on an empty work folder took {float(open(path).read()) / 60:.0f} min"
                  if os.path.exists(path) else "")
    return ["## Reproducing this page", "",
            "From a clean checkout (Debian's python3-torch, python3-h5py, python3-numpy, python3-sklearn, "
            "python3-matplotlib):", "",
            "<!-- docs-test: skip trains the 40 models of this page (about 0.8 h); the page says how long -->",
            "```sh", "tools/build.sh                      # build/app/attnscope",
            "/usr/bin/python3 tools/study/train.py --out build/study --seeds 0,1,2,3,4 --controls   # resumable",
            "/usr/bin/python3 docs/make_trained_mechanisms.py build/app/attnscope --study build/study --work build/study_work",
            "```", "",
            f"How long it takes on this machine kind (2 cores, shared with C++ builds and other jobs; wall time): "
            f"training {train / 3600:.1f} h summed over the {len(models)} models (each file's `train_seconds`, one "
            f"thread each) plus {train_none / 60:.0f} min for the {len(none)} controls without attention; the "
            f"measures, from an empty work folder, {batch / 60:.0f} min of `attnscope batch --jobs 2` and "
            f"{sweep / 60:.0f} min of sweeps (each task's share at the end of its section); then this run of the "
            f"page's script {script_seconds / 60:.1f} min with those in its work folder (its `attnscope aggregate` "
            f"runs, the paired-unit folders and the figures)" + clean_text + f". About "
            f"{train / 3600 + train_none / 3600 + (batch + sweep + script_seconds) / 3600:.1f} h in all, plus the build.", ""] + \
        end_to_end_text()


def end_to_end_text():
    """The one run from a clean checkout (tools/study/results/trained_end_to_end.json, its times from that run's
    log) and each claim's verdict in this run beside the earlier run's (tools/study/results/earlier_run: the
    aggregates of the models trained before, on another machine), both computed by tools/study/verdicts.py."""
    import verdicts
    results = os.path.join(ROOT, "tools", "study", "results")
    out = []
    path = os.path.join(results, "trained_end_to_end.json")
    if os.path.isfile(path):
        e = json.load(open(path))
        total = e["build_seconds"] + e["train_seconds"] + e["page_seconds"]
        out += [f"Measured in one run on {e['date']}, on {e['machine']}, shared with {e['shared_with']}: the build "
                f"{e['build_seconds'] / 60:.1f} min, training every model and control {e['train_seconds'] / 60:.1f} min, "
                f"the page {e['page_seconds'] / 60:.1f} min: **{total / 60:.0f} min** from the checkout to this page "
                f"(wall time; `{path.replace(ROOT + '/', '')}`, from {e['log']}).", ""]
    earlier = os.path.join(results, "earlier_run")
    if os.path.isdir(earlier):
        with open(os.path.join(ROOT, "tools", "study", "claims.toml"), "rb") as f:
            rules = verdicts.tomllib.load(f)
        now = {(r["claim"], r["task"]): r for r in verdicts.verdicts(rules, results) if r["task"] in ("vit", "lm")}
        before = {(r["claim"], r["task"]): r for r in verdicts.verdicts(rules, earlier) if r["task"] in ("vit", "lm")}
        same = sum(1 for k in now if k in before and now[k]["verdict"] == before[k]["verdict"])
        out += ["How stable the verdicts are: the models of this page were trained again from scratch on another machine "
                "of the same kind (PyTorch's CPU kernels give models that differ in their last bits, and the training "
                "amplifies that), with the same seeds. Each claim's verdict from this run's aggregates and from the "
                f"earlier run's (`tools/study/results/earlier_run`), both by `tools/study/verdicts.py`: {same} of "
                f"{len(now)} the same.", "",
                "| claim | task | primary measure | this run | earlier run |", "|---|---|---|---|---|"]
        for key, r in now.items():
            b = before.get(key)

            def cell(x):
                if x is None:
                    return "-"
                if "mean_diff" in x:
                    return f"**{x['verdict']}**: {x['mean_diff']:+.4g} [{x['ci_low']:.4g}, {x['ci_high']:.4g}]"
                return f"**{x['verdict']}**"
            out.append(f"| {r['text']} | {r['task']} | {r.get('metric', '-')} | {cell(r)} | {cell(b)} |")
        out.append("")
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("binary", nargs="?", default=os.path.join(ROOT, "build", "app", "attnscope"))
    p.add_argument("--work", default=None)
    p.add_argument("--study", default=None, help="a tools/study/train.py folder: the page from the study")
    a = p.parse_args()
    binary = os.path.abspath(a.binary)
    work = a.work or tempfile.mkdtemp(prefix="attnscope_trained_")
    os.makedirs(work, exist_ok=True)
    if a.study:
        return study_page(binary, work, a.study)
    os.makedirs(FIGS, exist_ok=True)
    out = ["# Models trained with each mechanism: softmax, linear and MHLA compared", "",
           "Made by `docs/make_trained_mechanisms.py` (rerun it to reproduce every number and figure here) from the",
           "bundled models of `data/make_trained_mechanisms.py`: the same model, seed, data order and training budget,",
           "trained three times, once with each mechanism (the reference layers of `tools/python/attnscope_layers.py`,",
           "docs/maths.md 1.1-1.6; MHLA with a learned mixing matrix Mc per head, recorded next to the queries and keys).",
           "Each model is analysed under its own mechanism with its own Mc (`attnscope batch` over every layer and head;",
           "the file's `mixing` attribute names the Mc, no option needed). The MHLA paper (arXiv 2601.07832) makes",
           "three claims this page checks at this (small) scale; the verdicts are stated as found.", ""]
    for task, spec in TASKS.items():
        rows, _ = batch(binary, work, task)
        own, means = table_own(rows)
        mix, mix_ranks = mixing_table(task)
        sweep, mixing = sweep_m(binary, work, task)
        figures(binary, task)
        d = int(rows[0]["d"])
        out += [f"## {spec['title']}", "", "Training (from each file's attributes):", ""]
        if task == "vit":
            out += ["| trained with | train loss | train accuracy | test accuracy (297 digits) |", "|---|---|---|---|"]
        else:
            out += ["| trained with | train loss (nats/char) | held-out loss | held-out bits/char |", "|---|---|---|---|"]
        out += [model_line(task, m) for m in MECHS] + [""]
        out += ["### Each model under its own mechanism", "", own, ""]
        out += ["### Every model under every mechanism (mean over layers and heads; rank / normalised entropy)", "",
                "The diagonal is the table above; off the diagonal, a model's queries and keys under a mechanism it",
                "was not trained with (MHLA there with the preset mixing, as it has no learned Mc).", "",
                table_cross(rows), ""]
        out += ["### Attention of layer 1, head 0", "",
                "| softmax-trained | linear-trained | MHLA-trained |", "|---|---|---|",
                "| " + " | ".join(f"![{m}](figures/trained/{task}_{m}_maps.png)" for m in MECHS) + " |",
                "| " + " | ".join(f"![{m} query](figures/trained/{task}_{m}_query.png)" for m in MECHS) + " |", "",
                f"Second row: the attention of query {spec['query']} over the {'image' if task == 'vit' else 'text'}.", ""]
        zeros, total = mix_zero_count(task)
        out += ["### MHLA's learned mixing matrices", "", mix, "",
                f"{zeros} of the {total} entries the mechanism uses ended at zero: these models' layers keep Mc non-negative as relu(W) (parametrisation "
                "`relu` of tools/python/attnscope_layers.py), and an entry that training drives below zero gets no gradient "
                "afterwards. The layer's `clamp` and `free` parametrisations keep every block pair trainable (the study of "
                "tools/study/train.py uses them); these models show what relu does.", "",
                f"![Mc, layer 1 head 0](figures/trained/{task}_mhla_mixing.png)", "",
                f"MHLA's rank against M on the MHLA model's queries and keys (layer 1, `{mixing}` mixing at each M):",
                "", f"![rank against M](figures/trained/{task}_rank_vs_m.svg)", ""]
        out += ["### Verdicts", "", verdicts(task, means, rows, mix_ranks, sweep, d), ""]
    with open(os.path.join(ROOT, "docs", "trained-mechanisms.md"), "w") as f:
        f.write("\n".join(out))
    print(f"wrote docs/trained-mechanisms.md and {FIGS} (work files in {work})")


if __name__ == "__main__":
    main()
