"""Issue 30: the Python module behaves like the command line and keeps no state between calls.

One class per defect (docs/hardening.md, "Issue 30: Python module"); each test failed on the module before
its fix. Run by CTest (tests/python/CMakeLists.txt, Python.Issue30.*) with PYTHONPATH at the build's python/
folder, ATTNSCOPE_BINARY naming the attnscope executable and ATTNSCOPE_SOURCE_DIR the repository.
"""
import json
import os
import subprocess
import tempfile
import threading
import unittest

import h5py
import numpy as np

import attnscope
from documents import VARYING, strip  # noqa: F401  (tests/python/documents.py)

BINARY = os.environ["ATTNSCOPE_BINARY"]



def cli(*args, cwd=None, env=None):
    return subprocess.run([BINARY, *args], capture_output=True, text=True, cwd=cwd, env=env)


def cli_doc(*args, cwd=None):
    p = cli("analyze", *args, "--json", "-", cwd=cwd)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def cli_error(*args, cwd=None, env=None):
    p = cli("analyze", *args, cwd=cwd, env=env)
    assert p.returncode == 2, (p.returncode, p.stderr)
    line = p.stderr.strip().splitlines()[-1]
    assert line.startswith("error: "), line
    return line[len("error: "):]


class InFolder:
    """The working folder changed for a block (the module resolves relative paths as the command line run there)."""

    def __init__(self, path):
        self.path = path

    def __enter__(self):
        self.saved = os.getcwd()
        os.chdir(self.path)

    def __exit__(self, *exc):
        os.chdir(self.saved)


def write_acts(path, q, k, file_attrs=None, q_attrs=None, extra=None):
    with h5py.File(path, "w") as f:
        f["q"], f["k"] = q, k
        for key, value in (file_attrs or {}).items():
            f.attrs[key] = value
        for key, value in (q_attrs or {}).items():
            f["q"].attrs[key] = value
        for key, value in (extra or {}).items():
            f[key] = value


def absolute_refs(results, folder):
    """results with each params' mixing / gates FILE[:NAME] that names a file relative to `folder` made absolute."""
    out = json.loads(json.dumps(results))
    for r in out:
        for key in ("mixing", "gates"):
            value = r.get("params", {}).get(key)
            if isinstance(value, str):
                file, sep, name = value.partition(":")
                if os.path.exists(os.path.join(folder, file)):
                    full = os.path.join(folder, file)
                    r["params"][key] = os.path.join(os.path.realpath(os.path.dirname(full)), os.path.basename(full)) + sep + name
    return out


