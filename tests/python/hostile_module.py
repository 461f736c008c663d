"""Hostile sweep of `import attnscope` (issue 30; docs/security.md "The Python module").

Each test method is one scripted case; each asserts something that could fail: the exact exception type and
the start of its message (the command line's `error:` text where the command line can express the input),
results equal to `attnscope analyze --json` on the same inputs, no crash (risky cases run in a child
interpreter with a timeout: a negative return code is a signal), and nothing written outside a temporary
folder. Run by CTest (tests/python/CMakeLists.txt, Python.Hostile.*) with PYTHONPATH at the build's python/
folder, ATTNSCOPE_BINARY naming the executable and ATTNSCOPE_SOURCE_DIR the repository.
"""
import gc
import json
import os
import stat
import subprocess
import sys
import tempfile
import threading
import unittest

import h5py
import numpy as np

import attnscope
from documents import VARYING, keyword_spelling, strip  # noqa: F401  (tests/python/documents.py)

BINARY = os.environ["ATTNSCOPE_BINARY"]
SOURCE = os.environ["ATTNSCOPE_SOURCE_DIR"]
TMP = None   # the module-wide temporary folder (setUpModule)


def setUpModule():
    global TMP
    TMP = tempfile.TemporaryDirectory(prefix="attnscope-hostile-")


def tearDownModule():
    TMP.cleanup()



def path(*parts):
    return os.path.join(TMP.name, *parts)


def cli(*args, cwd=None, env=None, timeout=120):
    return subprocess.run([BINARY, *args], capture_output=True, cwd=cwd, env=env, timeout=timeout)


def cli_outcome(*args, cwd=None):
    """('ok', document) or ('error', message after `error: `) of `attnscope analyze ARGS --json -`."""
    p = cli("analyze", *args, "--json", "-", cwd=cwd)
    if p.returncode == 0:
        return "ok", json.loads(p.stdout)
    err = p.stderr.decode("utf-8", "replace").strip().splitlines()
    assert p.returncode == 2 and err and err[-1].startswith("error: "), (p.returncode, err)
    return "error", err[-1][len("error: "):]



def save(name, array):
    p = path(name)
    np.save(p, array)
    return p


def child(code, timeout=60, env=None, cwd=None):
    """Runs `code` in a child interpreter (the module imported); returns (returncode, stdout, stderr)."""
    full_env = dict(os.environ if env is None else env)
    p = subprocess.run([sys.executable, "-c", "import attnscope, numpy as np, os, sys\n" + code],
                       capture_output=True, text=True, timeout=timeout, env=full_env, cwd=cwd)
    return p.returncode, p.stdout, p.stderr


RNG = np.random.default_rng(3030)
Q = RNG.standard_normal((64, 8))
K = RNG.standard_normal((64, 8))


class Case(unittest.TestCase):
    def same_as_cli_on_npy(self, q, k=None, cli_args=(), **options):
        """The module on array q (and k) against the command line on the same arrays saved as .npy files: the same
        results, or the same error with the files' names replaced by the arrays'."""
        k = K if k is None else k
        qa, ka = np.asarray(q), np.asarray(k)
        qp, kp = save(f"q_{id(q)}.npy", qa), save(f"k_{id(k)}.npy", ka)
        outcome, value = cli_outcome("--q", qp, "--k", kp, *cli_args)
        if outcome == "ok":
            doc = attnscope.analyze(q, k, **options)
            self.assertEqual(strip(doc["results"]), strip(value["results"]))
            return doc
        with self.assertRaises(ValueError) as caught:
            attnscope.analyze(q, k, **options)
        qn = f"<q: {qa.dtype.name} array {list(qa.shape)}>".replace("'", "")
        kn = f"<k: {ka.dtype.name} array {list(ka.shape)}>"
        self.assertEqual(str(caught.exception), value.replace(qp, qn).replace(kp, kn))
        return None

    def same_error_as_cli(self, cli_args, call, replace=()):
        outcome, message = cli_outcome(*cli_args)
        self.assertEqual(outcome, "error", message)
        message = keyword_spelling(message)
        for old, new in replace:
            message = message.replace(old, new)
        with self.assertRaises(ValueError) as caught:
            call()
        self.assertEqual(str(caught.exception), message)


