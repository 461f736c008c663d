#!/usr/bin/python3
"""Multi-query associative recall (MQAR; Zoology, Arora et al. 2023, arXiv 2312.04927) for the study of trained
mechanisms (issue 32, docs/associative-recall.md): the task where attention is necessary, so that a measure of
attention can be tied to what the model can do.

The task (Zoology's layout, generated here): a sequence of N tokens starts with P key-value pairs
`k1 v1 k2 v2 ...` (keys drawn without replacement from 1..V/2-1, values from V/2..V-1), then the query region:
each of the P keys appears once more at a distinct even offset, the other positions hold random tokens. At each
query position the model must output the value that followed that key. Labels are -100 elsewhere. Besides the
labels each example keeps, for every query position t, the position of the matching key (`key_positions`, -1
elsewhere) and of its value (key + 1): what a retrieval measure of the attention reads (docs/formats.md).

The models: token and position embeddings, 2 pre-norm blocks of [x + causal depthwise convolution (kernel 4),
x + attention, x + MLP], a linear read-out at the query positions only. The attention is one of the reference
layers of tools/python/attnscope_layers.py (softmax, linear, MHLA with M blocks or chunks of C tokens, decay,
gated), or none at all (`none`: the same model without its attention layers, the control: it cannot reach the
key-value section from a query beyond its convolution's window, so it is at chance, 2/V).

A run is (mechanism, variant, N, P, learning rate, seed); its result is `OUT/runs/<key>.json` (written atomically;
an existing one is skipped, so the command resumes). Stage 1 trains seed 0 at every learning rate of the grid and
keeps the one with the best validation accuracy (per mechanism, variant, N and P: "Revisiting associative recall",
arXiv 2508.19029, shows that recurrent and linear models are only judged fairly after such a sweep); stage 2 trains
the other seeds at that rate. Test accuracy is measured on held-out examples drawn with their own seed.

usage: tools/study/mqar.py [--out build/mqar] [--grid quick|full] [--mechanisms softmax,linear,...]
       [--n 64] [--pairs 4,8,16] [--variants blocks16,blocks4] [--seeds 0,1,2,3,4] [--steps S] [--lrs 1e-3,3e-3,1e-2] [--threads 1]
       [--dump DIR]   (dump each mechanism's best seed-0 model at the largest N and pairs on 8 test examples)
       [--no-dump-every]   (by default every model is also dumped on 16 test examples into OUT/dumps)
"""
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "python"))
from attnscope_layers import (MHLA, DecayAttention, GatedAttention, LinearAttention, SoftmaxAttention,  # noqa: E402
                              constrain_, record_reference_layer)

VOCAB = 256          # keys 1..127, values 128..255: chance is 1/128
WIDTH, HEADS, DEPTH, CONV = 64, 2, 2, 4
BATCH = 64
VALID, TEST = 512, 1024
MECHANISMS = ("softmax", "linear", "mhla", "decay", "gated", "none")


# ---------------------------------------------------------------------------------------------------------------
# The task

def make_mqar(rng: np.random.Generator, examples: int, n: int, pairs: int, vocab: int = VOCAB):
    """(inputs [E, N] int64, labels [E, N] int64 with -100 where nothing is asked, key_positions [E, N] int64 with the
    position of the matching key at each query position and -1 elsewhere)."""
    half = vocab // 2
    context = 2 * pairs
    slots = (n - context) // 2           # even offsets in the query region
    if pairs > half - 1 or slots < pairs:
        raise ValueError(f"N = {n} cannot hold {pairs} pairs and their queries (vocabulary {vocab})")
    inputs = rng.integers(0, vocab, size=(examples, n), dtype=np.int64)
    labels = np.full((examples, n), -100, dtype=np.int64)
    key_positions = np.full((examples, n), -1, dtype=np.int64)
    for e in range(examples):
        keys = rng.choice(np.arange(1, half), size=pairs, replace=False)
        values = rng.choice(np.arange(half, vocab), size=pairs, replace=False)
        inputs[e, 0:context:2] = keys
        inputs[e, 1:context:2] = values
        order = rng.permutation(pairs)                      # which pair each query asks
        where = context + 2 * np.sort(rng.choice(slots, size=pairs, replace=False))
        inputs[e, where] = keys[order]
        labels[e, where] = values[order]
        key_positions[e, where] = 2 * order
    return inputs, labels, key_positions


# ---------------------------------------------------------------------------------------------------------------
# The models

