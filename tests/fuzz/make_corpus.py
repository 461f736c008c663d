#!/usr/bin/python3
"""Writes the small seed corpora for the libFuzzer targets into tests/fuzz/corpus/<target>/.

Deterministic (fixed seed); rerun after changing it and commit the files. Needs only NumPy.
"""
import io
import json
import os
import struct
import zipfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(6)


def out(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def npy_bytes(a, fortran=False):
    buf = io.BytesIO()
    np.save(buf, np.asfortranarray(a) if fortran else a)
    return buf.getvalue()


arrays = {
    "f32_nd": rng.standard_normal((4, 3)).astype(np.float32),
    "f64_hnd": rng.standard_normal((2, 3, 2)),
    "f16": rng.standard_normal((3, 2)).astype(np.float16),
    "i64": np.arange(6, dtype=np.int64).reshape(2, 3),
    "u8": np.arange(4, dtype=np.uint8),
    "bool": np.array([[True, False], [False, True]]),
    "be_f32": rng.standard_normal((2, 2)).astype(">f4"),
    "scalar": np.array(1.5),
    "empty": np.zeros((0, 3), dtype=np.float32),
}
for name, a in arrays.items():
    out("fuzz_npy", name + ".npy", npy_bytes(a))
out("fuzz_npy", "fortran.npy", npy_bytes(rng.standard_normal((3, 2)), fortran=True))


def npz_bytes(members, compressed):
    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buf, **members)
    return buf.getvalue()


out("fuzz_npz", "plain.npz", npz_bytes({"q": arrays["f32_nd"], "k": arrays["f64_hnd"]}, False))
out("fuzz_npz", "compressed.npz", npz_bytes({"q": arrays["f32_nd"], "n": arrays["i64"]}, True))
out("fuzz_npz", "one.npz", npz_bytes({"v": arrays["f16"]}, False))
zbuf = io.BytesIO()
with zipfile.ZipFile(zbuf, "w") as z:
    z.writestr("notes.txt", "not an array")
    z.writestr("a.npy", npy_bytes(arrays["u8"]))
out("fuzz_npz", "mixed.npz", zbuf.getvalue())

ST = {"float32": "F32", "float64": "F64", "float16": "F16", "int64": "I64", "uint8": "U8", "bool": "BOOL"}


def safetensors_bytes(tensors, metadata=None):
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        raw = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": ST[a.dtype.name], "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


out("fuzz_safetensors", "two.safetensors", safetensors_bytes({"q": arrays["f32_nd"], "k": arrays["f64_hnd"]}))
out("fuzz_safetensors", "meta.safetensors",
    safetensors_bytes({"layers.0.q": arrays["f16"]}, {"format": "pt", "model": "tiny"}))
out("fuzz_safetensors", "ints.safetensors", safetensors_bytes({"i": arrays["i64"], "b": arrays["bool"], "u": arrays["u8"]}))
out("fuzz_safetensors", "empty.safetensors", safetensors_bytes({}))

sel = {
    "basic": b"acts.h5:/layers/0/q\nh=1\nhnd",
    "bhnd": b"\x04acts.npz:q\nb=1,h=2\nbhnd",
    "npy": b"\x02x.npy\n\nnd",
    "colon": b"\x03dir:with:colon/a.safetensors:layers.0.q\nh=2\ndnh",
    "transposed": b"\x02a.h5\n\ndn",
}
for name, data in sel.items():
    out("fuzz_selection", name, data)

jobs = {
    "full.toml": """inputs = ["acts/*.h5", "more/model_384.h5"]
q = "/layers/q"
k = "/layers/k"
layout = "lhnd"
at = { b = 0 }
heads = "all"
layers = "all"
prefix_tokens = 1
mechanisms = ["softmax", "linear", "mhla"]
max_memory = "8G"

[attention]
grid = [14, 14]
block_grid = [2, 2]
mixing = "cos"
feature_map = "relu"
normalize = "row"
causal = false

[metrics]
top_k = 32

[[sweep]]
name = "collapse_n"
vary = "n=49,100,196"
subsample = "crop"
heads = "all"

[[figure]]
view = "spectrum"
""",
    "minimal.toml": 'inputs = ["a.h5"]\n',
    "heads.toml": 'inputs = ["x.npz"]\nq = "q"\nk = "k"\nheads = [0, 3]\nlayers = [1]\nmechanisms = ["softmax"]\n'
                  '[attention]\nblocks = 16\nmixing = "mix.npy"\n',
}
for name, text in jobs.items():
    out("fuzz_toml_job", name, text.encode())

