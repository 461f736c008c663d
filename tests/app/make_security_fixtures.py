#!/usr/bin/python3
"""Hostile data files for tests/app/test_security_readers.cpp (docs/security.md "Data files").

Usage: make_security_fixtures.py DIR. Writes into DIR (made by the test, empty):

  secret.bin            float64 bytes standing for a file the reader must never see (e.g. /etc/passwd)
  ext.h5                /q stored in external raw storage (secret.bin); /k an ordinary dataset
  ext_abs.h5            /q stored in an absolute external file (/etc/passwd)
  ext_fifo.h5           /q stored in the external file "fifo" (the test makes it a FIFO)
  src.h5                /data [4, 8] float64 (the source of the virtual datasets), /k [4, 8]; also written
                        into DIR/inner/ and DIR/outside/
  vds_ok.h5             /q virtual over src.h5:/data (same folder), /k ordinary
  vds_same.h5           /q virtual over its own /real (source file ".")
  vds_whole.h5          /q virtual over all of src.h5:/data (a whole-source mapping, stored without its shape)
  vds_missing.h5        /q virtual over missing.h5:/data (no such file)
  vds_fifo.h5           /q virtual over vfifo.h5:/data (the test makes vfifo.h5 a FIFO)
  vds_partial.h5        /q virtual [4, 8] with only its first two rows mapped (the rest would read as fill)
  vds_nested.h5         /q virtual over vds_ok.h5:/q (a virtual source of a virtual dataset)
  inner/vds_outside.h5  /q virtual over ../outside/src.h5:/data (a folder beside its own)
  inner/vds_absolute.h5 /q virtual over the absolute path of outside/src.h5
  inner/vds_link.h5     /q virtual over link.h5 (the test makes it a symlink to ../outside/src.h5)
  elink.h5              /q an external link to src.h5:/data, /k ordinary
  plugin_filter.h5      /q chunked with filter id 32004 (LZ4: an HDF5 plugin, never built in), optional
  padding_old.h5        the PyTorch bridge's MultiheadAttention layer with key_padding_mask = True and no
                        padded_tokens (a recording whose padded keys are still in the file)
  padding_none.h5       the same with key_padding_mask = False
  inner/mix_ok.h5       /q, /k [8, 4] whose root attribute mixing names mix.npy beside it (a 2 x 2 matrix)
  inner/mix_up.h5       the same naming ../outside/mix.npy, inner/mix_abs.h5 the absolute path of it
"""
import os
import sys

import h5py
import numpy as np

out = sys.argv[1]
inner = os.path.join(out, "inner")
outside = os.path.join(out, "outside")
os.makedirs(inner, exist_ok=True)
os.makedirs(outside, exist_ok=True)

rng = np.random.default_rng(21)
data = rng.standard_normal((4, 8))
keys = rng.standard_normal((4, 8))


def p(*parts):
    return os.path.join(*parts)


# External raw storage: the bytes of /q live in another file.
data.astype("<f8").tofile(p(out, "secret.bin"))
with h5py.File(p(out, "ext.h5"), "w") as f:
    f.create_dataset("q", shape=(4, 8), dtype="<f8", external=[("secret.bin", 0, data.nbytes)])
    f["k"] = keys
with h5py.File(p(out, "ext_abs.h5"), "w") as f:
    f.create_dataset("q", shape=(4, 8), dtype="u1", external=[("/etc/passwd", 0, 32)])
    f["k"] = keys
with h5py.File(p(out, "ext_fifo.h5"), "w") as f:
    f.create_dataset("q", shape=(4, 8), dtype="<f8", external=[("fifo", 0, data.nbytes)])
    f["k"] = keys

# Virtual datasets.
for folder in (out, inner, outside):
    with h5py.File(p(folder, "src.h5"), "w") as f:
        f["data"] = data
        f["k"] = keys


