#!/usr/bin/python3
"""Checks files written by io::write_npy / io::write_hdf5 with NumPy and h5py; exits non-zero with a
message on the first mismatch. The expected values are the same closed-form formulas the C++ test
used to fill its data (evaluated here in the same IEEE operation order, so equality is exact).

usage: check_written.py npy PATH ROWS COLS
       check_written.py h5 PATH
"""
import json
import sys

import numpy as np


def fail(msg):
    print("check_written.py: " + msg, file=sys.stderr)
    sys.exit(1)


def matrix_value(i, j):
    return ((i * 7 + j * 3) % 11 - 5.5) + i / 3.0 - j * 0.1


def flat_value(k):
    return (k % 13 - 6) * 0.37 + k / 7.0


def check(cond, msg):
    if not cond:
        fail(msg)


mode, path = sys.argv[1], sys.argv[2]
if mode == "npy":
    rows, cols = int(sys.argv[3]), int(sys.argv[4])
    with open(path, "rb") as f:
        version = np.lib.format.read_magic(f)
        check(version == (1, 0), "format version %r, expected (1, 0)" % (version,))
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        check(f.tell() % 64 == 0, "data starts at byte %d, not 64-byte aligned" % f.tell())
    check(shape == (rows, cols), "shape %r, expected %r" % (shape, (rows, cols)))
    check(not fortran, "fortran_order is True")
    check(dtype == np.dtype("<f8"), "dtype %r, expected <f8" % dtype)
    a = np.load(path)
    expected = np.array([[matrix_value(i, j) for j in range(cols)] for i in range(rows)], dtype="f8").reshape(rows, cols)
    special = len(sys.argv) > 5 and sys.argv[5] == "special"
    if special:   # the C++ side put nan, inf, -inf, -0.0 in the first row
        expected[0, :4] = [np.nan, np.inf, -np.inf, -0.0]
    check(a.shape == expected.shape, "loaded shape %r" % (a.shape,))
    same = (a == expected) | (np.isnan(a) & np.isnan(expected))
    check(bool(same.all()), "values differ:\n%r\nexpected\n%r" % (a, expected))
    check(bool((np.signbit(a) == np.signbit(expected)).all()), "signs of zero differ")
elif mode == "h5":
    import h5py
    with h5py.File(path, "r") as f:
        q = f["/q"]
        check(q.dtype == np.float64 and q.shape == (2, 3, 4), "/q: %r %r" % (q.dtype, q.shape))
        check(q.chunks is None and q.compression is None, "/q should be contiguous and uncompressed")
        exp = np.array([flat_value(k) for k in range(24)], dtype="f8").reshape(2, 3, 4)
        check(bool((q[()] == exp).all()), "/q values differ")
        check(q.attrs["units"] == "nats", "/q units: %r" % q.attrs["units"])
        check(q.attrs["umax"] == np.uint64(2**64 - 1) and q.attrs["umax"].dtype == np.uint64, "/q umax")

        k = f["/layers/0/k"]
        check(k.dtype == np.float32 and k.shape == (3, 5), "/layers/0/k: %r %r" % (k.dtype, k.shape))
        check(k.compression == "gzip" and k.shuffle and k.chunks is not None, "/layers/0/k should be chunked+shuffle+gzip")
        exp = np.array([flat_value(k) for k in range(15)], dtype="f8").astype("f4").reshape(3, 5)
        check(bool((k[()] == exp).all()), "/layers/0/k values differ")

        big = f["/layers/1/big"]
        check(big.shape == (4, 300, 257) and big.chunks is not None, "/layers/1/big chunks %r" % (big.chunks,))
        check(np.prod(big.chunks) * 4 <= 2**20, "/layers/1/big chunk too large: %r" % (big.chunks,))
        exp = np.array([flat_value(k) for k in range(4 * 300 * 257)], dtype="f8").astype("f4").reshape(4, 300, 257)
        check(bool((big[()] == exp).all()), "/layers/1/big values differ")

        s = f["/s"]
        check(s.shape == () and s[()] == -1.5, "/s: %r" % (s[()],))
        e = f["/e"]
        check(e.shape == (0, 3), "/e shape %r" % (e.shape,))

        a = f.attrs
        check(a["kind"] == "synthetic", "kind %r" % a["kind"])
        check(a["seed"] == 42 and a["seed"].dtype == np.int64, "seed %r" % a["seed"])
        check(a["ratio"] == 0.25, "ratio")
        check(list(a["grid"]) == [14, 14] and a["grid"].dtype == np.int64, "grid %r" % a["grid"])
        check(list(a["mixed"]) == [1, 2.5], "mixed %r" % a["mixed"])
        check(a["mat"].shape == (2, 2) and (a["mat"] == [[1, 2], [3, 4]]).all(), "mat %r" % a["mat"])
        check(a["flag"] == True and a["flag"].dtype == np.bool_, "flag %r" % a["flag"])
        check(list(a["names"]) == ["a", "b"], "names %r" % a["names"])
        check(json.loads(a["params"]) == {"blocks": 4, "mixing": "cos"}, "params %r" % a["params"])
        check(json.loads(a["ragged"]) == [[1], [2, 3]], "ragged %r" % a["ragged"])
        check(isinstance(a["nothing"], h5py.Empty), "nothing %r" % a["nothing"])
        check(a["empty_list"].shape == (0,), "empty_list %r" % a["empty_list"])
else:
    fail("unknown mode " + mode)
