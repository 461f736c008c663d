#!/usr/bin/python3
"""The study of trained mechanisms (docs/trained-mechanisms.md): trains the same two small models with softmax,
linear and MHLA attention (the reference layers of tools/python/attnscope_layers.py; everything else identical:
split, budget, seed) at several seeds, measures them against baselines on the same held-out data, and dumps each
model on its WHOLE held-out set in one file (the bridge's batch axis: `--at b=I`, `--at b=all`).

  vit_<mechanism>_s<seed>.h5  a vision transformer (2 layers, 2 heads, d_model 32) on scikit-learn's 8x8 digits
        upsampled to 16x16, one token per pixel (N = 256), class from the mean token; MHLA on a 4x4 block grid
        (M = 16), Mc initialised from `cos`, parametrisation `clamp`, one Mc per head (`free`, signed and shared as
        in the authors' vision code, reached 44% test accuracy at seed 0: Adam's steps of ~lr flip the sign of
        entries near 1/16 within tens of steps, and row sums of a signed Mc pass near 0). Dumped on the 297 held-out digits: q, k [297, 2, 256, 16] per layer (attributes labels,
        predicted, digits_index, test accuracy with its Wilson 95% interval).
  lm_<mechanism>_s<seed>.h5   a causal character model (2 layers, 4 heads, d_model 64, context 256) on the
        license texts in /usr/share/common-licenses: train the first 90%, validation the next 5% (the trigram's
        weights), test the last 5% in consecutive windows; MHLA on chunks of 32 (M = 8), Mc lower triangular,
        initialised from `causal-local`, parametrisation `clamp` (W in [1e-5, 1] after each step, one Mc per head:
        the authors' language-model code). Dumped on every test window: q, k [W, 4, 256, 16] (attributes texts,
        test_window_bits, test bits/char with a bootstrap 95% interval over windows). Analyse MHLA with --chunk 32.
  <task>_none_s<seed>.json  with --controls: the same model without attention (the ViT keeps its per-pixel MLPs and
        mean-token readout, the LM its convolution), its held-out result only (nothing to record): the gate of
        tools/study/claims.toml asks softmax attention to beat it.
  baselines.json  the interpolated trigram on the same test windows (weights tuned on the validation split) and
        logistic regression on the raw 16x16 pixels of the same digit split, with intervals and per-unit results.
  summary.json    every trained model's metrics (from the files' attributes), rewritten after each model.

Resumable: a model whose file exists is skipped (files are written atomically). Logs go to stdout (the
launcher, tools/study/run_study.sh, sends them to OUT/train_<task>.log).

usage: tools/study/train.py [vit|lm ...] [--out build/study] [--seeds 0,1,2] [--mechanisms softmax,linear,mhla]
       [--threads 1] [--lm-steps S] [--vit-epochs E] [--baselines-only]
"""
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import glob  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
for sub in ("tools/python", "data", "tools/study"):
    sys.path.insert(0, os.path.join(ROOT, sub))
from attnscope_dump import AttnScopeRecorder  # noqa: E402
from attnscope_layers import constrain_, record_reference_layer  # noqa: E402
from baselines import Trigram, bootstrap_mean, logistic_regression, wilson, window_targets  # noqa: E402
from make_learned_samples import license_text  # noqa: E402
from make_trained_mechanisms import Model, digits16  # noqa: E402

MECHANISMS = ("softmax", "linear", "mhla")
VIT = dict(width=32, heads=2, depth=2, epochs=20, batch=64, lr=3e-3, weight_decay=0.05, test=297,
           mhla=dict(grid=(16, 16), block_grid=(4, 4), mixing="cos", parametrisation="clamp", per_head=True))
LM = dict(width=64, heads=4, depth=2, context=256, conv=3, steps=400, batch=16, lr=3e-3, weight_decay=0.01,
          mhla=dict(chunk=32, mixing="causal-local", parametrisation="clamp", per_head=True))
LN2 = math.log(2)


def seeded(seed: int, salt: int) -> int:
    """One seed per (study seed, use): model initialisation and data order differ between seeds, not the split."""
    return 1000 * seed + salt


