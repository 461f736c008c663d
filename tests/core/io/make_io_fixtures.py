#!/usr/bin/python3
"""Writes the fixtures of the core/io tests with NumPy and h5py (and safetensors byte by byte, per
https://github.com/huggingface/safetensors#format), plus the values the readers must return.

usage: make_io_fixtures.py OUT_DIR

OUT_DIR/manifest.json lists
  "tensors":   readable tensors: file, name, format, shape, dtype, expected (raw little-endian float64,
               row-major, as numpy's astype(float64) widens the stored values), a box (start, count,
               expected_box) cut with numpy slicing, and the attributes h5py reports;
  "files":     per file: format, the exact tensor names, file attributes, skipped names;
  "selection": load_selected cases: reference, layout, --at, prefix, expected N x d matrix.
Hostile files are written under OUT_DIR/bad/ (the C++ tests know what each must raise).
"""
import json
import os
import struct
import sys
import warnings
import zipfile

import h5py
import numpy as np
import numpy.lib.format as npf

warnings.filterwarnings("ignore", category=RuntimeWarning)   # casting signalling NaNs is intended
OUT = sys.argv[1]
os.makedirs(os.path.join(OUT, "expected"), exist_ok=True)
os.makedirs(os.path.join(OUT, "bad"), exist_ok=True)
rng = np.random.default_rng(20240611)

manifest = {"tensors": [], "files": {}, "selection": []}
counter = [0]


def save_expected(values):
    counter[0] += 1
    rel = "expected/%05d.f8" % counter[0]
    np.ascontiguousarray(np.asarray(values, dtype=np.float64)).astype("<f8").tofile(os.path.join(OUT, rel))
    return rel