# ----------------------------------------------------------------------------------------------- arrays
class HostileArrays(Case):
    def test_complex_dtype(self):
        with self.assertRaisesRegex(ValueError, r"^q: arrays of dtype complex128 are not read"):
            attnscope.analyze(Q.astype(np.complex128), K)

    def test_object_array(self):
        with self.assertRaisesRegex(ValueError, r"^k: arrays of dtype object are not read"):
            attnscope.analyze(Q, np.array([[object()] * 8] * 64))

    def test_string_array(self):
        with self.assertRaisesRegex(ValueError, r"^q: arrays of dtype <U3 are not read"):
            attnscope.analyze(np.full((64, 8), "abc"), K)

    def test_longdouble(self):
        if np.dtype(np.longdouble).itemsize in (2, 4, 8):
            self.skipTest("long double is a plain float here")
        with self.assertRaisesRegex(ValueError, r"^q: arrays of dtype float128 are not read"):
            attnscope.analyze(Q.astype(np.longdouble), K)

    def test_bool_array_as_the_command_line_reads_it(self):
        self.same_as_cli_on_npy(Q > 0)

    def test_non_contiguous(self):
        wide = RNG.standard_normal((64, 16))
        self.same_as_cli_on_npy(wide[:, ::2])

    def test_negative_strides(self):
        self.same_as_cli_on_npy(Q[::-1, ::-1], K[::-1])

    def test_fortran_order(self):
        self.same_as_cli_on_npy(np.asfortranarray(Q), np.asfortranarray(K))

    def test_zero_tokens(self):
        self.same_as_cli_on_npy(np.zeros((0, 8)), np.zeros((0, 8)))

    def test_zero_features(self):
        self.same_as_cli_on_npy(np.zeros((64, 0)), np.zeros((64, 0)))

    def test_zero_dimensional(self):
        self.same_as_cli_on_npy(np.float64(1.5) * np.ones(()), np.ones(()))

    def test_one_dimensional(self):
        self.same_as_cli_on_npy(np.ones(64), np.ones(64))

    def test_rank_32(self):
        self.same_as_cli_on_npy(Q.reshape((1,) * 30 + (64, 8)), K.reshape((1,) * 30 + (64, 8)))

    def test_huge_shape_without_memory(self):
        # 2^40 tokens that all share one row (stride 0): refused by the memory limit from the shape, at once.
        huge = np.lib.stride_tricks.as_strided(Q[0], shape=(2 ** 40, 8), strides=(0, 8))
        with self.assertRaisesRegex(ValueError, r"^--q <q: float64 array \[1099511627776, 8\]>, --k <k: float64 array "
                                                r"\[1099511627776, 8\]>: the run needs about .* above the memory limit"):
            attnscope.analyze(huge, huge)

    def test_huge_shape_in_a_child(self):
        code = ("big = np.lib.stride_tricks.as_strided(np.zeros(8), shape=(2**26, 2**20, 8), strides=(0, 0, 8))\n"
                "try:\n    attnscope.matrix(big, big, 'softmax', head=0)\nexcept ValueError as e:\n    print('refused', e)\n")
        rc, out, err = child(code)
        self.assertEqual(rc, 0, err)
        self.assertTrue(out.startswith("refused N=1048576 tokens: the 1048576 x 1048576 matrix needs "), out)

    def test_nan_in_keys(self):
        k = K.copy()
        k[5, 2] = np.nan
        self.same_as_cli_on_npy(Q, k)

    def test_inf_in_float16(self):
        q = Q.astype(np.float16)
        q[7, 1] = -np.inf
        self.same_as_cli_on_npy(q)

    def test_big_endian_is_read_like_native(self):
        self.assertEqual(strip(attnscope.analyze(Q.astype(">f8"), K)["results"]),
                         strip(attnscope.analyze(Q, K)["results"]))

    def test_uint64_extremes(self):
        q = np.full((64, 8), np.iinfo(np.uint64).max, dtype=np.uint64)
        q[::2] = 0
        self.same_as_cli_on_npy(q, np.ones((64, 8), np.uint64))

    def test_int8(self):
        self.same_as_cli_on_npy((Q * 40).astype(np.int8))

    def test_read_only_buffer(self):
        q = np.frombuffer(Q.tobytes(), dtype=np.float64).reshape(64, 8)
        self.assertFalse(q.flags.writeable)
        self.same_as_cli_on_npy(q)

    def test_matrix_subclass(self):
        self.same_as_cli_on_npy(np.asmatrix(Q))

    def test_array_interface_object(self):
        class Holder:
            def __array__(self, dtype=None, copy=None):
                return Q.copy()   # a temporary: nothing else holds it during the call
        self.same_as_cli_on_npy(Holder())

    def test_array_interface_that_raises(self):
        class Broken:
            def __array__(self, dtype=None, copy=None):
                raise OSError("device lost")
        with self.assertRaisesRegex(OSError, "^device lost$"):
            attnscope.analyze(Broken(), K)

    def test_mixing_array_of_the_wrong_shape(self):
        mp = save("mix34.npy", np.ones((3, 4)))
        self.same_error_as_cli(("--q", save("q_mix.npy", Q), "--k", save("k_mix.npy", K), "--mechanism", "mhla",
                                "--mixing", mp),
                               lambda: attnscope.analyze(Q, K, mechanism="mhla", mixing=np.ones((3, 4))),
                               [(path("q_mix.npy"), "<q: float64 array [64, 8]>"), (mp, "<mixing: float64 array [3, 4]>")])

    def test_mixing_array_with_nan(self):
        m = np.ones((4, 4))
        m[1, 1] = np.nan
        mp = save("mixnan.npy", m)
        self.same_error_as_cli(("--q", save("q_mix.npy", Q), "--k", save("k_mix.npy", K), "--mechanism", "mhla",
                                "--mixing", mp),
                               lambda: attnscope.analyze(Q, K, mechanism="mhla", mixing=m),
                               [(mp, "<mixing: float64 array [4, 4]>")])

    def test_mixing_object_array(self):
        with self.assertRaisesRegex(ValueError, "^mixing: arrays of dtype object are not read"):
            attnscope.analyze(Q, K, mechanism="mhla", mixing=np.array([[None] * 4] * 4))

    def test_tensor_attributes_nested_too_deep(self):
        deep = []
        for _ in range(200):
            deep = [deep]
        with self.assertRaisesRegex(ValueError, "^q: attribute.tokens: nested more than 64 levels deep$"):
            attnscope.analyze(attnscope.Tensor(Q, attrs={"tokens": deep}), K)

    def test_tensor_attributes_that_hold_themselves(self):
        loop = []
        loop.append(loop)
        with self.assertRaisesRegex(ValueError, "nested more than 64 levels deep"):
            attnscope.analyze(attnscope.Tensor(Q, attrs={"grid": loop}), K)

    def test_tensor_attribute_of_another_type(self):
        with self.assertRaisesRegex(ValueError, r"^q: attribute.scale: a value of type object \(attributes are"):
            attnscope.analyze(attnscope.Tensor(Q, attrs={"scale": object()}), K)