class ShortConvModel(Model):
    """The LM of data/make_trained_mechanisms.py with a causal depthwise convolution of ``conv`` taps after the
    embedding (h_t += sum_j w_j h_{t-j}, j < conv), as the authors' language models have (short convolutions):
    each token then sees the conv - 1 characters before it without attention, so the n-gram statistics are
    learned in a fraction of the steps, and beating a trigram model (conv = 3: the same local context) needs what
    attention brings from further back. The attention layers and what the bridge records are unchanged."""

    def __init__(self, *args, conv=3, **kwargs):
        super().__init__(*args, **kwargs)
        width = self.pos.shape[-1]
        self.conv = nn.Conv1d(width, width, conv, groups=width, padding=conv - 1) if conv > 1 else None

    def forward(self, x):
        h = self.embed(x) + self.pos[:, :x.shape[1]]
        if self.conv is not None:   # padding conv - 1 on both sides; the first N outputs are causal
            h = h + self.conv(h.transpose(1, 2))[..., :h.shape[1]].transpose(1, 2)
        for b in self.blocks:
            h = b(h)
        return self.head(self.norm(h))


class NoAttention(nn.Module):
    """The control of ``--controls``: an attention layer that contributes nothing (the block keeps its MLP)."""

    def forward(self, x):
        return torch.zeros_like(x)


def record_all(model, x, out, mechanism, **save):
    rec = AttnScopeRecorder(model, name=f"{mechanism}-trained", mha=False)
    for layer in model.attention_layers:
        rec.add(layer, record_reference_layer)
    with torch.no_grad(), rec:
        logits = model(x)
    rec.save(out, batch="all", values=False, **save)
    return logits


# -- ViT ---------------------------------------------------------------------------------------------------------
def vit_split():
    """The digits split of data/make_trained_mechanisms.py: 297 held out, the rest trained on (fixed)."""
    X, y = digits16()
    perm = torch.randperm(len(X), generator=torch.Generator().manual_seed(4))
    return X, y, perm[VIT["test"]:], perm[:VIT["test"]]


def train_vit(mechanism, seed, out):
    X, y, train_idx, test_idx = vit_split()
    torch.manual_seed(seeded(seed, 3))
    model = Model("linear" if mechanism == "none" else mechanism, VIT["width"], VIT["heads"], VIT["depth"], 256, False,
                  dict(VIT["mhla"]), classes=10)
    if mechanism == "none":   # the control (issue 32): the same ViT without attention, its tokens mixed only by the mean
        for b in model.blocks:
            b.attn = NoAttention()
    epochs, batch = VIT["epochs"], VIT["batch"]
    steps = epochs * math.ceil(len(train_idx) / batch)
    opt = torch.optim.AdamW(model.parameters(), lr=VIT["lr"], weight_decay=VIT["weight_decay"])
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=VIT["lr"], total_steps=steps, pct_start=0.1)
    g = torch.Generator().manual_seed(seeded(seed, 5))
    tokens = lambda imgs: imgs.flatten(1).unsqueeze(-1)  # noqa: E731  pixel (r, c) is token r * 16 + c
    t0 = time.time()
    for epoch in range(epochs):
        model.train()
        order = train_idx[torch.randperm(len(train_idx), generator=g)]
        total, n = 0.0, 0
        for i in range(0, len(order), batch):
            b = order[i:i + batch]
            loss = F.cross_entropy(model(tokens(X[b])), y[b])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            constrain_(model)
            total, n = total + loss.item() * len(b), n + len(b)
        print(f"  vit/{mechanism}/s{seed} epoch {epoch:3d}  train loss {total / n:.3f}  ({time.time() - t0:.0f} s)",
              flush=True)
    seconds = time.time() - t0
    model.eval()
    with torch.no_grad():
        acc_train = (model(tokens(X[train_idx])).argmax(1) == y[train_idx]).float().mean().item()
    attrs = vit_attrs(mechanism, seed, y, test_idx, None, total / n, acc_train, seconds)
    if mechanism == "none":   # nothing to record: the result only, as the LM's control
        with torch.no_grad():
            predicted = model(tokens(X[test_idx])).argmax(1)
        correct = (predicted == y[test_idx]).numpy()
        lo, hi = wilson(int(correct.sum()), len(correct))
        attrs.update(predicted=predicted.tolist(), test_correct=correct.astype(int).tolist(),
                     test_accuracy=float(correct.mean()), test_accuracy_ci95=[lo, hi])
        with open(out + ".part", "w") as f:
            json.dump(attrs, f, indent=1)
        os.replace(out + ".part", out)
    else:
        logits = record_all(model, tokens(X[test_idx]), out + ".part.h5", mechanism, grid=(16, 16), causal=False,
                            attrs=attrs)
        predicted = logits.argmax(1)
        correct = (predicted == y[test_idx]).numpy()
        finish_vit(out, predicted, correct)
    print(f"vit/{mechanism}/s{seed}: test accuracy {correct.mean():.4f} {wilson(int(correct.sum()), len(correct))} "
          f"({len(correct)} held out), train {acc_train:.4f}, {seconds:.0f} s -> {out}", flush=True)


