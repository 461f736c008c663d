"""Baselines and intervals for the study of trained mechanisms (tools/study/train.py, docs/trained-mechanisms.md):
an interpolated character trigram model, multinomial logistic regression on raw pixels, Wilson and bootstrap
95% intervals. NumPy only (no scikit-learn model: the same code runs wherever the study runs)."""
import itertools
import math
from fractions import Fraction

import numpy as np

Z95 = 1.959963984540054   # two-sided 95% normal quantile


def wilson(successes: int, n: int, z: float = Z95):
    """Wilson score interval of a proportion (the test accuracy's 95% interval)."""
    if n == 0:
        return (float("nan"), float("nan"))
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (centre - half, centre + half)


def bootstrap_mean(values, reps: int = 10000, seed: int = 0):
    """Percentile bootstrap 95% interval of the mean of ``values`` (units: windows, images, seeds)."""
    v = np.asarray(values, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = v[rng.integers(0, len(v), size=(reps, len(v)))].mean(axis=1)
    return (float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975)))


class Trigram:
    """Interpolated (Jelinek-Mercer) character trigram: P(c | a b) = l3 P(c | a b) + l2 P(c | b) + l1 P(c) + l0 / V,
    maximum-likelihood counts from the training text; the weights are chosen on a validation text by a grid
    search (never on the test windows)."""

    def __init__(self, train: np.ndarray, vocab: int):
        t = np.asarray(train, dtype=np.int64)
        self.v = vocab
        self.c1 = np.bincount(t, minlength=vocab).astype(np.float64)
        self.c2 = np.zeros((vocab, vocab))
        np.add.at(self.c2, (t[:-1], t[1:]), 1.0)
        self.c3 = {}
        keys = (t[:-2] * vocab + t[1:-1]) * vocab + t[2:]
        u, n = np.unique(keys, return_counts=True)
        self.c3 = dict(zip(u.tolist(), n.tolist()))
        self.c3_hist = np.zeros((vocab, vocab))
        np.add.at(self.c3_hist, (t[:-2], t[1:-1]), 1.0)
        self.weights = (0.6, 0.3, 0.09, 0.01)

    def _parts(self, a, b, c):
        """Per target: the trigram, bigram, unigram and uniform probabilities (a = -1: no second-last char)."""
        a, b, c = (np.asarray(x, dtype=np.int64).ravel() for x in (a, b, c))
        p1 = self.c1[c] / self.c1.sum()
        hb = self.c2[b].sum(axis=1)
        p2 = np.where(hb > 0, self.c2[b, c] / np.maximum(hb, 1), 0.0)
        keys = ((np.maximum(a, 0) * self.v + b) * self.v + c).tolist()
        n3 = np.array([self.c3.get(k, 0) for k in keys], dtype=np.float64)
        h3 = np.where(a >= 0, self.c3_hist[np.maximum(a, 0), b], 0.0)
        p3 = np.where(h3 > 0, n3 / np.maximum(h3, 1), 0.0)
        return p3, p2, p1, np.full(len(c), 1.0 / self.v), (h3 > 0), (hb > 0)

    def log_probs(self, a, b, c, weights=None):
        """ln P(c | a b) per target; levels whose history was never seen give their weight to the lower ones."""
        l3, l2, l1, l0 = weights or self.weights
        p3, p2, p1, p0, s3, s2 = self._parts(a, b, c)
        w3 = np.where(s3, l3, 0.0)
        w2 = np.where(s2, l2, 0.0)
        rest = 1.0 - w3 - w2          # what unseen levels leave goes to unigram and uniform, in their ratio
        w1, w0 = rest * l1 / (l1 + l0), rest * l0 / (l1 + l0)
        return np.log(w3 * p3 + w2 * p2 + w1 * p1 + w0 * p0)

    def fit_weights(self, a, b, c, step: float = 0.05):
        """Grid search of (l3, l2, l1, l0) on validation targets (min mean -ln P); returns the mean loss."""
        parts = self._parts(a, b, c)
        best = (float("inf"), None)
        grid = np.arange(step, 1.0, step)
        for l3, l2, l0 in itertools.product(grid, grid, (0.001, 0.005, 0.02, 0.05, 0.1)):
            l1 = 1.0 - l3 - l2 - l0
            if l1 <= 0:
                continue
            loss = -self._loss_from_parts(parts, (l3, l2, l1, l0))
            if loss < best[0]:
                best = (loss, (float(l3), float(l2), float(l1), float(l0)))
        self.weights = tuple(round(w, 4) for w in best[1])
        return best[0]

    @staticmethod
    def _loss_from_parts(parts, weights):
        l3, l2, l1, l0 = weights
        p3, p2, p1, p0, s3, s2 = parts
        w3, w2 = np.where(s3, l3, 0.0), np.where(s2, l2, 0.0)
        rest = 1.0 - w3 - w2
        return float(np.mean(np.log(w3 * p3 + w2 * p2 + rest * (l1 * p1 + l0 * p0) / (l1 + l0))))


def window_targets(windows: np.ndarray):
    """(a, b, c) for every next-character target of windows [W, context + 1], history limited to the window as the
    model's is: the first target of a window has one character of history (a = -1)."""
    w = np.asarray(windows, dtype=np.int64)
    c = w[:, 1:]
    b = w[:, :-1]
    a = np.concatenate([np.full((len(w), 1), -1), w[:, :-2]], axis=1)
    return a, b, c


def logistic_regression(xtr, ytr, xte, classes: int, l2: float = 1e-3, steps: int = 500, lr: float = 0.5):
    """Multinomial logistic regression on standardised raw features, full-batch gradient descent with an L2
    penalty; returns the test predictions. Deterministic."""
    mu, sd = xtr.mean(0), xtr.std(0) + 1e-8
    a, b = (xtr - mu) / sd, (xte - mu) / sd
    w = np.zeros((a.shape[1], classes))
    bias = np.zeros(classes)
    y1 = np.eye(classes)[ytr]
    for _ in range(steps):
        z = a @ w + bias
        z -= z.max(1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(1, keepdims=True)
        g = (p - y1) / len(a)
        w -= lr * (a.T @ g + l2 * w)
        bias -= lr * g.sum(0)
    return (b @ w + bias).argmax(1)


def sign_test(diffs) -> float:
    """Two-sided exact sign test of paired differences (zeros dropped): p-value of as many or more of one sign
    under p = 1/2. On 0/1 correctness differences it is McNemar's exact test."""
    d = np.asarray(diffs, dtype=np.float64)
    pos, neg = int((d > 0).sum()), int((d < 0).sum())
    n = pos + neg
    if n == 0:
        return 1.0
    k = min(pos, neg)
    # exact in integers: 2.0 ** n overflows a double above n = 1023 (the study pairs thousands of units)
    tail = Fraction(sum(math.comb(n, i) for i in range(k + 1)), 2 ** n)
    return min(1.0, float(2 * tail))


def paired(a, b, seed: int = 0) -> dict:
    """Paired comparison of per-unit values a - b: mean difference, bootstrap 95% interval, sign-test p."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    lo, hi = bootstrap_mean(d, seed=seed)
    return {"n": int(len(d)), "mean_diff": float(d.mean()), "ci_low": lo, "ci_high": hi, "p_sign": sign_test(d)}