# ---------------------------------------------------------------------------------------------- options
class HostileOptions(Case):
    def refs(self):
        return save("oq.npy", Q), save("ok.npy", K)

    def same_option_error(self, cli_option_args, **options):
        qp, kp = self.refs()
        self.same_error_as_cli(("--q", qp, "--k", kp, *cli_option_args),
                               lambda: attnscope.analyze(qp, kp, **options))

    def test_bool_for_an_integer(self):
        with self.assertRaisesRegex(TypeError, r"^head: expected an integer, got True$"):
            attnscope.analyze(Q, K, head=True)

    def test_false_for_an_integer(self):
        with self.assertRaisesRegex(TypeError, r"^blocks: expected an integer, got False$"):
            attnscope.analyze(Q, K, blocks=False)

    def test_int_for_a_flag(self):
        with self.assertRaisesRegex(TypeError, r"^row_entropy: expected True or False, got int 1$"):
            attnscope.analyze(Q, K, row_entropy=1)

    def test_two_to_the_63(self):
        self.same_option_error(("--blocks", str(2 ** 63)), blocks=2 ** 63)

    def test_two_to_the_64_seed(self):
        self.same_option_error(("--seed", str(2 ** 64)), seed=2 ** 64)

    def test_negative_blocks(self):
        self.same_option_error(("--blocks", "-1"), blocks=-1)

    def test_negative_top_k(self):
        self.same_option_error(("--top-k", "-5"), top_k=-5)

    def test_fractional_count(self):
        with self.assertRaisesRegex(TypeError, r"^blocks: expected an integer, got float 4.5$"):
            attnscope.analyze(Q, K, blocks=4.5)

    def test_nan_scale(self):
        self.same_option_error(("--scale", "nan"), scale=float("nan"))

    def test_inf_scale_numpy(self):
        self.same_option_error(("--scale", "inf"), scale=np.float64("inf"))

    def test_threads_past_int(self):
        self.same_option_error(("--threads", str(2 ** 31)), threads=2 ** 31)

    def test_negative_threads(self):
        self.same_option_error(("--threads", "-1"), threads=-1)

    def test_zero_max_memory(self):
        self.same_option_error(("--max-memory", "0"), max_memory="0")

    def test_overflowing_max_memory(self):
        self.same_option_error(("--max-memory", "1e400G"), max_memory="1e400G")

    def test_at_index_two_to_the_63(self):
        self.same_option_error(("--at", f"h={2 ** 63}"), at={"h": 2 ** 63})

    def test_negative_at_index(self):
        self.same_option_error(("--at", "h=-1"), at={"h": -1})

    def test_overflowing_grid(self):
        self.same_option_error(("--mechanism", "mhla", "--grid", f"{2 ** 32},{2 ** 32}"), mechanism="mhla",
                               grid=(2 ** 32, 2 ** 32))

    def test_numpy_integer_option(self):
        qp, kp = self.refs()
        self.assertEqual(strip(attnscope.analyze(qp, kp, mechanism="mhla", blocks=np.int64(4))),
                         strip(cli_outcome("--q", qp, "--k", kp, "--mechanism", "mhla", "--blocks", "4")[1]))

    def test_object_as_option_value(self):
        with self.assertRaisesRegex(TypeError, r"^mechanism: a value of type object is not an option's value"):
            attnscope.analyze(Q, K, mechanism=object())

    def test_bytes_as_option_value(self):
        with self.assertRaisesRegex(TypeError, r"^mechanism: a value of type bytes is not an option's value"):
            attnscope.analyze(Q, K, mechanism=b"softmax")

    def test_bools_in_a_list(self):
        with self.assertRaisesRegex(TypeError, r"^grid: a list of True/False is not an option's value$"):
            attnscope.analyze(Q, K, mechanism="mhla", grid=[True, True])

    def test_nul_in_an_option(self):
        with self.assertRaisesRegex(ValueError, r"^mechanism: a text holding a NUL character"):
            attnscope.analyze(Q, K, mechanism="softmax\0linear")

    def test_help_is_not_an_option(self):
        with self.assertRaisesRegex(TypeError, r"^analyze\(\) got an unexpected keyword argument 'help'$"):
            attnscope.analyze(Q, K, help=True)

    def test_dashed_keyword(self):
        with self.assertRaisesRegex(TypeError, r"^analyze\(\) got an unexpected keyword argument 'row-entropy' "
                                               r"\(did you mean 'row_entropy'\?\)$"):
            attnscope.analyze(Q, K, **{"row-entropy": True})

    def test_megabyte_option_text(self):
        with self.assertRaisesRegex(ValueError, r"^unknown mechanism"):
            attnscope.analyze(Q, K, mechanism="x" * (1 << 20))

    def test_sweep_with_fifteen_thousand_points(self):
        vary = "n=" + ",".join(str(8 + i) for i in range(15_000))   # one argument stays under 128 KiB
        qp, kp = self.refs()
        p = cli("sweep", "--q", qp, "--k", kp, "--vary", vary, "--json", path("never.json"))
        self.assertEqual(p.returncode, 2)
        message = p.stderr.decode().strip().splitlines()[-1][len("error: "):]
        with self.assertRaises(ValueError) as caught:
            attnscope.sweep(qp, kp, vary=vary)
        self.assertEqual(str(caught.exception), message)
        self.assertFalse(os.path.exists(path("never.json")))

    def test_sweep_draws_two_to_the_40(self):
        qp, kp = self.refs()
        p = cli("sweep", "--q", qp, "--k", kp, "--vary", "n=16,32", "--subsample", "random", "--draws", str(2 ** 40),
                "--json", path("never.json"))
        self.assertEqual(p.returncode, 2)
        message = p.stderr.decode().strip().splitlines()[-1][len("error: "):]
        with self.assertRaises(ValueError) as caught:
            attnscope.sweep(qp, kp, vary="n=16,32", subsample="random", draws=2 ** 40)
        self.assertEqual(str(caught.exception), message)


