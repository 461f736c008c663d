"""Student's t distribution to 40 digits by mpmath (tests/reference/attnref.py: student_t_sf, student_t_quantile),
for test_aggregate.cpp (analysis/small_sample.h). scipy.stats.t is not the reference: its ppf is off by ~2e-9
relative at some levels (t.ppf(0.995, 3) = 5.84090929975643; the root is 5.84090930973336).
usage: small_sample_reference.py CASES.json OUT.json, CASES = {"quantile": [[q, df], ...], "sf": [[t, df], ...]}"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "reference"))
import attnref  # noqa: E402


def main():
    with open(sys.argv[1]) as f:
        cases = json.load(f)
    out = {"quantile": [attnref.student_t_quantile(q, df) for q, df in cases["quantile"]],
           "sf": [float(attnref.student_t_sf(t, df)) for t, df in cases["sf"]]}
    with open(sys.argv[2], "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