def vds(path, source_file, source_name="data", rows=4, shape=(4, 8), real=False):
    layout = h5py.VirtualLayout(shape=shape, dtype="<f8")
    layout[:rows] = h5py.VirtualSource(source_file, source_name, shape=shape)[:rows]
    with h5py.File(path, "w") as f:
        if real:
            f["real"] = data
        f.create_virtual_dataset("q", layout, fillvalue=0.0)
        f["k"] = keys


vds(p(out, "vds_ok.h5"), "src.h5")
whole = h5py.VirtualLayout(shape=(4, 8), dtype="<f8")
whole[:] = h5py.VirtualSource("src.h5", "data", shape=(4, 8))
with h5py.File(p(out, "vds_whole.h5"), "w") as f:
    f.create_virtual_dataset("q", whole, fillvalue=0.0)
vds(p(out, "vds_same.h5"), ".", "real", real=True)
vds(p(out, "vds_missing.h5"), "missing.h5")
vds(p(out, "vds_fifo.h5"), "vfifo.h5")
vds(p(out, "vds_partial.h5"), "src.h5", rows=2)
vds(p(out, "vds_nested.h5"), "vds_ok.h5", "q")
vds(p(inner, "vds_outside.h5"), "../outside/src.h5")
vds(p(inner, "vds_absolute.h5"), os.path.abspath(p(outside, "src.h5")))
vds(p(inner, "vds_link.h5"), "link.h5")

# An external link: /q is another file's dataset.
with h5py.File(p(out, "elink.h5"), "w") as f:
    f["q"] = h5py.ExternalLink("src.h5", "/data")
    f["k"] = keys

# A filter only a plugin provides (LZ4, registered id 32004), optional so that h5py can write it here.
with h5py.File(p(out, "plugin_filter.h5"), "w") as f:
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_chunk((4, 8))
    dcpl.set_filter(32004, h5py.h5z.FLAG_OPTIONAL, ())
    space = h5py.h5s.create_simple((4, 8))
    ds = h5py.h5d.create(f.id, b"q", h5py.h5t.IEEE_F64LE, space, dcpl=dcpl)
    ds.write(h5py.h5s.ALL, h5py.h5s.ALL, np.ascontiguousarray(data))
    f["k"] = keys

# The PyTorch bridge's file for one nn.MultiheadAttention layer (tools/python/attnscope_dump.py, "The file"):
# [heads, N, head_dim], root attributes, per-dataset attributes.
for name, kpm in (("padding_old.h5", True), ("padding_none.h5", False)):
    with h5py.File(p(out, name), "w") as f:
        f.attrs.update({"source": "attnscope_dump", "source_version": "1.0", "layout": "hnd", "n_layers": 1,
                        "n_heads": 2, "n_tokens": 6, "batch_index": 0, "causal": False, "prefix_tokens": 0,
                        "model": "MultiheadAttention"})
        for role in ("q", "k", "v"):
            d = f.create_dataset(f"layers/0/{role}", data=rng.standard_normal((2, 6, 4)).astype("<f4"))
            d.attrs.update({"module": "attn", "module_type": "MultiheadAttention", "scale": 0.5, "mask": "none",
                            "key_padding_mask": kpm, "extra_keys": 0})

# The mixing attribute names a matrix file: beside the data file, or (refused) above it or by absolute path.
mix = np.array([[0.9, 0.1], [0.2, 0.8]])
np.save(p(inner, "mix.npy"), mix)
np.save(p(outside, "mix.npy"), mix)
for name, ref in (("mix_ok.h5", "mix.npy"), ("mix_up.h5", "../outside/mix.npy"),
                  ("mix_abs.h5", os.path.abspath(p(outside, "mix.npy")))):
    with h5py.File(p(inner, name), "w") as f:
        f["q"] = rng.standard_normal((8, 4))
        f["k"] = rng.standard_normal((8, 4))
        f.attrs["mixing"] = ref