# ------------------------------------------------------------------------------------------------ paths
class HostilePaths(Case):
    def test_nul_in_a_reference(self):
        qp = save("pq.npy", Q)
        with self.assertRaisesRegex(ValueError, r"^q: a text holding a NUL character"):
            attnscope.analyze(qp + "\0/etc/passwd", qp)
        with self.assertRaisesRegex(ValueError, r"^ref: a text holding a NUL character"):
            attnscope.load(qp + "\0x")
        with self.assertRaisesRegex(ValueError, r"^path: a text holding a NUL character"):
            attnscope.info(qp + "\0x")

    def test_fifo_as_input_never_blocks(self):
        fifo = path("pipe.npy")
        os.mkfifo(fifo)
        outcome, message = cli_outcome("--q", fifo, "--k", fifo)
        self.assertEqual(outcome, "error")
        rc, out, err = child(f"try:\n    attnscope.analyze({fifo!r}, {fifo!r})\nexcept ValueError as e:\n    print(e)\n"
                             f"try:\n    attnscope.info({fifo!r})\nexcept ValueError as e:\n    print(e)\n", timeout=30)
        self.assertEqual(rc, 0, err)
        self.assertEqual(out.splitlines()[0], message)
        self.assertIn("is not a regular file", out.splitlines()[1])

    def test_device_behind_a_symlink(self):
        link = path("zero.npy")
        os.symlink("/dev/zero", link)
        self.same_error_as_cli(("--q", link, "--k", link), lambda: attnscope.analyze(link, link))

    def test_device_as_mixing(self):
        link = path("urandom.npy")
        os.symlink("/dev/urandom", link)
        qp = save("pq.npy", Q)
        self.same_error_as_cli(("--q", qp, "--k", qp, "--mechanism", "mhla", "--mixing", link),
                               lambda: attnscope.analyze(qp, qp, mechanism="mhla", mixing=link))

    def test_symlink_loop(self):
        a, b = path("loop_a.npy"), path("loop_b.npy")
        os.symlink(b, a)
        os.symlink(a, b)
        self.same_error_as_cli(("--q", a, "--k", a), lambda: attnscope.analyze(a, a))

    def test_directory_as_input(self):
        d = path("adir.h5")
        os.makedirs(d, exist_ok=True)
        self.same_error_as_cli(("--q", d, "--k", d), lambda: attnscope.analyze(d, d))
        with self.assertRaisesRegex(ValueError, "^" + d):
            attnscope.load(d)

    def test_pickle_refused(self):
        pt = path("acts.pt")
        with open(pt, "wb") as f:
            f.write(b"\x80\x04N.")
        self.same_error_as_cli(("--q", pt, "--k", pt), lambda: attnscope.analyze(pt, pt))

    def test_name_that_is_not_utf8(self):
        raw = os.path.join(os.fsencode(path()), b"q\xff.npy")
        with open(raw, "wb") as f:
            np.save(f, Q)
        p = subprocess.run([os.fsencode(BINARY), b"analyze", b"--q", raw, b"--k", raw, b"--json", b"-"],
                           capture_output=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        expected = json.loads(p.stdout)
        self.assertEqual(strip(attnscope.analyze(os.fsdecode(raw), raw)["results"]), strip(expected["results"]))
        self.assertEqual(attnscope.load(raw).shape, (64, 8))

    def test_too_long_a_path(self):
        long = path("x" * 5000 + ".npy")
        self.same_error_as_cli(("--q", long, "--k", long), lambda: attnscope.analyze(long, long))

    def test_file_changed_between_calls(self):
        qp, kp = save("chg_q.npy", Q), save("chg_k.npy", K)
        first = attnscope.analyze(qp, kp)
        np.save(qp, Q[::-1].copy())
        second = attnscope.analyze(qp, kp)
        self.assertEqual(strip(second), strip(cli_outcome("--q", qp, "--k", kp)[1]))
        self.assertNotEqual(strip(first["results"]), strip(second["results"]))

    def test_hdf5_changed_between_calls(self):
        h5 = path("chg.h5")
        with h5py.File(h5, "w") as f:
            f["q"], f["k"] = Q, K
        attnscope.analyze(h5 + ":/q", h5 + ":/k")
        with h5py.File(h5, "w") as f:
            f["q"], f["k"] = K, Q
            f.attrs["causal"] = True
        doc = attnscope.analyze(h5 + ":/q", h5 + ":/k")
        self.assertEqual(strip(doc), strip(cli_outcome("--q", h5 + ":/q", "--k", h5 + ":/k")[1]))
        self.assertEqual(doc["input"]["defaults_from_file"], {"causal": True})

    def test_file_replaced_by_a_fifo_between_calls(self):
        qp = save("swap.npy", Q)
        code = (f"attnscope.analyze({qp!r}, {qp!r})\nos.remove({qp!r})\nos.mkfifo({qp!r})\n"
                f"try:\n    attnscope.analyze({qp!r}, {qp!r})\nexcept ValueError as e:\n    print(e)\n")
        rc, out, err = child(code, timeout=30)
        self.assertEqual(rc, 0, err)
        self.assertEqual(out.strip(), f"{qp}: is not a regular file (a FIFO, device or socket is never read as data)")

    def test_hdf5_external_storage(self):
        secret = path("secret.bin")
        with open(secret, "wb") as f:
            f.write(np.ones(64 * 8).tobytes())
        h5 = path("external.h5")
        with h5py.File(h5, "w") as f:
            f.create_dataset("q", shape=(64, 8), dtype="<f8", external=[(secret, 0, 64 * 8 * 8)])
            f["k"] = K
        self.same_error_as_cli(("--q", h5 + ":/q", "--k", h5 + ":/k"),
                               lambda: attnscope.analyze(h5 + ":/q", h5 + ":/k", allow_virtual=True))

    def test_virtual_source_outside_the_folder(self):
        inner = path("inner")
        os.makedirs(inner, exist_ok=True)
        with h5py.File(path("vsrc.h5"), "w") as f:
            f["q"] = Q
        layout = h5py.VirtualLayout(shape=(64, 8), dtype="<f8")
        layout[:] = h5py.VirtualSource("../vsrc.h5", "q", shape=(64, 8))
        h5 = os.path.join(inner, "v.h5")
        with h5py.File(h5, "w") as f:
            f.create_virtual_dataset("q", layout)
            f["k"] = K
        self.same_error_as_cli(("--q", h5 + ":/q", "--k", h5 + ":/k", "--allow-virtual"),
                               lambda: attnscope.analyze(h5 + ":/q", h5 + ":/k", allow_virtual=True))

    def test_vds_prefix_in_the_environment(self):
        layout = h5py.VirtualLayout(shape=(64, 8), dtype="<f8")
        layout[:] = h5py.VirtualSource("vsrc2.h5", "q", shape=(64, 8))
        with h5py.File(path("vsrc2.h5"), "w") as f:
            f["q"] = Q
        h5 = path("v2.h5")
        with h5py.File(h5, "w") as f:
            f.create_virtual_dataset("q", layout)
            f["k"] = K
        attnscope.analyze(h5 + ":/q", h5 + ":/k", allow_virtual=True)
        os.environ["HDF5_VDS_PREFIX"] = "/etc"
        try:
            with self.assertRaisesRegex(ValueError, "HDF5_VDS_PREFIX is set"):
                attnscope.analyze(h5 + ":/q", h5 + ":/k", allow_virtual=True)
        finally:
            del os.environ["HDF5_VDS_PREFIX"]
        attnscope.analyze(h5 + ":/q", h5 + ":/k", allow_virtual=True)

    def test_symlink_out_of_the_folder_as_mixing_attribute(self):
        data = path("linkdata")
        os.makedirs(data, exist_ok=True)
        np.save(path("secret_mix.npy"), np.eye(4))
        os.symlink("../secret_mix.npy", os.path.join(data, "m.npy"))
        h5 = os.path.join(data, "a.h5")
        with h5py.File(h5, "w") as f:
            f["q"], f["k"] = Q, K
            f.attrs["mixing"] = "m.npy"
        message = cli_outcome("--q", h5 + ":/q", "--k", h5 + ":/k", "--mechanism", "mhla")[1]
        self.assertIn("names a file outside the file's folder; refused", message)
        with self.assertRaises(ValueError) as caught:
            attnscope.analyze(attnscope.load(h5 + ":/q"), K, mechanism="mhla")
        self.assertEqual(str(caught.exception), message.replace(h5, "<q: float64 array [64, 8]>"))

    def test_fifo_as_mixing_attribute_never_blocks(self):
        data = path("fifodata")
        os.makedirs(data, exist_ok=True)
        os.mkfifo(os.path.join(data, "m.npy"))
        h5 = os.path.join(data, "a.h5")
        with h5py.File(h5, "w") as f:
            f["q"], f["k"] = Q, K
            f.attrs["mixing"] = "m.npy"
        message = cli_outcome("--q", h5 + ":/q", "--k", h5 + ":/k", "--mechanism", "mhla")[1]
        code = (f"t = attnscope.load({h5!r} + ':/q')\ntry:\n    attnscope.analyze(t, t, mechanism='mhla')\n"
                f"except ValueError as e:\n    print(e)\n")
        rc, out, err = child(code, timeout=30)
        self.assertEqual(rc, 0, err)
        self.assertEqual(out.strip(), message.replace(h5, "<q: float64 array [64, 8]>"))

    def test_relative_reference_follows_the_working_folder(self):
        folder = path("rel")
        os.makedirs(folder, exist_ok=True)
        np.save(os.path.join(folder, "q.npy"), Q)
        saved = os.getcwd()
        os.chdir(folder)
        try:
            doc = attnscope.analyze("q.npy", "q.npy")
        finally:
            os.chdir(saved)
        self.assertEqual(strip(doc), strip(cli_outcome("--q", "q.npy", "--k", "q.npy", cwd=folder)[1]))

    def test_npz_and_safetensors_as_the_command_line(self):
        npz = path("acts.npz")
        np.savez(npz, q=Q, k=K)
        doc = attnscope.analyze(npz + ":q", npz + ":k", row_entropy=True)
        self.assertEqual(strip(doc), strip(cli_outcome("--q", npz + ":q", "--k", npz + ":k", "--row-entropy")[1]))


# -------------------------------------------------------------------------------------- threads and calls
class HostileConcurrency(Case):
    def run_threads(self, jobs):
        results, errors = [None] * len(jobs), []

        def work(i):
            try:
                results[i] = jobs[i]()
            except BaseException as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(len(jobs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        return results

    def test_four_threads_equal_serial(self):
        inputs = [(RNG.standard_normal((192, 16)), RNG.standard_normal((192, 16))) for _ in range(4)]
        serial = [strip(attnscope.analyze(q, k, row_entropy=True)) for q, k in inputs]
        got = self.run_threads([lambda q=q, k=k: strip(attnscope.analyze(q, k, row_entropy=True)) for q, k in inputs])
        self.assertEqual(got, serial)

    def test_mixed_calls_equal_serial(self):
        h5 = os.path.join(SOURCE, "data", "gaussian.h5")
        jobs = [lambda: strip(attnscope.analyze(h5 + ":/q", h5 + ":/k", head=0)),
                lambda: attnscope.matrix(Q, K, "mhla", blocks=4).tolist(),
                lambda: strip(attnscope.sweep(h5 + ":/q", h5 + ":/k", vary="n=16,32", mechanism="softmax")),
                lambda: attnscope.load(h5 + ":/q").tolist(),
                lambda: attnscope.info(h5)]
        serial = [job() for job in jobs]
        self.assertEqual(self.run_threads(jobs), serial)

    def test_same_file_from_many_threads(self):
        h5 = os.path.join(SOURCE, "data", "lowrank.h5")
        serial = strip(attnscope.analyze(h5 + ":/q", h5 + ":/k", at={"h": 1}))
        self.assertEqual(self.run_threads([lambda: strip(attnscope.analyze(h5 + ":/q", h5 + ":/k", at={"h": 1}))] * 4),
                         [serial] * 4)

    def test_threads_option_beside_other_calls(self):
        serial = strip(attnscope.analyze(Q, K))
        jobs = [lambda: strip(attnscope.analyze(Q, K, threads=1)), lambda: strip(attnscope.analyze(Q, K)),
                lambda: strip(attnscope.analyze(Q, K, threads=2)), lambda: strip(attnscope.analyze(Q, K))]
        self.assertEqual(self.run_threads(jobs), [serial] * 4)

    def test_an_error_in_one_thread_leaves_the_others(self):
        serial = strip(attnscope.analyze(Q, K))

        def bad():
            try:
                attnscope.analyze(Q, K, blocks=-1)
            except ValueError as e:
                return str(e)

        qp, kp = save("eq.npy", Q), save("ek.npy", K)
        message = keyword_spelling(cli_outcome("--q", qp, "--k", kp, "--blocks", "-1")[1])
        got = self.run_threads([bad, lambda: strip(attnscope.analyze(Q, K)), bad, lambda: strip(attnscope.analyze(Q, K))])
        self.assertEqual(got, [message, serial, message, serial])


class HostileCallbacks(Case):
    BIG = RNG.standard_normal((1024, 16))

    def test_callback_that_raises(self):
        def stop(fraction, stage):
            raise LookupError("from the callback")
        with self.assertRaisesRegex(LookupError, "^from the callback$"):
            attnscope.analyze(self.BIG, self.BIG, progress=stop)
        self.assertEqual(strip(attnscope.analyze(Q, K)), strip(attnscope.analyze(Q.copy(), K.copy())))

    def test_callback_that_raises_keyboard_interrupt(self):
        def stop(fraction, stage):
            raise KeyboardInterrupt
        with self.assertRaises(KeyboardInterrupt):
            attnscope.analyze(self.BIG, self.BIG, progress=stop)

    def test_callback_that_exits(self):
        def stop(fraction, stage):
            raise SystemExit(3)
        with self.assertRaises(SystemExit):
            attnscope.analyze(self.BIG, self.BIG, progress=stop)

    def test_callback_with_the_wrong_signature(self):
        with self.assertRaises(TypeError):
            attnscope.analyze(self.BIG, self.BIG, progress=lambda: None)

    def test_callback_that_calls_attnscope(self):
        inner = []
        expected_inner = strip(attnscope.analyze(Q, K, mechanism="softmax"))

        def nested(fraction, stage):
            if len(inner) < 3:
                inner.append(strip(attnscope.analyze(Q, K, mechanism="softmax")))
        doc = attnscope.analyze(self.BIG, self.BIG, progress=nested)
        self.assertEqual(strip(doc), strip(attnscope.analyze(self.BIG, self.BIG)))
        self.assertTrue(inner)
        self.assertEqual(inner, [expected_inner] * len(inner))

    def test_callback_that_calls_load_and_info(self):
        h5 = os.path.join(SOURCE, "data", "gaussian.h5")
        seen = []
        attnscope.analyze(self.BIG, self.BIG, progress=lambda f, s: seen.append(attnscope.info(h5)["tensors"][0]["name"]))
        self.assertTrue(seen)
        self.assertEqual(set(seen), {attnscope.info(h5)["tensors"][0]["name"]})

    def test_nested_call_may_not_set_threads(self):
        def nested(fraction, stage):
            attnscope.analyze(Q, K, threads=1)
        with self.assertRaisesRegex(ValueError, r"^threads: a call made from another call's progress callback"):
            attnscope.analyze(self.BIG, self.BIG, progress=nested)

    def test_inputs_dropped_and_collected_during_the_call(self):
        q, k = self.BIG.copy(), self.BIG[::-1].copy()
        expected = strip(attnscope.analyze(q.copy(), k.copy()))
        holder = {"q": q, "k": k}
        del q, k

        def drop(fraction, stage):
            holder.clear()
            gc.collect()
        doc = attnscope.analyze(holder["q"], holder["k"], progress=drop)
        self.assertEqual(strip(doc), expected)

    def test_input_cannot_be_resized_during_the_call(self):
        q = self.BIG.copy()

        def grow(fraction, stage):
            q.resize((4096, 16), refcheck=True)
        with self.assertRaisesRegex(ValueError, "cannot resize"):
            attnscope.analyze(q, q, progress=grow)

    def test_keyboard_interrupt_then_the_next_call_is_right(self):
        script = (
            "import json, signal\n"
            "q = np.random.default_rng(0).standard_normal((4096, 64))\n"
            "before = attnscope.analyze(q[:64, :8].copy(), q[:64, :8].copy())['kernels']['threads']\n"
            "def progress(fraction, stage):\n"
            "    os.kill(os.getpid(), signal.SIGINT)\n"
            "try:\n"
            "    attnscope.analyze(q, q, mechanism='softmax', method='dense', progress=progress)\n"
            "    print('finished')\n"
            "except KeyboardInterrupt:\n"
            "    print('interrupted')\n"
            "small = q[:64, :8].copy()\n"
            "a = attnscope.analyze(small, small, threads=1)\n"
            "b = attnscope.analyze(small.copy(), small.copy())\n"
            "same = json.dumps(a['results'], default=list) == json.dumps(b['results'], default=list)\n"
            "print('same' if same else 'differ', a['kernels']['threads'] == 1 and b['kernels']['threads'] == before)\n")
        rc, out, err = child(script, timeout=300)
        self.assertEqual(rc, 0, err)
        self.assertEqual(out.split(), ["interrupted", "same", "True"])


# --------------------------------------------------------------------------------------- files written
class HostileWrites(Case):
    def test_nothing_written_outside_the_cache(self):
        """Every function in a child whose working folder and home are empty temporary folders: afterwards the
        working folder is still empty, and the home holds at most the kernel-choice cache."""
        work, home = path("w_work"), path("w_home")
        os.makedirs(work)
        os.makedirs(home)
        h5 = os.path.join(SOURCE, "data", "gaussian.h5")
        env = dict(os.environ, HOME=home)
        env.pop("ATTNSCOPE_CACHE_DIR", None)
        env.pop("XDG_CACHE_HOME", None)
        code = (f"h5 = {h5!r}\n"
                "attnscope.analyze(h5 + ':/q', h5 + ':/k', row_entropy=True)\n"
                "attnscope.matrix(h5 + ':/q', h5 + ':/k', 'mhla')\n"
                "attnscope.sweep(h5 + ':/q', h5 + ':/k', vary='n=16,32')\n"
                "attnscope.load(h5 + ':/q'); attnscope.info(h5)\n"
                "q = np.random.default_rng(1).standard_normal((600, 64))\n"
                "attnscope.analyze(q, q, method='dense')\n")
        rc, out, err = child(code, env=env, cwd=work, timeout=300)
        self.assertEqual(rc, 0, err)
        self.assertEqual(os.listdir(work), [])
        written = sorted(os.path.relpath(os.path.join(d, f), home) for d, _, fs in os.walk(home) for f in fs)
        self.assertTrue(set(written) <= {os.path.join(".cache", "attnscope", "gemm-choice.txt")}, written)

    def test_cache_that_is_a_fifo(self):
        cache = path("fifo_cache")
        os.makedirs(cache)
        os.mkfifo(os.path.join(cache, "gemm-choice.txt"))
        env = dict(os.environ, ATTNSCOPE_CACHE_DIR=cache)
        rc, out, err = child("q = np.random.default_rng(1).standard_normal((600, 64))\n"
                             "attnscope.analyze(q, q, method='dense'); print('done')\n", env=env, timeout=120)
        self.assertEqual((rc, out.strip()), (0, "done"), err)
        self.assertTrue(stat.S_ISFIFO(os.stat(os.path.join(cache, "gemm-choice.txt")).st_mode))

    def test_misspelt_environment_in_a_child(self):
        env = dict(os.environ, ATTNSCOPE_SIMD="avx9")
        p = cli("info", os.path.join(SOURCE, "data", "gaussian.h5"), env=env)
        message = p.stderr.decode().strip().splitlines()[-1][len("error: "):]
        rc, out, err = child("try:\n    attnscope.analyze(np.ones((8, 4)), np.ones((8, 4)))\n"
                             "except ValueError as e:\n    print(e)\n", env=env)
        self.assertEqual(rc, 0, err)
        self.assertEqual(out.strip(), message)


if __name__ == "__main__":
    unittest.main(verbosity=2)