def attention_layer(mechanism: str, variant: dict, n: int):
    if mechanism == "softmax":
        return SoftmaxAttention(WIDTH, HEADS, causal=True)
    if mechanism == "linear":
        return LinearAttention(WIDTH, HEADS, causal=True)
    if mechanism == "mhla":
        blocks = {"blocks": variant["blocks"]} if "blocks" in variant else {"chunk": variant["chunk"]}
        # op = "authors": the operator of the MHLA authors' language-model code (unnormalised, identity features:
        # normalize="none", feature_map="identity"); otherwise ours: relu features, row-normalised (attention.md 1.4)
        authors = dict(normalize="none", feature_map="identity") if variant.get("op") == "authors" else {}
        # The dense form of the same operator (faster at these N on a CPU; the N = 64, M = 4 runs of
        # 2026-12-02 used the blockwise form: the same function to float rounding, tests/app/check_reference_layers.py)
        return MHLA(WIDTH, HEADS, n, causal=True, mixing="causal-local", per_head=True, parametrisation="clamp",
                    form="dense", **blocks, **authors)
    if mechanism == "decay":
        return DecayAttention(WIDTH, HEADS, causal=True)
    if mechanism == "gated":
        return GatedAttention(WIDTH, HEADS)
    raise ValueError(mechanism)


class CausalConv(nn.Module):
    """Depthwise causal convolution over the tokens (kernel CONV): how a token sees its predecessor."""

    def __init__(self, width: int, kernel: int):
        super().__init__()
        self.kernel = kernel
        self.conv = nn.Conv1d(width, width, kernel, groups=width)

    def forward(self, x):
        y = F.pad(x.transpose(1, 2), (self.kernel - 1, 0))
        return self.conv(y).transpose(1, 2)


class Block(nn.Module):
    def __init__(self, attn, width: int):
        super().__init__()
        self.n0, self.conv = nn.LayerNorm(width), CausalConv(width, CONV)
        self.n1, self.attn = (nn.LayerNorm(width), attn) if attn is not None else (None, None)
        self.n2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x):
        x = x + self.conv(self.n0(x))
        if self.attn is not None:
            x = x + self.attn(self.n1(x))
        return x + self.mlp(self.n2(x))


class RecallModel(nn.Module):
    def __init__(self, mechanism: str, variant: dict, n: int):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.pos = nn.Parameter(torch.randn(1, n, WIDTH) * 0.02)
        self.blocks = nn.ModuleList(Block(None if mechanism == "none" else attention_layer(mechanism, variant, n), WIDTH)
                                    for _ in range(DEPTH))
        self.norm = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB)

    @property
    def attention_layers(self):
        return [b.attn for b in self.blocks if b.attn is not None]

    def hidden(self, x):
        h = self.embed(x) + self.pos[:, : x.shape[1]]
        for b in self.blocks:
            h = b(h)
        return self.norm(h)

    def query_logits(self, x, labels):
        """Logits at the labelled positions only ([Q, V]) and their labels ([Q])."""
        h = self.hidden(x)
        mask = labels >= 0
        return self.head(h[mask]), labels[mask]


# ---------------------------------------------------------------------------------------------------------------
# Runs

def run_key(mechanism, variant, n, pairs, lr, seed):
    v = "".join(f"_{k}{variant[k]}" for k in sorted(variant))
    return f"{mechanism}{v}_n{n}_p{pairs}_lr{lr:g}_s{seed}"


@torch.no_grad()
def accuracy(model, inputs, labels, batch=256):
    model.eval()
    right = total = 0
    for s in range(0, len(inputs), batch):
        logits, y = model.query_logits(torch.as_tensor(inputs[s:s + batch]), torch.as_tensor(labels[s:s + batch]))
        right += int((logits.argmax(-1) == y).sum())
        total += int(y.numel())
    model.train()
    return right / total


