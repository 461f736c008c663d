"""The training half of docs/trained-mechanisms.md from a study folder (tools/study/train.py): each model's
held-out result with its 95% interval, the baselines on the same units (trigram on the same test windows,
logistic regression on the same digits), and paired comparisons (per window / per image: mean difference,
bootstrap 95% interval, sign-test p). Every number comes from the folder's files.

usage: tools/study/report.py STUDY_DIR   (prints Markdown; docs/make_trained_mechanisms.py --study uses it)"""
import glob
import json
import os
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from baselines import bootstrap_mean, paired  # noqa: E402

MECHS = ("softmax", "linear", "mhla")


def load_models(study):
    """{(task, mechanism, seed): attributes} of every finished model file."""
    out = {}
    for path in sorted(glob.glob(os.path.join(study, "*_s*.h5"))):
        if path.endswith(".part.h5"):
            continue
        with h5py.File(path, "r") as f:
            a = {k: f.attrs[k] for k in f.attrs}
        if "task" not in a:   # not a finished model (a placeholder of a model being retrained)
            continue
        out[(str(a["task"]), str(a["mechanism"]), int(a["seed"]))] = dict(a, file=os.path.basename(path))
    return out


def param(a):
    """The Mc parametrisation of an MHLA model (softmax and linear have no Mc)."""
    return str(a["parametrisation"]) if a["mechanism"] == "mhla" else "n/a"


def fmt_ci(lo, hi, digits=3):
    return f"[{lo:.{digits}f}, {hi:.{digits}f}]"


def fmt_paired(p, digits=3):
    return (f"{p['mean_diff']:+.{digits}f} {fmt_ci(p['ci_low'], p['ci_high'], digits)}, "
            f"p = {p['p_sign']:.2g} (n = {p['n']})")


def controls(study, task):
    """The task's models without attention (train.py --controls): their JSON results, by seed."""
    return [json.load(open(p)) for p in sorted(glob.glob(os.path.join(study, f"{task}_none_s*.json")))] if study else []


def vit_section(models, base, study=None):
    lr = base["logistic_16x16"]
    lines = ["| trained with | seed | parametrisation | test accuracy [95% Wilson] | minus logistic regression "
             "(per digit: mean [95% bootstrap], sign-test p) | train seconds |", "|---|---|---|---|---|---|"]
    for m in MECHS:
        for (task, mech, seed), a in sorted(models.items()):
            if task != "vit" or mech != m:
                continue
            lo, hi = a["test_accuracy_ci95"]
            p = paired(a["test_correct"], lr["test_correct"])
            lines.append(f"| {m} | {seed} | {param(a)} | {a['test_accuracy']:.3f} {fmt_ci(lo, hi)} | "
                         f"{fmt_paired(p)} | {a['train_seconds']:.0f} |")
    for a in controls(study, "vit"):   # the same ViT without attention: per-pixel MLPs and the mean-token readout
        p = paired(a["test_correct"], lr["test_correct"])
        lines.append(f"| none (no attention) | {a['seed']} | | {a['test_accuracy']:.3f} "
                     f"{fmt_ci(*a['test_accuracy_ci95'])} | {fmt_paired(p)} | {a['train_seconds']:.0f} |")
    lo, hi = lr["test_accuracy_ci95"]
    lines += ["", f"Logistic regression on the raw 16x16 pixels the models see (same split): "
                  f"{lr['test_accuracy']:.3f} {fmt_ci(lo, hi)}; on the original 8x8 pixels "
                  f"{base['logistic_8x8']['test_accuracy']:.3f}."]
    return lines + [""] + seed_summary(models, "vit", "test_accuracy", "test accuracy", controls(study, "vit"))


def lm_section(models, base, study):
    tri = base["trigram"]
    lines = ["| trained with | seed | parametrisation | held-out bits/char [95% bootstrap over windows] | minus "
             "trigram (per window: mean [95% bootstrap], sign-test p) | train seconds |", "|---|---|---|---|---|---|"]
    for m in MECHS:
        for (task, mech, seed), a in sorted(models.items()):
            if task != "lm" or mech != m:
                continue
            lo, hi = a["test_bits_ci95"]
            p = paired(a["test_window_bits"], tri["test_window_bits"])
            lines.append(f"| {m} | {seed} | {param(a)} | {a['test_bits_per_char']:.3f} {fmt_ci(lo, hi)} | "
                         f"{fmt_paired(p)} | {a['train_seconds']:.0f} |")
    for a in controls(study, "lm"):   # the control without attention
        p = paired(a["test_window_bits"], tri["test_window_bits"])
        lines.append(f"| none (convolution only) | {a['seed']} | | {a['test_bits_per_char']:.3f} "
                     f"{fmt_ci(*a['test_bits_ci95'])} | {fmt_paired(p)} | {a['train_seconds']:.0f} |")
    lo, hi = tri["test_bits_ci95"]
    lines += ["", f"Interpolated trigram on the same {tri['test_windows']} windows (history limited to the window as the "
                  f"models' is; weights {tri['weights_l3_l2_l1_l0']} chosen on the validation split, "
                  f"{tri['validation_bits_per_char']:.3f} bits/char there): {tri['test_bits_per_char']:.3f} {fmt_ci(lo, hi)}."]
    return lines + [""] + seed_summary(models, "lm", "test_bits_per_char", "held-out bits/char", controls(study, "lm"))


def seed_summary(models, task, key, label, none=()):
    """Across seeds: mean, range and (5 or more seeds) a bootstrap interval over seeds; paired by seed between
    mechanisms (the same seed gives the same initialisation stream and data order). `none`: the controls."""
    lines = [f"Across seeds ({label}):", ""]
    vals = {m: {s: float(a[key]) for (t, mm, s), a in models.items() if t == task and mm == m} for m in MECHS}
    vals["none"] = {int(a["seed"]): float(a[key]) for a in none}
    for m in list(MECHS) + (["none"] if none else []):
        v = np.array(list(vals[m].values()))
        if len(v) == 0:
            lines.append(f"- {m}: no finished model")
            continue
        # a percentile bootstrap of 3 values is their range: the paired unit-level intervals carry the inference
        ci = f", 95% bootstrap over seeds {fmt_ci(*bootstrap_mean(v))}" if len(v) >= 5 else ""
        lines.append(f"- {m}: mean {v.mean():.3f} over {len(v)} seeds (range {v.min():.3f} to {v.max():.3f}{ci})")
    return lines + [""]


def main():
    study = sys.argv[1]
    models = load_models(study)
    base = json.load(open(os.path.join(study, "baselines.json")))
    print("\n".join(["### Vision transformer: training and baseline", ""] + vit_section(models, base, study) +
                    ["### Character model: training and baseline", ""] + lm_section(models, base, study)))


if __name__ == "__main__":
    main()