def vit_attrs(mechanism, seed, y, test_idx, predicted, train_loss, acc_train, seconds):
    mhla = VIT["mhla"]
    return {"task": "vit", "mechanism": mechanism, "seed": seed, "block_grid": list(mhla["block_grid"]),
            "parametrisation": mhla["parametrisation"] if mechanism == "mhla" else "none",
            "mixing_per_head": bool(mhla["per_head"]) if mechanism == "mhla" else False,
            "mixing_init": mhla["mixing"] if mechanism == "mhla" else "none",
            "labels": y[test_idx].tolist(), "digits_index": test_idx.tolist(),
            "training": f"{VIT['epochs']} epochs of AdamW (batch {VIT['batch']}, lr {VIT['lr']} one-cycle, weight decay "
                        f"{VIT['weight_decay']}) on {1797 - VIT['test']} of sklearn's 1797 8x8 digits upsampled to "
                        f"16x16 (one token per pixel, mean-token readout); study seed {seed}",
            "train_loss": round(train_loss, 4), "train_accuracy": round(acc_train, 4),
            "train_seconds": round(seconds, 1), "threads": torch.get_num_threads()}


def finish_vit(out, predicted, correct):
    """Adds the held-out results to the dumped file and moves it into place (a file in place is a finished model)."""
    import h5py

    lo, hi = wilson(int(correct.sum()), len(correct))
    with h5py.File(out + ".part.h5", "a") as f:
        f.attrs["predicted"] = predicted.numpy().astype(np.int64)
        f.attrs["test_correct"] = correct.astype(np.int64)
        f.attrs["test_accuracy"] = float(correct.mean())
        f.attrs["test_accuracy_ci95"] = np.array([lo, hi])
        f.attrs["test_accuracy_interval"] = "Wilson score, 95%"
    os.replace(out + ".part.h5", out)


# -- LM ----------------------------------------------------------------------------------------------------------
def lm_corpus():
    """(chars, train, val, test) as int64 arrays: the first 90% / next 5% / last 5% of the license texts."""
    text, names = license_text()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    d = np.array([stoi[c] for c in text], dtype=np.int64)
    a, b = int(0.90 * len(d)), int(0.95 * len(d))
    return chars, d[:a], d[a:b], d[b:], names


def windows(x: np.ndarray, context: int) -> np.ndarray:
    """Consecutive windows of context + 1 characters (context next-character targets each, none shared)."""
    return np.stack([x[s:s + context + 1] for s in range(0, len(x) - context - 1 + 1, context)])


def val_bits(model, val, vocab, ctx):
    """Mean bits/char on the validation windows (for choosing a budget: never the test windows)."""
    w = torch.from_numpy(windows(val, ctx))
    model.eval()
    with torch.no_grad():
        loss = F.cross_entropy(model(w[:, :-1]).reshape(-1, vocab), w[:, 1:].reshape(-1)).item()
    model.train()
    return loss / LN2