def box_of(shape):
    start = [s // 3 for s in shape]
    count = [max(0, s - s // 3 - (1 if s > 2 else 0)) for s in shape]
    return start, count


def dtype_name(dt):
    dt = np.dtype(dt)
    return "bool" if dt.kind == "b" else dt.newbyteorder("=").name


def add_tensor(file, name, fmt, arr, dtype=None, expected=None, attributes=None):
    """arr: the logical array as numpy sees it; expected: its float64 widening (default arr.astype(f8))."""
    arr = np.asarray(arr)
    exp = np.asarray(arr, dtype=np.float64) if expected is None else np.asarray(expected, dtype=np.float64)
    start, count = box_of(arr.shape)
    sl = tuple(slice(s, s + c) for s, c in zip(start, count))
    manifest["tensors"].append({
        "file": file, "name": name, "format": fmt, "shape": list(arr.shape),
        "dtype": dtype or dtype_name(arr.dtype), "expected": save_expected(exp),
        "box_start": start, "box_count": count, "expected_box": save_expected(exp[sl]),
        "attributes": attributes if attributes is not None else {},
    })


def sample(dtype, shape):
    """Values of `dtype` that exercise its range: extremes, specials (floats), signs."""
    dt = np.dtype(dtype)
    n = int(np.prod(shape))
    if dt.kind == "f":
        v = rng.standard_normal(n) * 3
        specials = [0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan, np.finfo(dt).max, np.finfo(dt).tiny,
                    np.finfo(dt).tiny / 8]   # the last one is subnormal
        v[:min(n, len(specials))] = specials[:n]
        return v.astype(dt).reshape(shape)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        v = rng.integers(info.min, info.max, size=n, dtype=dt.newbyteorder("="), endpoint=True)
        ext = [info.min, info.max, 0, 1]
        v[:min(n, len(ext))] = np.array(ext[:n], dtype=v.dtype)
        return v.astype(dt).reshape(shape)
    if dt.kind == "b":
        return (rng.integers(0, 2, size=n) == 1).reshape(shape)
    raise ValueError(dtype)


# ------------------------------------------------------------------------------------------ .npy
NPY_TYPES = ["f2", "f4", "f8", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "b1"]
for version in [(1, 0), (2, 0), (3, 0)]:
    for endian in "<>":
        for order in "CF":
            for code in NPY_TYPES:
                dt = np.dtype(endian + code) if code not in ("i1", "u1", "b1") else np.dtype(code)
                base = sample(dt, (3, 4, 5))
                arr = np.asfortranarray(base) if order == "F" else np.ascontiguousarray(base)
                rel = "npy/v%d_%s_%s_%s.npy" % (version[0], "le" if endian == "<" else "be", order, code)
                os.makedirs(os.path.join(OUT, "npy"), exist_ok=True)
                with open(os.path.join(OUT, rel), "wb") as f:
                    npf.write_array(f, arr, version=version)
                add_tensor(rel, "", "npy", arr)
                manifest["files"][rel] = {"format": "npy", "names": [""]}

# Shapes other than rank 3; a rank-5 Fortran array gives the gather non-trivial strides.
extra_npy = {
    "npy/vector.npy": sample("f4", (17,)),
    "npy/scalar.npy": np.float64(2.75),
    "npy/empty_rows.npy": np.zeros((0, 5), dtype="f4"),
    "npy/rank5_F.npy": np.asfortranarray(sample(">f8", (2, 3, 4, 5, 6))),
    "npy/rank5_C.npy": sample("<i4", (2, 3, 4, 5, 6)),
    "npy/large.npy": sample("<f4", (3, 300, 301)),   # several pieces of 2^18 elements per run
    "npy/large_F.npy": np.asfortranarray(sample(">f4", (4, 300, 301))),   # short runs: windowed reads, refills
}
for rel, arr in extra_npy.items():
    np.save(os.path.join(OUT, rel), arr)
    add_tensor(rel, "", "npy", np.asarray(arr))
    manifest["files"][rel] = {"format": "npy", "names": [""]}

# Every float16 and every bfloat16 bit pattern.
all16 = np.arange(65536, dtype=np.uint16)
np.save(os.path.join(OUT, "npy/f16_all.npy"), all16.view(np.float16))
add_tensor("npy/f16_all.npy", "", "npy", all16.view(np.float16))
manifest["files"]["npy/f16_all.npy"] = {"format": "npy", "names": [""]}

# ------------------------------------------------------------------------------------------ .npz
os.makedirs(os.path.join(OUT, "npz"), exist_ok=True)
npz_arrays = {
    "q": sample("f4", (2, 5, 3)),
    "k": sample("f2", (5, 3)),
    "ints": sample("i8", (4, 3)),
    "flags": sample("b1", (6,)),
    "big_endian": sample(">i2", (3, 4)),
    "fortran": np.asfortranarray(sample("f8", (3, 4, 2))),
    "layer0/q": sample("u2", (2, 3)),
    "big": sample("f4", (4, 300, 257)),   # > 2^18 elements: several pieces and skipped pieces when streaming
}
for kind, saver in [("stored", np.savez), ("deflated", np.savez_compressed)]:
    rel = "npz/%s.npz" % kind
    saver(os.path.join(OUT, rel), *[sample("f4", (2, 2))], **npz_arrays)
    names = ["arr_0"] + list(npz_arrays)
    manifest["files"][rel] = {"format": "npz", "names": names}
    add_tensor(rel, "arr_0", "npz", np.load(os.path.join(OUT, rel))["arr_0"])
    for name, arr in npz_arrays.items():
        add_tensor(rel, name, "npz", arr)

# Hand-made archive: version 3.0 and 2.0 members, a member without the .npy suffix, a text file.
rel = "npz/manual.npz"
with zipfile.ZipFile(os.path.join(OUT, rel), "w", compression=zipfile.ZIP_DEFLATED) as z:
    a = sample("f8", (3, 2))
    with z.open("a.npy", "w") as f:
        npf.write_array(f, a, version=(3, 0))
    b = sample(">f4", (2, 2, 2))
    with z.open("b", "w") as f:
        npf.write_array(f, b, version=(2, 0))
    z.writestr("README.txt", "not an array")
manifest["files"][rel] = {"format": "npz", "names": ["a", "b"], "skipped": ["README.txt"]}
add_tensor(rel, "a", "npz", a)
add_tensor(rel, "b", "npz", b)

# ------------------------------------------------------------------------------------------ HDF5
os.makedirs(os.path.join(OUT, "h5"), exist_ok=True)
rel = "h5/nested.h5"
h5_names = []
with h5py.File(os.path.join(OUT, rel), "w") as f:
    f.attrs["kind"] = "fixture"
    f.attrs["version"] = 3
    f.attrs["grid"] = np.array([14, 14])
    f.attrs["ratio"] = 0.5
    file_attrs = {"kind": "fixture", "version": 3, "grid": [14, 14], "ratio": 0.5}

    def put(path, arr, **kw):
        ds = f.create_dataset(path, data=arr, **kw)
        h5_names.append(path)
        return ds

    q = sample("f4", (2, 5, 3))
    ds = put("/q", q)
    ds.attrs["units"] = "nats"
    ds.attrs["scale"] = 0.125
    ds.attrs["count"] = 7
    ds.attrs["vec"] = np.array([1.5, 2.5])
    ds.attrs["ivec"] = np.array([1, 2, 3], dtype="i4")
    ds.attrs["mat"] = np.arange(6).reshape(2, 3)
    ds.attrs["flag"] = True
    ds.attrs["names"] = ["a", "b"]
    ds.attrs["raw"] = np.bytes_(b"xyz")
    ds.attrs["umax"] = np.uint64(2**64 - 1)
    ds.attrs["f32"] = np.float32(0.1)
    q_attrs = {"units": "nats", "scale": 0.125, "count": 7, "vec": [1.5, 2.5], "ivec": [1, 2, 3],
               "mat": [[0, 1, 2], [3, 4, 5]], "flag": True, "names": ["a", "b"], "raw": "xyz",
               "umax": 2**64 - 1, "f32": float(np.float32(0.1))}
    add_tensor(rel, "/q", "hdf5", q, attributes=q_attrs)

    arrays = {
        "/layer0/attn/k": (sample("f2", (3, 4, 5)), {}),
        "/layer0/attn/k_chunked": (sample("f2", (3, 4, 5)), {"chunks": (1, 2, 2)}),
        "/layer1/v": (sample("f8", (2, 6, 4)), {"chunks": (1, 3, 4), "compression": "gzip", "shuffle": True}),
        "/layer1/deep/er/still/w": (sample("f4", (4, 4)), {"compression": "gzip", "compression_opts": 9}),
        "/be/f4": (sample(">f4", (3, 4)), {}),
        "/be/i4": (sample(">i4", (3, 4)), {"chunks": (2, 2)}),
        "/flags": (sample("b1", (3, 4)), {}),
        "/scalar": (np.float64(-3.25), {}),
        "/empty": (np.zeros((0, 3), dtype="f4"), {}),
        "/big": (sample("f4", (4, 300, 257)), {"chunks": (1, 64, 257), "compression": "gzip", "shuffle": True}),
    }
    for t in ["i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8"]:
        arrays["/ints/" + t] = (sample(t, (2, 3, 4)), {"chunks": (1, 3, 4), "compression": "gzip"} if t.endswith("4") else {})
    for path, (arr, kw) in arrays.items():
        put(path, arr, **kw)
        add_tensor(rel, path, "hdf5", np.asarray(arr))

    # An enumeration over int16 (not bool): read as its integer values.
    enum_t = h5py.enum_dtype({"RED": 0, "GREEN": 1, "BLUE": 7}, basetype="i2")
    e = np.array([[0, 1], [7, 1]], dtype="i2")
    f.create_dataset("/enum", data=e, dtype=enum_t)
    h5_names.append("/enum")
    add_tensor(rel, "/enum", "hdf5", e, dtype="int16")

    # Not numeric tensors: listed as skipped, selecting them is an error.
    f.create_dataset("/text/names", data=["alpha", "beta"], dtype=h5py.string_dtype())
    f.create_dataset("/text/fixed", data=np.array([b"ab", b"cd"], dtype="S2"))
    f.create_dataset("/complex", data=np.array([1 + 2j, 3 - 1j], dtype="c8"))
    # A hard link back to an ancestor (a cycle) and a soft link: the walk must end and list /q once.
    f["/layer0/attn/up"] = f["/layer0"]
    f["/layer1/soft"] = h5py.SoftLink("/q")
manifest["files"][rel] = {"format": "hdf5", "names": sorted(h5_names), "attributes": file_attrs,
                          "skipped": ["/complex", "/text/fixed", "/text/names"]}

# lzf is built into h5py but not into the HDF5 C library: the reader must say which filter is missing.
rel = "h5/lzf.h5"
with h5py.File(os.path.join(OUT, rel), "w") as f:
    lzf = sample("f4", (4, 8))
    f.create_dataset("/x", data=lzf, compression="lzf", chunks=(2, 8))
add_tensor(rel, "/x", "hdf5", lzf)   # readable only if a plugin provides lzf; the test accepts either outcome
manifest["files"][rel] = {"format": "hdf5", "names": ["/x"], "lzf": True}

# ----------------------------------------------------------------------------------- .safetensors
os.makedirs(os.path.join(OUT, "st"), exist_ok=True)


def write_safetensors(path, tensors, metadata=None, pad=True, header_override=None):
    """tensors: list of (name, dtype string, shape, raw bytes)."""
    header, offset, blobs = {}, 0, []
    for name, dt, shape, raw in tensors:
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    if metadata is not None:
        header["__metadata__"] = metadata
    text = json.dumps(header) if header_override is None else header_override
    text = text.encode("utf-8")
    if pad:
        text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def bf16_bits(x):
    """float32 values -> bfloat16 bits by truncation, and the float64 values those bits mean."""
    bits = (np.asarray(x, dtype="<f4").view("<u4") >> 16).astype("<u2")
    widened = (bits.astype("<u4") << 16).view("<f4").astype("f8")
    return bits, widened


st_tensors, st_expect = [], []
for name, code, st_code, shape in [
    ("model.layers.0.q", "f4", "F32", (2, 3, 4)),
    ("model.layers.0.k", "f2", "F16", (3, 4)),
    ("d", "f8", "F64", (4,)),
    ("i8", "i1", "I8", (2, 3)), ("i16", "i2", "I16", (2, 3)), ("i32", "i4", "I32", (2, 3)), ("i64", "i8", "I64", (2, 3)),
    ("u8", "u1", "U8", (2, 3)), ("u16", "u2", "U16", (2, 3)), ("u32", "u4", "U32", (2, 3)), ("u64", "u8", "U64", (2, 3)),
    ("mask", "b1", "BOOL", (2, 3)),
    ("scalar", "f4", "F32", ()),
    ("empty", "f4", "F32", (0, 3)),
    ("big", "f4", "F32", (3, 100, 7)),
]:
    dt = np.dtype(code).newbyteorder("<") if code not in ("i1", "u1", "b1") else np.dtype(code)
    arr = np.asarray(sample(dt, shape) if shape != () else np.float32(1.25), dtype=dt)
    st_tensors.append((name, st_code, shape, arr.tobytes()))
    st_expect.append((name, arr, None, dtype_name(dt)))
bf = rng.standard_normal((2, 5)).astype("f4")
bf[0, :4] = [np.inf, -np.inf, np.nan, 1e-40]
bits, widened = bf16_bits(bf)
st_tensors.append(("bf", "BF16", (2, 5), bits.tobytes()))
st_expect.append(("bf", widened, widened, "bfloat16"))
bits_all, widened_all = bf16_bits(np.arange(65536, dtype=np.uint32).astype("<u4").__lshift__(16).view("<f4"))
st_tensors.append(("bf_all", "BF16", (65536,), bits_all.tobytes()))
st_expect.append(("bf_all", widened_all, widened_all, "bfloat16"))
rel = "st/model.safetensors"
write_safetensors(os.path.join(OUT, rel), st_tensors, metadata={"format": "pt", "source": "fixture"})
for name, arr, exp, dname in st_expect:
    add_tensor(rel, name, "safetensors", arr, dtype=dname, expected=exp)
manifest["files"][rel] = {"format": "safetensors", "names": [t[0] for t in st_tensors],
                          "attributes": {"format": "pt", "source": "fixture"}}

rel = "st/single.safetensors"
one = sample("<f4", (4, 6))
write_safetensors(os.path.join(OUT, rel), [("only", "F32", (4, 6), one.tobytes())], pad=False)
add_tensor(rel, "only", "safetensors", one)
manifest["files"][rel] = {"format": "safetensors", "names": ["only"], "attributes": {}}

# -------------------------------------------------------------------------------------- selection
os.makedirs(os.path.join(OUT, "sel"), exist_ok=True)
sel_arrays = {
    "nd": (7, 4), "hnd": (3, 7, 4), "bhnd": (2, 3, 7, 4), "bnhd": (2, 7, 3, 4), "dn": (4, 7),
    "lbhnd": (2, 2, 3, 7, 4), "ndh": (7, 4, 3),
}
with h5py.File(os.path.join(OUT, "sel/sel.h5"), "w") as h5:
    for layout, shape in sel_arrays.items():
        arr = rng.standard_normal(shape)
        np.save(os.path.join(OUT, "sel/%s.npy" % layout), arr)
        np.save(os.path.join(OUT, "sel/%s_F.npy" % layout), np.asfortranarray(arr))
        h5.create_dataset("/" + layout, data=arr.astype("f4"), chunks=tuple(max(1, s // 2) for s in shape),
                          compression="gzip")
        index_axes = [c for c in layout if c not in "nd"]
        choices = [{}, {c: shape[layout.index(c)] - 1 for c in index_axes}]
        if len(index_axes) > 1:
            choices.append({index_axes[0]: 1})
        for at in choices:
            for prefix in [0, 2]:
                idx = []
                for axis, c in enumerate(layout):
                    idx.append(slice(prefix, None) if c == "n" else slice(None) if c == "d" else at.get(c, 0))
                sub = arr[tuple(idx)]                   # 2-D, axes in layout order of n and d
                if layout.index("n") > layout.index("d"):
                    sub = sub.T
                at_text = ",".join("%s=%d" % (k, v) for k, v in at.items())
                default = layout in ("nd", "hnd", "bhnd")
                for ref, exp in [("sel/%s.npy" % layout, sub), ("sel/%s_F.npy" % layout, sub),
                                 ("sel/sel.h5:/%s" % layout, sub.astype("f4"))]:
                    manifest["selection"].append({
                        "ref": ref, "layout": "" if (default and ref.endswith("npy") and not at) else layout,
                        "at": at_text, "prefix": prefix, "rows": sub.shape[0], "cols": sub.shape[1],
                        "expected": save_expected(exp), "at_full": {c: at.get(c, 0) for c in index_axes}})

# A NaN and an Inf placed where the tests expect to be told about them.
nan_arr = np.ones((3, 7, 6), dtype="f4")
nan_arr[2, 3, 5] = np.nan
np.save(os.path.join(OUT, "sel/nan.npy"), nan_arr)
inf_arr = np.ones((2, 5, 4))
inf_arr[1, 4, 0] = -np.inf
with h5py.File(os.path.join(OUT, "sel/inf.h5"), "w") as h5:
    h5["/acts/q"] = inf_arr

# ------------------------------------------------------------------------------------ hostile files
BAD = os.path.join(OUT, "bad")


def bad(name, data):
    with open(os.path.join(BAD, name), "wb") as f:
        f.write(data)


def npy_bytes(header_text, data=b"", version=1):
    h = header_text.encode("latin1")
    if version == 1:
        return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + data
    return b"\x93NUMPY" + bytes([version, 0]) + struct.pack("<I", len(h)) + h + data


good = np.arange(100, dtype="<f8").reshape(10, 10)
with open(os.path.join(BAD, "truncated.npy"), "wb") as f:
    np.save(f, good)
raw = open(os.path.join(BAD, "truncated.npy"), "rb").read()
bad("truncated.npy", raw[:-100])
with open(os.path.join(BAD, "two_arrays.npy"), "wb") as f:
    np.save(f, good)
    np.save(f, good)
bad("bad_magic.npy", b"\x93NUMPX\x01\x00" + raw[8:])
bad("short.npy", b"\x93NUMPY\x01")
bad("huge_shape.npy", npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000, 1000000), }\n", b"\0" * 16))
bad("overflow_shape.npy", npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000, 1000000000000, 1000000), }\n", b"\0" * 16))
bad("header_beyond.npy", b"\x93NUMPY\x01\x00" + struct.pack("<H", 60000) + b"{'descr': '<f8'" + b" " * 100)
bad("header_beyond_v2.npy", b"\x93NUMPY\x02\x00" + struct.pack("<I", 0xFFFFFFF0) + b"{" + b" " * 100)
bad("version4.npy", npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }\n", b"\0" * 8, version=4))
bad("not_dict.npy", npy_bytes("[1, 2, 3]\n"))
bad("garbage_header.npy", npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), } __import__('os')\n", b"\0" * 16))
bad("extra_key.npy", npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), 'evil': 1}\n", b"\0" * 16))
bad("missing_key.npy", npy_bytes("{'descr': '<f8', 'shape': (2,), }\n", b"\0" * 16))
bad("negative_shape.npy", npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (-2, 3), }\n", b"\0" * 16))
bad("deep_header.npy", npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': " + "(" * 500 + ")" * 500 + "}\n"))
# Found by fuzz_npy: the item size in bits (shown in the message) overflowed an int.
bad("huge_itemsize.npy", npy_bytes("{'descr': '<f499999992', 'fortran_order': False, 'shape': (3, 2), }\n", b"\0" * 16))
bad("unterminated.npy", npy_bytes("{'descr': '<f8, 'fortran_order': False, 'shape': (2,)}\n", b"\0" * 16))
# Key order and spacing NumPy never writes, but a Python literal allows: must be accepted.
bad("odd_spacing.npy", npy_bytes("{ \"shape\" :(2,3) ,'fortran_order':True,   'descr':'>i2'}   \n",
                                 np.arange(6, dtype=">i2").reshape(2, 3).T.tobytes(order="C")))
np.save(os.path.join(BAD, "complex.npy"), np.array([1 + 1j], dtype="c8"))
np.save(os.path.join(BAD, "object.npy"), np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
np.save(os.path.join(BAD, "unicode.npy"), np.array(["abc", "de"]))
np.save(os.path.join(BAD, "bytes.npy"), np.array([b"abc"]))
np.save(os.path.join(BAD, "structured.npy"), np.zeros(3, dtype=[("x", "f4"), ("y", "i4")]))
np.save(os.path.join(BAD, "datetime.npy"), np.array(["2024-01-01"], dtype="datetime64[D]"))
np.save(os.path.join(BAD, "longdouble.npy"), np.zeros(2, dtype=np.longdouble))

# npz
np.savez_compressed(os.path.join(BAD, "corrupt_deflate.npz"), q=rng.standard_normal((200, 200)))
raw = bytearray(open(os.path.join(BAD, "corrupt_deflate.npz"), "rb").read())
for i in range(2000, 2100):   # inside the deflate stream of q.npy, well after its .npy header
    raw[i] ^= 0x5A
bad("corrupt_deflate.npz", bytes(raw))
np.savez(os.path.join(BAD, "corrupt_stored.npz"), q=rng.standard_normal((50, 50)))
raw = bytearray(open(os.path.join(BAD, "corrupt_stored.npz"), "rb").read())
raw[5000] ^= 0xFF   # a data byte: only the CRC can tell
bad("corrupt_stored.npz", bytes(raw))
np.savez(os.path.join(BAD, "corrupt_directory.npz"), q=np.zeros((4, 4)))
raw = bytearray(open(os.path.join(BAD, "corrupt_directory.npz"), "rb").read())
cd = raw.rfind(b"PK\x01\x02")
raw[cd:cd + 4] = b"XX\x01\x02"
bad("corrupt_directory.npz", bytes(raw))
np.savez(os.path.join(BAD, "truncated_archive.npz"), q=np.zeros((40, 40)))
raw = open(os.path.join(BAD, "truncated_archive.npz"), "rb").read()
bad("truncated_archive.npz", raw[:len(raw) // 2])
with zipfile.ZipFile(os.path.join(BAD, "member_truncated.npz"), "w", compression=zipfile.ZIP_DEFLATED) as z:
    buf = npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (100, 100), }\n", b"\0" * 800)
    z.writestr("q.npy", buf)
with zipfile.ZipFile(os.path.join(BAD, "member_huge_shape.npz"), "w") as z:
    z.writestr("q.npy", npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000, 1000000), }\n", b"\0" * 16))
with zipfile.ZipFile(os.path.join(BAD, "member_bad_header.npz"), "w") as z:
    z.writestr("q.npy", npy_bytes("{'descr': '<c16', 'fortran_order': False, 'shape': (1,), }\n", b"\0" * 16))
with zipfile.ZipFile(os.path.join(BAD, "member_not_npy.npz"), "w") as z:
    z.writestr("q.npy", b"this is not an npy file at all")
with zipfile.ZipFile(os.path.join(BAD, "torch_renamed.npz"), "w") as z:   # what torch.save writes
    z.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
    z.writestr("archive/data/0", b"\0" * 16)
    z.writestr("archive/version", b"3\n")
bad("not_zip.npz", b"this is plain text, not a zip archive\n" * 4)

# safetensors
def st_raw(header_bytes, data=b"", length=None):
    n = len(header_bytes) if length is None else length
    return struct.pack("<Q", n) + header_bytes + data


f32 = np.arange(6, dtype="<f4").tobytes()
bad("header_absurd.safetensors", st_raw(b'{"a": 1}', length=2**63))
bad("header_past_end.safetensors", st_raw(b'{"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}', length=5000))
with open(os.path.join(BAD, "header_over_limit.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", 120 * 2**20))
    f.write(b"{")
    f.truncate(150 * 2**20)   # sparse: a 150 MB file that uses no disk
def st_json(d):
    return json.dumps(d).encode()
bad("offsets_out_of_range.safetensors", st_raw(st_json({"x": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 240]}}), f32))
bad("offsets_inconsistent.safetensors", st_raw(st_json({"x": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 20]}}), f32))
bad("offsets_reversed.safetensors", st_raw(st_json({"x": {"dtype": "F32", "shape": [0], "data_offsets": [20, 4]}}), f32))
bad("offsets_overlap.safetensors", st_raw(st_json({"x": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                                                   "y": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}}), f32))
bad("huge_shape.safetensors", st_raw(st_json({"x": {"dtype": "F64", "shape": [2**40, 2**40], "data_offsets": [0, 24]}}), f32))
bad("unknown_dtype.safetensors", st_raw(st_json({"x": {"dtype": "Q7", "shape": [6], "data_offsets": [0, 24]}}), f32))
bad("f8_dtype.safetensors", st_raw(st_json({"x": {"dtype": "F8_E4M3", "shape": [24], "data_offsets": [0, 24]}}), f32))
bad("invalid_json.safetensors", st_raw(b'{"x": {"dtype": "F32", "shape": [6], "data_offsets": [0, 24]', f32))
# found by fuzz_safetensors: a number JSON cannot hold (nlohmann throws out_of_range, not parse_error)
bad("number_overflow.safetensors", st_raw(b'{"x": {"dtype": "F32", "shape": [1e999], "data_offsets": [0, 24]}}', f32))
bad("json_array.safetensors", st_raw(b'[1, 2, 3]', f32))
bad("missing_field.safetensors", st_raw(st_json({"x": {"dtype": "F32", "shape": [6]}}), f32))
bad("negative_shape.safetensors", st_raw(st_json({"x": {"dtype": "F32", "shape": [-6], "data_offsets": [0, 24]}}), f32))
bad("deep_json.safetensors", st_raw(b'{"__metadata__": ' + b"[" * 100000 + b"]" * 100000 + b"}", f32))
bad("short.safetensors", b"\x05\x00\x00")