class FileRelativeReferences(unittest.TestCase):
    """A file's `mixing` / `gates` attribute naming a file or dataset is resolved against the data file (its
    folder, which it may not leave), never the working folder: for a reference and for a loaded Tensor."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        root = cls.tmp.name
        cls.data, cls.elsewhere = os.path.join(root, "data"), os.path.join(root, "elsewhere")
        os.makedirs(cls.data)
        os.makedirs(cls.elsewhere)
        rng = np.random.default_rng(30)
        q, k = rng.standard_normal((2, 64, 8)), rng.standard_normal((2, 64, 8))
        learned = np.abs(rng.standard_normal((4, 4))) + np.eye(4)
        decoy = np.ones((4, 4))   # a different matrix of the same name in the working folder
        np.save(os.path.join(cls.data, "m.npy"), learned)
        np.save(os.path.join(cls.elsewhere, "m.npy"), decoy)
        np.save(os.path.join(root, "outside.npy"), decoy)
        write_acts(os.path.join(cls.data, "beside.h5"), q, k, {"mixing": "m.npy"})
        write_acts(os.path.join(cls.data, "inside.h5"), q, k, {"mixing": "/mix"}, extra={"mix": learned})
        write_acts(os.path.join(cls.data, "leaves.h5"), q, k, {"mixing": "../outside.npy"})
        gates = 1.0 / (1.0 + np.exp(-rng.standard_normal((2, 64))))
        write_acts(os.path.join(cls.data, "gated.h5"), q, k, {"gates": "/g", "causal": True}, extra={"g": gates})
        # The dataset's attribute wins over the file's, as the command line reads them.
        write_acts(os.path.join(cls.data, "both.h5"), q, k, {"scale": 0.5}, {"scale": 0.125})

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def same_as_cli(self, name, *cli_args, **options):
        """The command line run in the other folder on ../data/NAME, against the module there on the reference and
        on loaded Tensors."""
        rel = os.path.join("..", "data", name)
        expected = strip(cli_doc("--q", rel + ":/q", "--k", rel + ":/k", *cli_args, cwd=self.elsewhere))
        with InFolder(self.elsewhere):
            by_ref = attnscope.analyze(rel + ":/q", rel + ":/k", **options)
            q, k = attnscope.load(rel + ":/q"), attnscope.load(rel + ":/k")
        self.assertEqual(strip(by_ref), expected)
        # A loaded Tensor names its file by its absolute path, so a matrix read beside it is named so in params.
        absolute = absolute_refs(expected["results"], self.elsewhere)
        with InFolder(self.elsewhere):
            loaded = attnscope.analyze(q, k, **options)
        self.assertEqual(strip(loaded["results"]), absolute)
        self.assertEqual(loaded["input"].get("defaults_from_file"), expected["input"].get("defaults_from_file"))
        # Analysed from yet another folder: the Tensor remembers its file, not the folder it was loaded in.
        with InFolder(self.data):
            again = attnscope.analyze(q, k, **options)
        self.assertEqual(strip(again["results"]), absolute)
        return expected

    def test_mixing_file_beside_the_data_file(self):
        doc = self.same_as_cli("beside.h5", "--mechanism", "mhla", "--head", "1", mechanism="mhla", head=1)
        self.assertEqual(doc["input"]["defaults_from_file"]["mixing"], "m.npy")

    def test_mixing_dataset_of_the_same_file(self):
        self.same_as_cli("inside.h5", "--mechanism", "mhla", mechanism="mhla")

    def test_gates_dataset_of_the_same_file(self):
        self.same_as_cli("gated.h5", "--mechanism", "gated", "--head", "1", mechanism="gated", head=1)

    def test_dataset_attribute_wins_over_the_files(self):
        doc = self.same_as_cli("both.h5", "--mechanism", "softmax", mechanism="softmax")
        self.assertEqual(doc["input"]["defaults_from_file"]["scale"], 0.125)

    def test_a_path_leaving_the_folder_is_refused_as_on_the_command_line(self):
        rel = os.path.join("..", "data", "leaves.h5")
        message = cli_error("--q", rel + ":/q", "--k", rel + ":/k", "--mechanism", "mhla", cwd=self.elsewhere)
        self.assertIn("names a file outside the file's folder; refused", message)
        with InFolder(self.elsewhere):
            with self.assertRaises(ValueError) as caught:
                attnscope.analyze(rel + ":/q", rel + ":/k", mechanism="mhla")
            self.assertEqual(str(caught.exception), message)
            q, k = attnscope.load(rel + ":/q"), attnscope.load(rel + ":/k")
            with self.assertRaises(ValueError) as caught:
                attnscope.analyze(q, k, mechanism="mhla")
        self.assertEqual(str(caught.exception), message.replace(rel, "<q: float64 array [2, 64, 8]>"))

    def test_an_array_not_read_from_a_file_never_reads_the_working_folder(self):
        q = attnscope.Tensor(np.ones((64, 8)), attrs={"mixing": "m.npy"})
        with InFolder(self.elsewhere):   # m.npy is here, but this tensor has no file
            with self.assertRaises(ValueError) as caught:
                attnscope.analyze(q, np.ones((64, 8)), mechanism="mhla")
        self.assertEqual(str(caught.exception),
                         "<q: float64 array [64, 8]>: the attribute mixing = \"m.npy\" names a mixing matrix in a "
                         "file, but this tensor was not read from a file; choose the mixing matrix yourself")


def virtual_fixture(folder):
    """folder/virtual.h5 whose /q and /k are virtual datasets over folder/source.h5."""
    rng = np.random.default_rng(31)
    with h5py.File(os.path.join(folder, "source.h5"), "w") as f:
        f["q"], f["k"] = rng.standard_normal((48, 8)), rng.standard_normal((48, 8))
    with h5py.File(os.path.join(folder, "virtual.h5"), "w", libver="latest") as f:
        for name in ("q", "k"):
            layout = h5py.VirtualLayout(shape=(48, 8), dtype="<f8")
            layout[:] = h5py.VirtualSource("source.h5", name, shape=(48, 8))
            f.create_virtual_dataset(name, layout)
    return os.path.join(folder, "virtual.h5")


class NoStateBetweenCalls(unittest.TestCase):
    """Each call's options apply to that call only: nothing one call sets is seen by the next, or by a call
    running beside it on another Python thread."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.virtual = virtual_fixture(cls.tmp.name)
        rng = np.random.default_rng(32)
        cls.q, cls.k = rng.standard_normal((128, 16)), rng.standard_normal((128, 16))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def refused_virtual(self):
        return cli_error("--q", self.virtual + ":/q", "--k", self.virtual + ":/k")

    def test_allow_virtual_applies_to_its_call_only(self):
        message = self.refused_virtual()
        self.assertIn("refused unless --allow-virtual is given", message)
        ref_q, ref_k = self.virtual + ":/q", self.virtual + ":/k"
        expected = strip(cli_doc("--q", ref_q, "--k", ref_k, "--allow-virtual"))
        self.assertEqual(strip(attnscope.analyze(ref_q, ref_k, allow_virtual=True)), expected)
        with self.assertRaises(ValueError) as caught:
            attnscope.analyze(ref_q, ref_k)
        self.assertEqual(str(caught.exception), message)
        # load and matrix too: the flag read while parsing one call never reaches the process.
        attnscope.load(ref_q, allow_virtual=True)
        with self.assertRaisesRegex(ValueError, "refused unless --allow-virtual is given"):
            attnscope.load(ref_q, head=None, layout="nd")
        attnscope.matrix(ref_q, ref_k, "softmax", allow_virtual=True)
        with self.assertRaisesRegex(ValueError, "refused unless --allow-virtual is given"):
            attnscope.matrix(ref_q, ref_k, "softmax")

    def test_allow_virtual_on_one_thread_is_not_seen_by_another(self):
        ref_q, ref_k = self.virtual + ":/q", self.virtual + ":/k"
        outcomes = {"with": [], "without": []}

        def run(flag):
            for _ in range(20):
                try:
                    attnscope.analyze(ref_q, ref_k, mechanism="softmax", allow_virtual=flag or None)
                    outcomes["with" if flag else "without"].append("read")
                except ValueError as e:
                    outcomes["with" if flag else "without"].append(str(e))

        threads = [threading.Thread(target=run, args=(flag,)) for flag in (True, False)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(outcomes["with"], ["read"] * 20)
        self.assertEqual(outcomes["without"], [self.refused_virtual()] * 20)

    def test_threads_apply_to_their_call_only(self):
        before = attnscope.analyze(self.q, self.k, mechanism="softmax")["kernels"]["threads"]
        # --threads is capped at the cores (issue 30): a count below the default is one a call can really use.
        if before < 2:
            self.skipTest("one core: no thread count other than the default")
        want = before - 1
        during = attnscope.analyze(self.q, self.k, mechanism="softmax", threads=want)
        self.assertEqual(during["kernels"]["threads"], want)
        after = attnscope.analyze(self.q, self.k, mechanism="softmax")
        self.assertEqual(after["kernels"]["threads"], before)
        self.assertEqual(strip(after), strip(attnscope.analyze(self.q, self.k, mechanism="softmax")))
        attnscope.matrix(self.q, self.k, "softmax", threads=3)
        attnscope.sweep(self.q, self.k, vary="n=32,64", mechanism="softmax", threads=5)
        self.assertEqual(attnscope.analyze(self.q, self.k, mechanism="softmax")["kernels"]["threads"], before)

    def test_threads_of_a_call_are_not_seen_by_a_call_beside_it(self):
        before = attnscope.analyze(self.q, self.k, mechanism="softmax")["kernels"]["threads"]
        seen = []

        def plain():
            for _ in range(10):
                seen.append(attnscope.analyze(self.q, self.k, mechanism="softmax")["kernels"]["threads"])

        def pinned():
            for _ in range(10):
                attnscope.analyze(self.q, self.k, mechanism="softmax", threads=9)

        threads = [threading.Thread(target=f) for f in (plain, pinned)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(seen, [before] * 10)

    def test_max_memory_applies_to_its_call_only(self):
        with tempfile.TemporaryDirectory() as tmp:
            big = os.path.join(tmp, "big.npy")
            np.save(big, np.zeros((512, 64)))   # 256 KiB as float64
            with self.assertRaisesRegex(ValueError, r"above the memory limit of 0\.2 MiB; nothing was read"):
                attnscope.analyze(self.q, self.k, mechanism="softmax", max_memory="200K")
            self.assertEqual(attnscope.load(big).shape, (512, 64))   # the default limit again
            self.assertEqual(len(attnscope.info(big)["tensors"]), 1)

    def test_environment_is_checked_at_every_call_as_on_the_command_line(self):
        env = dict(os.environ, ATTNSCOPE_GEMM="opnblas")
        p = cli("analyze", "--q", self.virtual + ":/q", "--k", self.virtual + ":/k", "--allow-virtual", env=env)
        self.assertEqual(p.returncode, 2)
        message = p.stderr.strip().splitlines()[-1][len("error: "):]
        self.assertEqual(message, "ATTNSCOPE_GEMM=opnblas is not one of own, openblas")
        saved = os.environ.get("ATTNSCOPE_GEMM")
        os.environ["ATTNSCOPE_GEMM"] = "opnblas"
        try:
            with self.assertRaises(ValueError) as caught:
                attnscope.analyze(self.q, self.k)
            self.assertEqual(str(caught.exception), message)
        finally:
            if saved is None:
                del os.environ["ATTNSCOPE_GEMM"]
            else:
                os.environ["ATTNSCOPE_GEMM"] = saved
        attnscope.analyze(self.q, self.k, mechanism="softmax")   # and not remembered

    def test_seed_and_progress_apply_to_their_call_only(self):
        first = strip(attnscope.analyze(self.q, self.k, mechanism="linear", feature_map="favor"))
        attnscope.analyze(self.q, self.k, mechanism="linear", feature_map="favor", seed=7)
        self.assertEqual(strip(attnscope.analyze(self.q, self.k, mechanism="linear", feature_map="favor")), first)
        seen = []
        attnscope.analyze(np.ones((1024, 16)), np.ones((1024, 16)), mechanism="softmax",
                          progress=lambda f, s: seen.append(f))
        reported = len(seen)
        attnscope.analyze(np.ones((1024, 16)), np.ones((1024, 16)), mechanism="softmax")
        self.assertEqual(len(seen), reported)


class NanAttributes(unittest.TestCase):
    """A NaN attribute is refused as the command line refuses it: ValueError with its text, never RuntimeError."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        rng = np.random.default_rng(33)
        cls.q, cls.k = rng.standard_normal((64, 8)), rng.standard_normal((64, 8))
        cls.files = {}
        for key in ("scale", "blocks", "prefix_tokens", "causal", "grid"):
            path = os.path.join(cls.tmp.name, f"nan_{key}.h5")
            write_acts(path, cls.q, cls.k, q_attrs={key: np.nan})
            cls.files[key] = path

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_nan_attributes_of_files_and_tensors(self):
        for key, path in self.files.items():
            with self.subTest(attribute=key):
                ref_q, ref_k = path + ":/q", path + ":/k"
                p = cli("analyze", "--q", ref_q, "--k", ref_k, "--json", "-")
                name = "<q: float64 array [64, 8]>"
                if p.returncode == 0:   # an attribute the command line does not read (blocks)
                    expected = strip(json.loads(p.stdout))
                    self.assertEqual(strip(attnscope.analyze(ref_q, ref_k)), expected)
                    doc = attnscope.analyze(attnscope.load(ref_q), attnscope.load(ref_k))
                    self.assertEqual(strip(doc["results"]), expected["results"])
                    doc = attnscope.analyze(attnscope.Tensor(self.q, attrs={key: float("nan")}), self.k)
                    self.assertEqual(strip(doc["results"]), expected["results"])
                    continue
                message = cli_error("--q", ref_q, "--k", ref_k)
                self.assertIn(f"the file's attribute {key} = null", message)
                with self.assertRaises(ValueError) as caught:
                    attnscope.analyze(ref_q, ref_k)
                self.assertEqual(str(caught.exception), message)
                for q in (attnscope.load(ref_q), attnscope.Tensor(self.q, attrs={key: float("nan")})):
                    with self.assertRaises(ValueError) as caught:
                        attnscope.analyze(q, self.k)
                    self.assertEqual(str(caught.exception), message.replace(path, name))

    def test_infinite_huge_and_wrong_attribute_values(self):
        for value in (float("inf"), -float("inf"), -(2 ** 70), 0, -1.5, "0.5", [0.5]):
            with self.subTest(value=value):
                with self.assertRaisesRegex(ValueError, r"^<q: float64 array \[64, 8\]>: the file's attribute scale = "):
                    attnscope.analyze(attnscope.Tensor(self.q, attrs={"scale": value}), self.k)


class ProgressIsChecked(unittest.TestCase):
    """progress= that is not callable is refused before any work, whatever the call's speed (TypeError)."""

    def test_not_callable_is_a_type_error_up_front(self):
        q = np.ones((8, 4))
        calls = [lambda p: attnscope.analyze(q, q, progress=p),
                 lambda p: attnscope.matrix(q, q, "softmax", progress=p),
                 lambda p: attnscope.sweep(q, q, vary="n=4,8", progress=p)]
        for bad in (5, "print", [print], 1.5):
            for call in calls:
                with self.subTest(progress=bad):
                    with self.assertRaises(TypeError) as caught:
                        call(bad)
                    self.assertEqual(str(caught.exception),
                                     f"progress: expected a callable (fraction, stage) or None, got {type(bad).__name__}")

    def test_checked_before_the_inputs(self):
        # Even a call that would fail (or take long) on its inputs refuses the progress argument first.
        with self.assertRaises(TypeError):
            attnscope.analyze("/nonexistent.h5:/q", "/nonexistent.h5:/k", progress=5)

    def test_the_module_itself_refuses_it(self):
        from attnscope import _attnscope
        q = np.ones((8, 4))
        with self.assertRaisesRegex(TypeError, "^progress: expected a callable"):
            _attnscope.analyze(q, q, None, [], 5)


if __name__ == "__main__":
    unittest.main(verbosity=2)