def train_lm(mechanism, seed, out, steps=None, eval_every=0):
    chars, train, val, test, names = lm_corpus()
    steps = steps or LM["steps"]
    ctx, batch, vocab = LM["context"], LM["batch"], len(chars)
    torch.manual_seed(seeded(seed, 1))
    model = ShortConvModel("linear" if mechanism == "none" else mechanism, LM["width"], LM["heads"], LM["depth"], ctx,
                           True, dict(LM["mhla"]), vocab=vocab, conv=LM["conv"])
    if mechanism == "none":   # the control: no attention at all, only the convolution's local context
        for b in model.blocks:
            b.attn = NoAttention()
    opt = torch.optim.AdamW(model.parameters(), lr=LM["lr"], weight_decay=LM["weight_decay"], betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=LM["lr"], total_steps=steps, pct_start=0.1)
    g = torch.Generator().manual_seed(seeded(seed, 2))
    tr = torch.from_numpy(train)
    t0, ema = time.time(), None
    model.train()
    for step in range(steps):
        starts = torch.randint(0, len(tr) - ctx - 1, (batch,), generator=g).tolist()
        xy = torch.stack([tr[s:s + ctx + 1] for s in starts])
        loss = F.cross_entropy(model(xy[:, :-1]).reshape(-1, vocab), xy[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        constrain_(model)
        ema = loss.item() if ema is None else 0.95 * ema + 0.05 * loss.item()
        if step % 100 == 0 or step == steps - 1:
            print(f"  lm/{mechanism}/s{seed} step {step:5d}  loss {loss.item():.3f}  ({time.time() - t0:.0f} s)",
                  flush=True)
        if eval_every and (step + 1) % eval_every == 0:
            print(f"  lm/{mechanism}/s{seed} step {step + 1:5d}  validation {val_bits(model, val, vocab, ctx):.3f} "
                  f"bits/char", flush=True)
    seconds = time.time() - t0
    model.eval()
    w = torch.from_numpy(windows(test, ctx))
    with torch.no_grad():
        logits = model(w[:, :-1])
        nats = F.cross_entropy(logits.reshape(-1, vocab), w[:, 1:].reshape(-1), reduction="none").view(len(w), -1)
    per_window = (nats.mean(1) / LN2).numpy()
    lo, hi = bootstrap_mean(per_window)
    attrs = {"task": "lm", "mechanism": mechanism, "seed": seed, "mhla_chunk": LM["mhla"]["chunk"],
             "parametrisation": LM["mhla"]["parametrisation"] if mechanism == "mhla" else "none",
             "mixing_per_head": bool(LM["mhla"]["per_head"]) if mechanism == "mhla" else False,
             "mixing_init": LM["mhla"]["mixing"] if mechanism == "mhla" else "none",
             "texts": ["".join(chars[i] for i in row[:-1].tolist()) for row in w],
             "short_conv": LM["conv"],
             "training": f"{steps} steps of AdamW (batch {batch} windows of {ctx} characters, lr {LM['lr']} one-cycle, "
                         f"weight decay {LM['weight_decay']}) on the first 90% ({len(train)} characters) of "
                         f"/usr/share/common-licenses ({len(names)} files); study seed {seed}",
             "train_loss": round(ema, 4), "test_windows": len(w), "test_window_bits": per_window.astype(np.float64),
             "test_bits_per_char": float(per_window.mean()), "test_bits_ci95": np.array([lo, hi]),
             "test_bits_interval": "percentile bootstrap over windows, 95%", "vocab_size": vocab,
             "train_seconds": round(seconds, 1), "threads": torch.get_num_threads()}
    if mechanism == "none":   # nothing to record: the result only (report.py reads it beside the models)
        keep = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in attrs.items() if k != "texts"}
        with open(out + ".part", "w") as f:
            json.dump(keep, f, indent=1)
        os.replace(out + ".part", out)
    else:
        record_all(model, w[:, :-1], out + ".part.h5", mechanism, causal=True, attrs=attrs)
        os.replace(out + ".part.h5", out)
    print(f"lm/{mechanism}/s{seed}: held-out {per_window.mean():.3f} bits/char [{lo:.3f}, {hi:.3f}] over {len(w)} "
          f"windows, train loss {ema / LN2:.3f} bits/char (EMA), {seconds:.0f} s -> {out}", flush=True)


# -- baselines and summary -----------------------------------------------------------------------------------------
def baselines(out_dir):
    """baselines.json: the trigram on the LM's test windows and logistic regression on the ViT's split."""
    path = os.path.join(out_dir, "baselines.json")
    if os.path.exists(path):
        return json.load(open(path))
    chars, train, val, test, _ = lm_corpus()
    tri = Trigram(train, len(chars))
    val_bits = tri.fit_weights(*window_targets(windows(val, LM["context"]))) / LN2
    w = windows(test, LM["context"])
    per_window = -tri.log_probs(*window_targets(w)).reshape(len(w), -1).mean(1) / LN2
    X, y, train_idx, test_idx = vit_split()
    res = {"trigram": {"weights_l3_l2_l1_l0": tri.weights, "validation_bits_per_char": val_bits,
                       "test_windows": len(w), "context": LM["context"], "test_bits_per_char": float(per_window.mean()),
                       "test_bits_ci95": bootstrap_mean(per_window), "test_window_bits": per_window.tolist()}}
    for name, imgs in (("logistic_16x16", X), ("logistic_8x8", None)):
        if imgs is None:
            from sklearn.datasets import load_digits
            imgs = torch.tensor(load_digits().images / 16.0, dtype=torch.float32)
        a = imgs.flatten(1).numpy().astype(np.float64)
        pred = logistic_regression(a[train_idx.numpy()], y[train_idx].numpy(), a[test_idx.numpy()], 10)
        correct = (pred == y[test_idx].numpy()).astype(np.int64)
        res[name] = {"test_accuracy": float(correct.mean()), "test_accuracy_ci95": wilson(int(correct.sum()),
                                                                                          len(correct)),
                     "test_correct": correct.tolist(), "pixels": "raw, standardised",
                     "fit": "multinomial logistic regression, L2 1e-3, 500 full-batch gradient steps"}
    with open(path + ".tmp", "w") as f:
        json.dump(res, f, indent=1)
    os.replace(path + ".tmp", path)
    print(f"trigram: {res['trigram']['test_bits_per_char']:.3f} bits/char on {len(w)} test windows "
          f"(validation {val_bits:.3f}, weights {tri.weights}); logistic regression on 16x16 pixels "
          f"{res['logistic_16x16']['test_accuracy']:.4f}, on 8x8 {res['logistic_8x8']['test_accuracy']:.4f}", flush=True)
    return res


SUMMARY_KEYS = ("task", "mechanism", "seed", "parametrisation", "mixing_per_head", "test_accuracy", "test_accuracy_ci95",
                "test_bits_per_char", "test_bits_ci95", "train_loss", "train_accuracy", "train_seconds", "threads")


def write_summary(out_dir):
    """summary.json: one entry per finished model file, from its attributes."""
    import h5py

    rows = []
    for path in sorted(glob.glob(os.path.join(out_dir, "*_s*.h5"))):
        if path.endswith(".part.h5"):
            continue
        with h5py.File(path, "r") as f:
            row = {"file": os.path.basename(path)}
            for k in SUMMARY_KEYS:
                if k in f.attrs:
                    v = f.attrs[k]
                    row[k] = v.tolist() if hasattr(v, "tolist") else v
            rows.append(row)
    tmp = os.path.join(out_dir, f".summary.json.{os.getpid()}")   # several training processes may share a folder
    with open(tmp, "w") as f:
        json.dump(rows, f, indent=1, default=str)
    os.replace(tmp, os.path.join(out_dir, "summary.json"))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("which", nargs="*", choices=["vit", "lm", []], default=[])
    p.add_argument("--out", default=os.path.join(ROOT, "build", "study"))
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--mechanisms", default=",".join(MECHANISMS))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--lm-steps", type=int, default=None, help=f"LM steps (default {LM['steps']})")
    p.add_argument("--vit-epochs", type=int, default=None, help=f"ViT epochs (default {VIT['epochs']})")
    p.add_argument("--lm-eval-every", type=int, default=0, help="print validation bits/char every S steps (trials)")
    p.add_argument("--baselines-only", action="store_true")
    p.add_argument("--overwrite", action="store_true", help="train even when the model's file exists")
    p.add_argument("--controls", action="store_true",
                   help="also each model without attention (mechanism none; the LM keeps its convolution, the ViT its "
                        "mean-token readout): <task>_none_s<seed>.json")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.use_deterministic_algorithms(True)
    os.makedirs(a.out, exist_ok=True)
    baselines(a.out)
    if a.baselines_only:
        return
    if a.vit_epochs:
        VIT["epochs"] = a.vit_epochs
    for seed in [int(s) for s in a.seeds.split(",")]:
        for task in a.which or ["vit", "lm"]:
            controls = ["none"] if a.controls else []
            for m in a.mechanisms.split(",") + controls:
                out = os.path.join(a.out, f"{task}_{m}_s{seed}" + (".json" if m == "none" else ".h5"))
                if os.path.exists(out) and not a.overwrite:
                    print(f"{task}/{m}/s{seed}: {out} exists, skipped", flush=True)
                    continue
                if task == "vit":
                    train_vit(m, seed, out)
                else:
                    train_lm(m, seed, out, a.lm_steps, a.lm_eval_every)
                write_summary(a.out)


if __name__ == "__main__":
    main()