# HDF5
with h5py.File(os.path.join(BAD, "truncated.h5"), "w") as f:
    f["q"] = rng.standard_normal((64, 64))
raw = open(os.path.join(BAD, "truncated.h5"), "rb").read()
bad("truncated.h5", raw[:len(raw) // 2])
with h5py.File(os.path.join(BAD, "corrupt_chunk.h5"), "w") as f:
    ds = f.create_dataset("q", data=rng.standard_normal((4, 256)), chunks=(1, 256), compression="gzip")
    chunk = ds.id.get_chunk_info(1)
raw = bytearray(open(os.path.join(BAD, "corrupt_chunk.h5"), "rb").read())
for i in range(chunk.byte_offset + 20, chunk.byte_offset + 60):   # inside the deflate stream of chunk 1
    raw[i] ^= 0xA5
bad("corrupt_chunk.h5", bytes(raw))
bad("garbage.h5", bytes(rng.integers(0, 256, size=4096, dtype=np.uint8)))
bad("npy_named.h5", open(os.path.join(OUT, "npy/vector.npy"), "rb").read())
with h5py.File(os.path.join(BAD, "strings_only.h5"), "w") as f:
    f.create_dataset("/names", data=["a", "b"], dtype=h5py.string_dtype())

bad("model.pt", b"\x80\x02}q\x00.")   # a pickle
bad("acts.mat", b"MATLAB 5.0 MAT-file")
os.makedirs(os.path.join(BAD, "folder.npy"), exist_ok=True)
bad("empty.npy", b"")
bad("empty.npz", b"")
bad("empty.h5", b"")
bad("empty.safetensors", b"")

with open(os.path.join(OUT, "manifest.json"), "w") as f:
    json.dump(manifest, f, indent=1)