def train_one(mechanism, variant, n, pairs, lr, seed, steps, log=print):
    """Trains one model; returns (model, result dict)."""
    torch.manual_seed(seed)
    model = RecallModel(mechanism, variant, n)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.1)
    train_rng = np.random.default_rng([seed, n, pairs, 1])
    valid = make_mqar(np.random.default_rng([n, pairs, 2]), VALID, n, pairs)      # the same for every run
    test = make_mqar(np.random.default_rng([n, pairs, 3]), TEST, n, pairs)
    start = time.time()
    for step in range(steps):
        x, y, _ = make_mqar(train_rng, BATCH, n, pairs)
        logits, target = model.query_logits(torch.as_tensor(x), torch.as_tensor(y))
        loss = F.cross_entropy(logits, target)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        constrain_(model)
        if not torch.isfinite(loss):
            log(f"  step {step}: loss is not finite: stopped")
            break
        if (step + 1) % max(1, steps // 5) == 0:
            log(f"  step {step + 1}/{steps} loss {loss.item():.3f} ({time.time() - start:.0f} s)")
    result = dict(mechanism=mechanism, variant=variant, n=n, pairs=pairs, lr=lr, seed=seed, steps=steps,
                  batch=BATCH, vocab=VOCAB, width=WIDTH, heads=HEADS, depth=DEPTH, conv=CONV,
                  final_loss=float(loss.item()), valid_accuracy=accuracy(model, valid[0], valid[1]),
                  test_accuracy=accuracy(model, test[0], test[1]), test_queries=int((test[1] >= 0).sum()),
                  seconds=time.time() - start, torch_version=torch.__version__)
    return model, result


def write_json(path, doc):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp_")
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def take_lock(lock):
    """True when this process now holds `lock` (created with O_EXCL, holding its PID; one of a dead process is
    removed and taken)."""
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                with open(lock) as f:
                    pid = int(f.read().strip() or 0)
                os.kill(pid, 0)
                return pid == os.getpid()
            except (ValueError, ProcessLookupError, FileNotFoundError):
                try:
                    os.unlink(lock)   # a stale lock (or one being written, which the retry settles)
                except FileNotFoundError:
                    pass
                continue
            except PermissionError:
                return False
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        return True
    return False


def release_lock(lock):
    try:
        with open(lock) as f:
            mine = f.read().strip() == str(os.getpid())
        if mine:
            os.unlink(lock)
    except FileNotFoundError:
        pass


def dump(model, mechanism, variant, n, pairs, out_path, examples=64, extra_attrs=None):
    """q, k, v (and Mc, gates) of the test examples 0..examples-1 with the bridge, with the task's labels.
    Root attributes: task, pairs, vocab, mechanism, the variant, recall_accuracy (on the dumped examples) and
    ``extra_attrs`` (the bundled files: the run's lr, seed and test accuracy over all 1024 test examples)."""
    from attnscope_dump import AttnScopeRecorder
    x, y, keys = make_mqar(np.random.default_rng([n, pairs, 3]), TEST, n, pairs)
    x, y, keys = x[:examples], y[:examples], keys[:examples]
    rec = AttnScopeRecorder(model, name=f"mqar-{mechanism}", mha=False)
    for layer in model.attention_layers:
        rec.add(layer, record_reference_layer)
    with torch.no_grad(), rec:
        logits, target = model.query_logits(torch.as_tensor(x), torch.as_tensor(y))
    attrs = dict(task="mqar", pairs=pairs, vocab=VOCAB, mechanism=mechanism,
                 recall_accuracy=float((logits.argmax(-1) == target).float().mean()))
    attrs.update({f"variant_{k}": v for k, v in variant.items()})
    attrs.update(extra_attrs or {})
    if mechanism == "gated":   # the bridge writes gates for one batch element: the first example
        gates = [layer.last_gates[:1] for layer in model.attention_layers]
        path = rec.save(out_path, batch=0, causal=True, attrs=attrs, gates=gates)
        x, y, keys = x[:1], y[:1], keys[:1]
    else:
        path = rec.save(out_path, batch="all", causal=True, attrs=attrs)
    import h5py
    # docs/formats.md, "Retrieval targets": (t, j*) for every query position t, j* the position of the value that
    # answers it (the matching key + 1: the column a retrieving head reads); [B, P, 2] with the batch axis.
    targets = np.stack([np.stack([np.flatnonzero(k >= 0), k[k >= 0] + 1], axis=1) for k in keys]).astype(np.int64)
    one = len(x) == 1
    with h5py.File(path, "a") as f:
        f.create_dataset("retrieval_targets", data=targets[0] if one else targets)
        f.create_dataset("mqar_inputs", data=x[0] if one else x)
        f.create_dataset("mqar_labels", data=y[0] if one else y)
        f.create_dataset("mqar_key_positions", data=keys[0] if one else keys)
    return path


GRIDS = {
    # a first look that fits a session: every mechanism at N = 64, 3 pair counts, 3 learning rates, 5 seeds
    "quick": dict(n=[64], pairs=[4, 8, 16], variants={"mhla": [{"blocks": 4}, {"blocks": 8}]}),
    # issue 32: N in {64, 128, 256}, pairs up to 64, MHLA at M in {4, 8, 16} and at a fixed chunk of 16
    "full": dict(n=[64, 128, 256], pairs=[4, 8, 16, 32, 64],
                 variants={"mhla": [{"blocks": 4}, {"blocks": 8}, {"blocks": 16}, {"chunk": 16},
                                    {"blocks": 16, "op": "authors"}]}),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "mqar"))
    ap.add_argument("--grid", choices=sorted(GRIDS), default="quick")
    ap.add_argument("--mechanisms", default=",".join(MECHANISMS))
    ap.add_argument("--n", help="comma list of N (default: the grid's)")
    ap.add_argument("--pairs", help="comma list of pair counts (default: the grid's)")
    ap.add_argument("--variants", help="comma list of MHLA variants to train, e.g. blocks16,blocks4 (default: the grid's)")
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--lrs", default="1e-3,3e-3,1e-2")
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-dump-every", dest="dump_every", action="store_false",
                    help="do not dump every trained model's attention on 16 test examples into OUT/dumps")
    ap.add_argument("--dump", help="folder: dump each mechanism's best seed-0 model at the largest N and pairs")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    grid = GRIDS[args.grid]
    ns = [int(x) for x in args.n.split(",")] if args.n else grid["n"]
    pairs_list = [int(x) for x in args.pairs.split(",")] if args.pairs else grid["pairs"]
    seeds = [int(x) for x in args.seeds.split(",")]
    lrs = [float(x) for x in args.lrs.split(",")]
    runs = os.path.join(args.out, "runs")
    os.makedirs(runs, exist_ok=True)

    def run(mech, variant, n, pairs, lr, seed):
        path = os.path.join(runs, run_key(mech, variant, n, pairs, lr, seed) + ".json")
        # Several workers may share OUT: a run in progress holds OUT/runs/<key>.lock (its PID); another worker
        # waits for its result instead of training it again. A lock whose process is gone is taken over.
        while not os.path.exists(path) and not take_lock(path + ".lock"):
            time.sleep(10)
        if os.path.exists(path):
            release_lock(path + ".lock")
            with open(path) as f:
                return json.load(f), None
        print(f"{run_key(mech, variant, n, pairs, lr, seed)}", flush=True)
        model, result = train_one(mech, variant, n, pairs, lr, seed, args.steps,
                                  log=lambda s: print(s, flush=True))
        if mech != "none" and args.dump_every:
            # Every trained model's attention on 16 test examples (OUT/dumps, not committed): what the measures of
            # the correlation with recall read (tools/study/mqar_measures.py).
            os.makedirs(os.path.join(args.out, "dumps"), exist_ok=True)
            result["dump"] = os.path.relpath(dump(model, mech, variant, n, pairs, os.path.join(
                args.out, "dumps", run_key(mech, variant, n, pairs, lr, seed) + ".h5"), examples=16), args.out)
        write_json(path, result)
        release_lock(path + ".lock")
        print(f"  valid {result['valid_accuracy']:.3f} test {result['test_accuracy']:.3f} "
              f"({result['seconds']:.0f} s)", flush=True)
        return result, model

    for n in ns:
        for pairs in pairs_list:
            if (n - 2 * pairs) // 2 < pairs:
                continue   # N cannot hold the pairs and their queries
            for mech in args.mechanisms.split(","):
                variants = grid["variants"].get(mech, [{}])
                if mech == "mhla" and args.variants:
                    named = {"".join(f"{k}{v[k]}" for k in sorted(v)): v for v in variants}
                    variants = [named[w] for w in args.variants.split(",") if w in named]   # in the order given
                for variant in variants:
                    # Stage 1: seed 0 at every learning rate; the best validation accuracy chooses.
                    first = [run(mech, variant, n, pairs, lr, seeds[0]) for lr in lrs]
                    best = max(range(len(lrs)), key=lambda i: first[i][0]["valid_accuracy"])
                    # Stage 2: the other seeds at that rate.
                    for seed in seeds[1:]:
                        run(mech, variant, n, pairs, lrs[best], seed)
                    # the control has no attention to record
                    if args.dump and mech != "none" and n == max(ns) and pairs == max(p for p in pairs_list if (n - 2 * p) // 2 >= p):
                        os.makedirs(args.dump, exist_ok=True)
                        model, result = first[best][1], first[best][0]
                        if model is None:   # trained in an earlier run: train it again (same seed, same steps)
                            model, again = train_one(mech, variant, n, pairs, lrs[best], seeds[0], args.steps)
                            if abs(again["test_accuracy"] - result["test_accuracy"]) > 0.002:
                                print(f"warning: {mech}: retrained test accuracy {again['test_accuracy']:.4f} differs "
                                      f"from the run's {result['test_accuracy']:.4f}; the file says the retrained one",
                                      flush=True)
                            result = again
                        v = "".join(f"_{k}{variant[k]}" for k in sorted(variant))
                        # 8 examples (B = 8; gated: the first only): under 2 MB per bundled file
                        extra = dict(lr=result["lr"], seed=seeds[0], steps=args.steps,
                                     test_accuracy=result["test_accuracy"], test_queries=result["test_queries"])
                        print("wrote", dump(model, mech, variant, n, pairs,
                                            os.path.join(args.dump, f"trained_mqar_{mech}{v}.h5"), examples=8,
                                            extra_attrs=extra), flush=True)


if __name__ == "__main__":
    main()