# The kernel-choice cache (gemm-choice.txt): what calibrate_gemm and measured_path write, and its damage.
key = "gemm-choice-v1|Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz|avx512|SkylakeX|threads=2"
caches = {
    "written.txt": f"{key}\town own openblas\n{key}|svd-stage1-b32\topenblas\n",
    "one.txt": f"{key}\topenblas openblas openblas\n",
    "garbage.txt": "no tab\n\t\nkey\t\n\tvalue\nctl\x01\town\n" + "x" * 1100 + "\town\n",
    "crlf.txt": f"{key}\town own own\r\n",
}
for name, text in caches.items():
    out("fuzz_gemm_cache", name, text.encode())

# Sessions (fuzz_session): one as the app saves it, recipes that may write (tiny) and the hostile ones
# of docs/security.md "Sessions" (absolute, "..", a dot-file, through the folder's symlink `out`).
session = {
    "attnscope_session": 1,
    "files": ["../data/vit_local2d.h5"],
    "tensors": {"q": {"file": "../data/vit_local2d.h5", "name": "/q"}, "k": {"file": "../data/vit_local2d.h5", "name": "/k"}},
    "selection": {"layout": "", "at": {"h": 2}, "prefix_tokens": 0, "token_grid": [16, 16]},
    "mechanism": {"scale": None, "causal": False, "feature_map": "relu", "blocks": 16, "mixing": "file",
                  "mixing_file": "mix.npy", "mixing_dataset": ""},
    "view": "maps", "query": 7, "views": {"maps": {"colormap": "viridis", "log": False}},
}
out("fuzz_session", "saved.json", json.dumps(session, indent=4).encode())
recipes = {
    "tiny.json": {"tiny.h5": {"kind": "gaussian", "n": 4, "d": 2}},
    "subfolder.json": {"generated/local.h5": {"kind": "local2d", "n": 9, "d": 2, "heads": 2, "seed": 3, "grid": [3, 3]}},
    "hostile.json": {".bashrc": {"n": 4, "d": 2}, "/tmp/x.h5": {"n": 4, "d": 2}, "../../x.h5": {"n": 4, "d": 2},
                     "sub/../../x.h5": {"n": 4, "d": 2}, "out/x.h5": {"n": 4, "d": 2}, "exists.h5": {"n": 4, "d": 2}},
    "huge.json": {"big.h5": {"n": 4294967296, "d": -1, "heads": 1e300}},
}
for name, generate in recipes.items():
    out("fuzz_session", name, json.dumps({"attnscope_session": 1, "generate": generate, "files": list(generate)}).encode())


# fuzz_shard: up to two shards, each shard.json NUL results.jsonl (tests/fuzz/fuzz_shard.cpp).
def settings_hash(settings):
    import hashlib
    text = json.dumps(settings, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


job_settings = {"q": "q", "k": "k", "layout": "", "prefix_tokens": 0, "at": {}, "mechanisms": ["softmax", "linear"],
                "scale": -1.0, "causal": False}
S = settings_hash(job_settings)


def shard_json(shard, shards, total, detail=True):
    j = {"attnscope_version": "0.0", "settings": S, "shard": shard, "shards": shards, "units_total": total,
         "units": list(range(shard, total, shards)), "mechanisms": ["softmax", "linear"]}
    if detail:
        j["job_settings"] = job_settings
    return json.dumps(j, indent=2, ensure_ascii=False).encode()


def results(shard, shards, total, files=("acts/a.h5", "acts/b.h5"), heads=2):
    lines = []
    for u in range(shard, total, shards):
        f, h = files[u // heads], u % heads
        for mi, m in enumerate(["softmax", "linear"]):
            rec = {"key": f"{f}|l=-|h={h}|{m}", "unit": u, "mechanism_index": mi, "settings": S,
                   "input": {"file": f, "sha256": "00" * 32, "n": 16, "d": 4}, "layer": None, "head": h,
                   "mechanism": m, "rank": 16 - mi, "effective_rank": 9.5, "entropy": {"mean": 2.0, "std": 0.1},
                   "seconds": 0.01}
            lines.append(json.dumps(rec, separators=(",", ":"), ensure_ascii=False))
    return ("\n".join(lines) + "\n").encode()


out("fuzz_shard", "one_shard", shard_json(0, 1, 4) + b"\0" + results(0, 1, 4))
out("fuzz_shard", "two_shards", shard_json(0, 2, 4) + b"\0" + results(0, 2, 4) + b"\0" + shard_json(1, 2, 4) + b"\0" +
    results(1, 2, 4))
out("fuzz_shard", "partial", shard_json(1, 2, 4, detail=False) + b"\0" + results(1, 2, 4) + b"\0" + shard_json(0, 2, 4))
out("fuzz_shard", "torn_tail", shard_json(0, 1, 4) + b"\0" + results(0, 1, 4)[:-40])
