"""The study's baselines and statistics (tools/study/baselines.py) against known answers: the interpolated
trigram is a probability distribution over the next character for every history (seen, unseen, window start)
and equals a direct count-based formula on a small text; the weights chosen on a validation text beat the
defaults there; Wilson's interval on textbook values; the sign test on exact binomial tails; logistic regression
separates separable classes; the bootstrap interval contains the mean.
usage: check_baselines.py"""
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "study"))
from baselines import Trigram, bootstrap_mean, logistic_regression, sign_test, wilson, window_targets  # noqa: E402

problems = []
rng = np.random.default_rng(0)
V = 6
text = rng.integers(0, V - 1, size=400)          # symbol V - 1 never occurs: unigram 0, uniform only
tri = Trigram(text, V)
for a, b in ((0, 1), (-1, 2), (4, 4), (5, 5), (-1, 5)):
    c = np.arange(V)
    p = np.exp(tri.log_probs(np.full(V, a), np.full(V, b), c))
    if abs(p.sum() - 1) > 1e-12 or not np.all(p > 0):
        problems.append(f"history ({a}, {b}): probabilities sum to {p.sum():.15f}, min {p.min():.3g}")
# direct formula for a seen history
a, b, c = int(text[10]), int(text[11]), int(text[12])
n_abc = sum(1 for i in range(len(text) - 2) if (text[i], text[i + 1], text[i + 2]) == (a, b, c))
n_ab = sum(1 for i in range(len(text) - 2) if (text[i], text[i + 1]) == (a, b))
n_bc = sum(1 for i in range(len(text) - 1) if (text[i], text[i + 1]) == (b, c))
n_b = sum(1 for i in range(len(text) - 1) if text[i] == b)
l3, l2, l1, l0 = tri.weights
want = l3 * n_abc / n_ab + l2 * n_bc / n_b + l1 * np.sum(text == c) / len(text) + l0 / V
got = float(np.exp(tri.log_probs([a], [b], [c])[0]))
if abs(got - want) > 1e-12:
    problems.append(f"P({c} | {a} {b}) = {got}, direct counts give {want}")
w = np.stack([text[i:i + 11] for i in range(0, 300, 10)])
ta, tb, tc = window_targets(w)
if not (np.all(ta[:, 0] == -1) and np.all(tb[:, 0] == w[:, 0]) and np.all(tc == w[:, 1:])):
    problems.append("window_targets: the first target of a window must have one character of history")
default = -np.mean(tri.log_probs(ta, tb, tc))
fitted = tri.fit_weights(ta, tb, tc)
if not fitted <= default + 1e-12 or abs(fitted + np.mean(tri.log_probs(ta, tb, tc))) > 1e-12:
    problems.append(f"fit_weights: {fitted} nats vs {default} with the defaults (or inconsistent with log_probs)")
lo, hi = wilson(81, 263)            # Newcombe (1998), example: 0.2553 to 0.3662 (Wilson without correction)
if abs(lo - 0.2553) > 5e-4 or abs(hi - 0.3662) > 5e-4:
    problems.append(f"wilson(81, 263) = ({lo:.4f}, {hi:.4f}), expected (0.2553, 0.3662)")
if abs(sign_test([1] * 9 + [-1]) - 2 * 11 / 1024) > 1e-15 or sign_test([0, 0]) != 1.0:
    problems.append(f"sign_test: 9 of 10 gives {sign_test([1] * 9 + [-1])}, expected {22 / 1024}")
if abs(sign_test([1, -1, 1, -1, 0]) - 1.0) > 1e-15:
    problems.append("sign_test: a balanced sample must give p = 1")
x = np.concatenate([rng.normal(-2, 0.5, (50, 3)), rng.normal(2, 0.5, (50, 3))])
y = np.repeat([0, 1], 50)
if not np.array_equal(logistic_regression(x, y, x, 2), y):
    problems.append("logistic regression does not separate two separated classes")
v = rng.normal(size=40)
lo, hi = bootstrap_mean(v)
if not lo < v.mean() < hi or math.isclose(lo, hi):
    problems.append(f"bootstrap interval [{lo}, {hi}] does not contain the mean {v.mean()}")
for p in problems:
    print("FAIL:", p)
sys.exit(1 if problems else 0)
