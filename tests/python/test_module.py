"""`import attnscope` (docs/python.md) against the command line and the NumPy reference.

Run by CTest (tests/python/CMakeLists.txt) with PYTHONPATH at the build's python/ folder and
ATTNSCOPE_BINARY naming the attnscope executable; ATTNSCOPE_SOURCE_DIR is the repository.
"""
import glob
import json
import inspect
import os
import pydoc
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import h5py
import numpy as np

import attnscope
from documents import VARYING, keyword_spelling, strip  # noqa: F401  (tests/python/documents.py)

SOURCE = os.environ["ATTNSCOPE_SOURCE_DIR"]
BINARY = os.environ["ATTNSCOPE_BINARY"]
sys.path.insert(0, os.path.join(SOURCE, "tests", "reference"))
import attnref  # noqa: E402  (the NumPy definitions, docs/maths.md)




def cli(*args):
    """The command line's analyze JSON (or its error line) for the same arguments."""
    p = subprocess.run([BINARY, *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def cli_error(*args):
    code, _, err = cli(*args)
    assert code == 2, (code, err)
    line = err.strip().splitlines()[-1]
    assert line.startswith("error: "), line
    return line[len("error: "):]



def samples():
    """(file, q name, k name) of every bundled sample: /q and /k, else the first layer's."""
    out = []
    for path in sorted(glob.glob(os.path.join(SOURCE, "data", "*.h5"))):
        with h5py.File(path, "r") as f:
            q = "/q" if "q" in f else "/layers/0/q"
            k = "/k" if "k" in f else "/layers/0/k"
        out.append((path, q, k))
    return out


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class SameAsCommandLine(unittest.TestCase):
    def test_every_sample_field_by_field(self):
        found = samples()
        self.assertGreaterEqual(len(found), 10)
        for path, qn, kn in found:
            with self.subTest(sample=os.path.basename(path)):
                q, k = f"{path}:{qn}", f"{path}:{kn}"
                code, out, err = cli("analyze", "--q", q, "--k", k, "--head", "1", "--row-entropy", "--json", "-")
                self.assertEqual(code, 0, err)
                expected = json.loads(out)
                doc = attnscope.analyze(q, k, head=1, row_entropy=True)
                self.assertIsInstance(doc["results"][0]["singular_values"], np.ndarray)
                self.assertIsInstance(doc["results"][0]["row_entropy"], np.ndarray)
                # Byte-identical once the arrays are lists again and the run-dependent fields are dropped.
                self.assertEqual(json.dumps(strip(doc), indent=1), json.dumps(strip(expected), indent=1))

    def test_loaded_arrays_give_the_files_numbers(self):
        """load() keeps the file's attributes, so analysing the arrays applies the same defaults."""
        for path, qn, kn in samples()[:4] + samples()[-3:]:
            with self.subTest(sample=os.path.basename(path)):
                expected = attnscope.analyze(f"{path}:{qn}", f"{path}:{kn}", head=1, blocks=4)
                doc = attnscope.analyze(attnscope.load(f"{path}:{qn}"), attnscope.load(f"{path}:{kn}"), head=1, blocks=4)
                self.assertEqual(strip(doc["results"]), strip(expected["results"]))
                self.assertEqual(doc["input"].get("defaults_from_file"), expected["input"].get("defaults_from_file"))
                self.assertTrue(doc["input"]["q"].startswith("<q: float64 array ["))

    def test_options_with_lists_and_all_units(self):
        path = os.path.join(SOURCE, "data", "lowrank.h5")
        code, out, err = cli("analyze", "--q", path + ":/q", "--k", path + ":/k", "--at", "h=all",
                             "--mechanism", "softmax,mhla", "--grid", "16,16", "--block-grid", "2,2", "--json", "-")
        self.assertEqual(code, 0, err)
        doc = attnscope.analyze(path + ":/q", path + ":/k", at={"h": "all"}, mechanism=["softmax", "mhla"],
                                grid=(16, 16), block_grid=[2, 2])
        self.assertEqual(strip(doc), strip(json.loads(out)))
        self.assertEqual(len(doc["units"]), 2)

    def test_metric_and_no_baseline(self):
        """analyze(metric=..., no_baseline=True) is analyze --metric ... --no-baseline (issue 36), also per unit."""
        path = os.path.join(SOURCE, "data", "lowrank.h5")
        code, out, err = cli("analyze", "--q", path + ":/q", "--k", path + ":/k", "--at", "h=all", "--metric",
                             "effective_rank,entropy_mean", "--no-baseline", "--json", "-")
        self.assertEqual(code, 0, err)
        doc = attnscope.analyze(path + ":/q", path + ":/k", at={"h": "all"}, metric=["effective_rank", "entropy_mean"],
                                no_baseline=True)
        self.assertEqual(strip(doc), strip(json.loads(out)))
        self.assertEqual(set(doc["units"][0]["results"][0]),
                         {"mechanism", "params", "method", "effective_rank", "entropy_mean", "warnings"})
        with self.assertRaises(ValueError):
            attnscope.analyze(path + ":/q", path + ":/k", metric="bogus")
        with self.assertRaises(TypeError):
            attnscope.analyze(path + ":/q", path + ":/k", no_baseline="yes")

    def test_sweep_document(self):
        path = os.path.join(SOURCE, "data", "gaussian.h5")
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "s.json")
            code, _, err = cli("sweep", "--q", path + ":/q", "--k", path + ":/k", "--vary", "n=32,64,128",
                               "--mechanism", "softmax,linear", "--csv", os.path.join(tmp, "s.csv"), "--json", out)
            self.assertEqual(code, 0, err)
            with open(out) as f:
                expected = json.load(f)
        doc = attnscope.sweep(path + ":/q", path + ":/k", vary="n=32,64,128", mechanism="softmax,linear")
        self.assertEqual(strip(doc), strip(expected))


class MatrixAgainstReference(unittest.TestCase):
    def test_mechanisms_within_1e_12(self):
        rng = np.random.default_rng(5)
        Q = rng.standard_normal((3, 96, 16))
        K = rng.standard_normal((3, 96, 16))
        cases = [("softmax", {}, {}), ("softmax", {"causal": True}, {"causal": True}),
                 ("linear", {"feature_map": "elu1"}, {"feature_map": "elu1"}),
                 ("mhla", {"blocks": 6, "mixing": "exp"}, {"blocks": 6, "mixing": "exp"}),
                 ("mhla", {"chunk": 16, "causal": True, "mixing": "cos"}, {"chunk": 16, "causal": True, "mixing": "cos"})]
        for mechanism, ours, ref in cases:
            with self.subTest(mechanism=mechanism, options=ours):
                A = attnscope.matrix(Q, K, mechanism, head=2, **ours)
                self.assertEqual(A.dtype, np.float64)
                self.assertEqual(A.shape, (96, 96))
                expected = attnref.attention_matrix(mechanism, Q[2], K[2], **ref)
                self.assertLess(np.max(np.abs(A - expected)), 1e-12)

    def test_dtypes_and_strides_read_the_same_values(self):
        rng = np.random.default_rng(1)
        q16 = rng.standard_normal((2, 64, 8)).astype(np.float16)  # float16 values are exact in float64
        k16 = rng.standard_normal((2, 64, 8)).astype(np.float16)
        expected = attnscope.matrix(q16.astype(np.float64), k16.astype(np.float64), "softmax", head=1)
        for dtype in (np.float16, np.float32, np.float64):
            q, k = q16.astype(dtype), k16.astype(dtype)
            self.assertTrue(np.array_equal(attnscope.matrix(q, k, "softmax", head=1), expected), dtype)
        # Another layout, read in place through strides: [N, d, H] is the transpose of [H, N, d].
        qt, kt = np.transpose(q16, (1, 2, 0)), np.transpose(k16, (1, 2, 0))
        self.assertFalse(qt.flags.c_contiguous)
        self.assertTrue(np.array_equal(attnscope.matrix(qt, kt, "softmax", layout="ndh", at="h=1"), expected))
        # Big-endian and integer arrays are read too (converted, then widened).
        big = q16.astype(">f8"), k16.astype(">f8")
        self.assertTrue(np.array_equal(attnscope.matrix(*big, "softmax", head=1), expected))
        ints = attnscope.matrix(np.arange(64 * 4).reshape(64, 4) % 3, np.ones((64, 4), np.int32), "linear")
        self.assertEqual(ints.shape, (64, 64))


class PyTorchTensors(unittest.TestCase):
    def test_tensors_are_read_through_numpy(self):
        try:
            import torch
        except ImportError:
            self.skipTest("PyTorch is not installed")
        g = torch.Generator().manual_seed(0)
        q = torch.randn(2, 48, 8, generator=g).to(torch.bfloat16)   # bfloat16: exact in float32 and float64
        k = torch.randn(2, 48, 8, generator=g).to(torch.bfloat16)
        expected = attnscope.matrix(q.double().numpy(), k.double().numpy(), "softmax", head=1)
        self.assertTrue(np.array_equal(attnscope.matrix(q, k, "softmax", head=1), expected))
        self.assertTrue(np.array_equal(attnscope.matrix(q.float().requires_grad_(), k.half(), "softmax", head=1),
                                       attnscope.matrix(q.float().numpy(), k.half().float().numpy(), "softmax", head=1)))
        doc = attnscope.analyze(q.float(), k.float(), head=1, mechanism="softmax")
        self.assertEqual(doc["input"]["q"], "<q: float32 array [2, 48, 8]>")


class BadInputs(unittest.TestCase):
    def test_cli_messages(self):
        path = os.path.join(SOURCE, "data", "gaussian.h5")
        missing = os.path.join(SOURCE, "data", "no_such_file.h5")
        cases = [
            (("--q", missing + ":/q", "--k", path + ":/k"), dict(q=missing + ":/q", k=path + ":/k")),
            (("--q", path + ":/q", "--k", path + ":/nope"), dict(q=path + ":/q", k=path + ":/nope")),
            (("--q", path + ":/q", "--k", path + ":/k", "--head", "7"), dict(q=path + ":/q", k=path + ":/k", head=7)),
            (("--q", path + ":/q", "--k", path + ":/k", "--blocks", "0"), dict(q=path + ":/q", k=path + ":/k", blocks=0)),
            (("--q", path + ":/q", "--k", path + ":/k", "--mechanism", "nope"),
             dict(q=path + ":/q", k=path + ":/k", mechanism="nope")),
        ]
        for args, kwargs in cases:
            with self.subTest(args=args[2:]):
                message = keyword_spelling(cli_error("analyze", *args))
                with self.assertRaises(FileNotFoundError if "no_such_file" in args[1] else ValueError) as caught:
                    attnscope.analyze(**kwargs)
                self.assertEqual(str(caught.exception), message)
        with self.assertRaisesRegex(TypeError, r"^top_k: expected an integer, got str 'x'$"):
            attnscope.analyze(path + ":/q", path + ":/k", top_k="x")

    def test_shapes_and_nan_as_the_command_line_says_them(self):
        with tempfile.TemporaryDirectory() as tmp:
            q = np.ones((64, 8))
            q[3, 5] = np.nan
            np.save(os.path.join(tmp, "q.npy"), q)
            np.save(os.path.join(tmp, "k.npy"), np.ones((60, 8)))
            np.save(os.path.join(tmp, "k64.npy"), np.ones((64, 8)))
            nan_message = cli_error("analyze", "--q", os.path.join(tmp, "q.npy"), "--k", os.path.join(tmp, "k64.npy"))
            q_ok = np.ones((64, 8))
            np.save(os.path.join(tmp, "q_ok.npy"), q_ok)
            shape_message = cli_error("analyze", "--q", os.path.join(tmp, "q_ok.npy"), "--k", os.path.join(tmp, "k.npy"))
        name_q, name_k = "<q: float64 array [64, 8]>", "<k: float64 array [60, 8]>"
        with self.assertRaises(ValueError) as caught:
            attnscope.analyze(q, np.ones((64, 8)))
        self.assertEqual(str(caught.exception), nan_message.replace(os.path.join(tmp, "q.npy"), name_q))
        self.assertIn("non-finite value nan at token 3, feature 5", str(caught.exception))
        with self.assertRaises(ValueError) as caught:
            attnscope.analyze(q_ok, np.ones((60, 8)))
        self.assertEqual(str(caught.exception), shape_message.replace(os.path.join(tmp, "q_ok.npy"), name_q)
                         .replace(os.path.join(tmp, "k.npy"), name_k))

    def test_unknown_option_and_bad_values(self):
        q = np.ones((16, 4))
        with self.assertRaisesRegex(TypeError, "unexpected keyword argument 'row_entropies' .did you mean 'row_entropy'"):
            attnscope.analyze(q, q, row_entropies=True)
        with self.assertRaisesRegex(TypeError, "analyze.. got an unexpected keyword argument 'json'"):
            attnscope.analyze(q, q, json="-")
        with self.assertRaisesRegex(TypeError, "load.. got an unexpected keyword argument 'blocks'"):
            attnscope.load("x.h5:/q", blocks=4)
        with self.assertRaisesRegex(ValueError, "complex128"):
            attnscope.analyze(q.astype(np.complex128), q)
        with self.assertRaisesRegex(ValueError, "q: arrays of dtype object are not read"):
            attnscope.analyze(object(), q)
        with self.assertRaisesRegex(ValueError, "matrix takes one mechanism"):
            attnscope.matrix(q, q, "softmax,linear")
        with self.assertRaisesRegex(FileNotFoundError, "^/nonexistent/acts.h5: no such file$"):
            attnscope.load("/nonexistent/acts.h5:/q")
        with self.assertRaisesRegex(FileNotFoundError, "no such file"):
            attnscope.info("/nonexistent/acts.h5")
        with self.assertRaisesRegex(FileNotFoundError, "no such file"):
            attnscope.analyze("/nonexistent/acts.h5:/q", q)


class Behaviour(unittest.TestCase):
    def test_memory_is_released(self):
        rng = np.random.default_rng(2)
        q, k = rng.standard_normal((64, 8)), rng.standard_normal((64, 8))
        for _ in range(50):  # warm up: allocator pools, thread stacks, caches
            attnscope.analyze(q, k, row_entropy=True)
            attnscope.matrix(q, k, "mhla")
        before = rss_bytes()
        for _ in range(1000):
            attnscope.analyze(q, k, row_entropy=True)
            attnscope.matrix(q, k, "mhla")
        grown = rss_bytes() - before
        # One leaked 64 x 64 matrix per call would be 32 MiB over the loop.
        self.assertLess(grown, 8 << 20, f"RSS grew by {grown} bytes over 1000 calls")

    def test_two_threads_at_once(self):
        rng = np.random.default_rng(3)
        inputs = [(rng.standard_normal((256, 16)), rng.standard_normal((256, 16))) for _ in range(2)]
        expected = [strip(attnscope.analyze(q, k, row_entropy=True)["results"]) for q, k in inputs]
        got = [[], []]
        errors = []

        def work(i):
            try:
                for _ in range(5):
                    got[i].append(strip(attnscope.analyze(*inputs[i], row_entropy=True)["results"]))
            except Exception as e:  # reported below: a thread's exception would otherwise be lost
                errors.append(e)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        for i in range(2):
            self.assertEqual(len(got[i]), 5)
            for r in got[i]:
                self.assertEqual(r, expected[i])

    def test_progress_callback(self):
        rng = np.random.default_rng(4)
        q, k = rng.standard_normal((512, 16)), rng.standard_normal((512, 16))
        seen = []
        doc = attnscope.analyze(q, k, progress=lambda f, stage: seen.append((f, stage)))
        self.assertEqual(len(doc["results"]), 3)
        self.assertTrue(seen, "no progress reported")
        self.assertTrue(all(0.0 <= f <= 1.0 and isinstance(s, str) for f, s in seen))

    def test_a_raising_callback_cancels(self):
        q = np.random.default_rng(6).standard_normal((512, 16))

        def stop(fraction, stage):
            raise RuntimeError("stop here")

        with self.assertRaisesRegex(RuntimeError, "stop here"):
            attnscope.analyze(q, q, progress=stop)

    def test_ctrl_c_cancels(self):
        # The child announces the run once the core first reports progress, so the signal arrives mid-run.
        script = (
            "import numpy as np, attnscope, sys\n"
            "q = np.random.default_rng(0).standard_normal((4096, 64))\n"
            "said = []\n"
            "def progress(fraction, stage):\n"
            "    if not said:\n"
            "        said.append(1)\n"
            "        print('started', flush=True)\n"
            "try:\n"
            "    attnscope.analyze(q, q, mechanism='softmax', method='dense', progress=progress)\n"
            "except KeyboardInterrupt:\n"
            "    print('interrupted', flush=True)\n"
            "    sys.exit(7)\n"
            "print('finished', flush=True)\n")
        p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertEqual(p.stdout.readline().strip(), "started")
        p.send_signal(signal.SIGINT)
        sent = time.monotonic()
        try:
            out, err = p.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            p.kill()
            self.fail("no exit within 300 s of SIGINT")
        self.assertEqual(p.returncode, 7, (out, err))   # not a crash (negative), not "finished" (0)
        self.assertIn("interrupted", out)
        print(f"Ctrl+C: KeyboardInterrupt {time.monotonic() - sent:.2f} s after SIGINT", file=sys.stderr)


class LoadAndInfo(unittest.TestCase):
    def test_load_whole_and_selected(self):
        path = os.path.join(SOURCE, "data", "char_llama_gqa.h5")
        with h5py.File(path, "r") as f:
            raw = np.asarray(f["layers/1/q"], dtype=np.float64)
        whole = attnscope.load(path + ":/layers/1/q")
        self.assertIsInstance(whole, attnscope.Tensor)
        self.assertTrue(np.array_equal(np.asarray(whole), raw))
        self.assertIn("causal", whole.attrs)
        sliced = attnscope.load(path + ":/layers/1/q", head=3, prefix_tokens=2)
        self.assertTrue(np.array_equal(np.asarray(sliced), raw[3, 2:, :]))

    def test_a_dropped_prefix_is_not_dropped_again(self):
        """load(..., prefix_tokens=1) then analyze() equals the command line on the file (one prefix token, the
        8x8 grid, MHLA on its 4x4 block grid), not N = 63 with 1-D blocks (issue 33)."""
        path = os.path.join(SOURCE, "data", "vit_digits.h5")
        code, out, err = cli("analyze", "--q", path + ":/layers/2/q", "--k", path + ":/layers/2/k", "--head", "1",
                             "--json", "-")
        self.assertEqual(code, 0, err)
        expected = json.loads(out)
        q = attnscope.load(path + ":/layers/2/q", head=1, prefix_tokens=1)
        k = attnscope.load(path + ":/layers/2/k", head=1, prefix_tokens=1)
        self.assertEqual(q.shape, (64, 16))
        self.assertEqual((q.attrs["prefix_tokens"], q.attrs["prefix_tokens_dropped"]), (0, 1))
        doc = attnscope.analyze(q, k)
        self.assertEqual(strip(doc["results"]), strip(expected["results"]))

    def test_every_bundled_sample_loaded_equals_the_command_line(self):
        """For every bundled sample, analyze(load(q_ref), load(k_ref)) equals `attnscope analyze --json` on the
        references field by field (issue 33): the file's attributes (causal, grid, prefix tokens, scale, learned Mc,
        gates, retrieval targets) travel with the loaded Tensors, whatever the working folder."""
        files = sorted(glob.glob(os.path.join(SOURCE, "data", "*.h5")))
        self.assertGreaterEqual(len(files), 18)
        for path in files:
            with h5py.File(path, "r") as f:
                layer = "/layers/1" if "layers" in f else ""
                gated = dict(f.attrs).get("mechanism") == "gated"
            mechanisms = "linear,mhla" + (",gated" if gated else "")   # the structured ones: quick at N = 512
            path = os.path.abspath(path)   # as a loaded Tensor names its file (.origin)
            q_ref, k_ref = f"{path}:{layer}/q", f"{path}:{layer}/k"
            with self.subTest(sample=os.path.basename(path)):
                code, out, err = cli("analyze", "--q", q_ref, "--k", k_ref, "--mechanism", mechanisms, "--json", "-")
                self.assertEqual(code, 0, err)
                expected = json.loads(out)
                doc = attnscope.analyze(attnscope.load(q_ref), attnscope.load(k_ref), mechanism=mechanisms)
                self.assertEqual(strip(doc["results"]), strip(expected["results"]))
                for key in ("layout", "at", "n", "d", "prefix_tokens", "defaults_from_file"):
                    self.assertEqual(doc["input"].get(key), expected["input"].get(key), key)
        # The retrieval targets index the file's batch and token axes: a whole loaded tensor carries them, a slice not.
        mqar = os.path.abspath(os.path.join(SOURCE, "data", "trained_mqar_linear.h5"))
        whole = attnscope.analyze(attnscope.load(mqar + ":/layers/0/q"), attnscope.load(mqar + ":/layers/0/k"),
                                  mechanism="linear", at={"b": 2})
        self.assertIn("retrieval_mass", whole["results"][0])
        sliced = attnscope.analyze(attnscope.load(mqar + ":/layers/0/q", at={"b": 2, "h": 0}),
                                   attnscope.load(mqar + ":/layers/0/k", at={"b": 2, "h": 0}), mechanism="linear")
        self.assertNotIn("retrieval_mass", sliced["results"][0])
        self.assertEqual(sliced["results"][0]["rank"], whole["results"][0]["rank"])

    def test_info_is_the_command_lines(self):
        path = os.path.join(SOURCE, "data", "vit_digits.h5")
        code, out, err = cli("info", path, "--json")
        self.assertEqual(code, 0, err)
        self.assertEqual(attnscope.info(path), json.loads(out))

class Signatures(unittest.TestCase):
    """Issue 33: the keywords, their defaults and their help come from the core's option descriptors."""

    def analyze_flags(self):
        """Every long option of `attnscope analyze --help` but the command line's own (--q, --k, --v, --json,
        --help; --no-causal is causal=False): what analyze() must take as keywords."""
        text = cli("analyze", "--help")[1]
        flags = set(re.findall(r"^\s+(?:-\w, )?--([a-z][a-z-]*)", text, re.M))
        return {f.replace("-", "_") for f in flags} - {"q", "k", "v", "json", "help", "no_causal"}

    def test_every_option_is_a_keyword_with_its_default(self):
        sig = inspect.signature(attnscope.analyze)
        keywords = {n for n, p in sig.parameters.items() if p.kind == p.KEYWORD_ONLY} - {"progress"}
        self.assertEqual(keywords, self.analyze_flags())
        p = sig.parameters
        self.assertEqual((p["blocks"].default, p["favor_features"].default, p["feature_map"].default), (None, 256, "relu"))
        self.assertEqual((p["mixing_sigma"].default, p["row_entropy"].default, p["causal"].default), (3.0, False, None))
        self.assertEqual(p["mechanism"].default, "softmax,linear,mhla")
        load_params = list(inspect.signature(attnscope.load).parameters)
        self.assertEqual(load_params[0], "ref")
        self.assertTrue({"layout", "at", "head", "kv_head", "prefix_tokens", "allow_virtual"} <= set(load_params))
        self.assertNotIn("blocks", inspect.signature(attnscope.load).parameters)
        self.assertIn("blocks", inspect.signature(attnscope.matrix).parameters)

    def test_sweep_takes_every_option_of_the_command_line(self):
        text = cli("sweep", "--help")[1]
        flags = {f.replace("-", "_") for f in re.findall(r"^\s+(?:-\w, )?--([a-z][a-z-]*)", text, re.M)}
        sig = inspect.signature(attnscope.sweep)
        keywords = {n for n, p in sig.parameters.items() if p.kind == p.KEYWORD_ONLY} - {"progress"}
        # The command line's own: its inputs and the files and plots it writes.
        self.assertEqual(keywords, flags - {"q", "k", "json", "csv", "summary_csv", "plot", "metric", "help", "no_causal"})
        p = sig.parameters
        self.assertEqual((p["subsample"].default, p["draws"].default, p["d"].default, p["vary"].default), ("first", 1, 64, None))
        rng = np.random.default_rng(2)
        q, k = rng.standard_normal((40, 4)), rng.standard_normal((40, 4))
        with self.assertRaisesRegex(ValueError, r"^give q and k in pairs \(got 1 q and 2 k\), or synth=KIND$"):
            attnscope.sweep(q, [k, k], vary="n=16")
        with self.assertRaisesRegex(TypeError, r"^draws: expected an integer, got str 'a'$"):
            attnscope.sweep(q, k, vary="n=16", draws="a")
        with self.assertRaisesRegex(ValueError, r"^heads: the layout nd has no 'h' axis$"):
            attnscope.sweep(q, k, vary="n=16", heads=[0])
        qh, kh = rng.standard_normal((2, 40, 4)), rng.standard_normal((2, 40, 4))
        doc = attnscope.sweep(qh, kh, vary="n=16,32", heads=[0, 1], mechanism=["linear"])
        self.assertEqual(doc["vary"], "n")
        df = doc.to_pandas()   # one row per point, each measure's mean and interval as columns
        self.assertEqual(df["n"].tolist(), [16, 32])
        self.assertEqual(df["count"].tolist(), [2, 2])
        self.assertEqual(df["rank.mean"].tolist(), [p["rank"]["mean"] for p in doc["points"]])
        self.assertTrue({"mechanism", "m", "rank.ci_low", "entropy_mean.ci_high"} <= set(df.columns))

    def test_help_shows_each_options_help(self):
        doc = pydoc.render_doc(attnscope.analyze, renderer=pydoc.plaintext)
        for line in ("favor_features : int = 256", "FAVOR+ random features m", "kv_head : int | None = None",
                     "blocks : int | None = None", "Not with chunk, grid.", "True: causal masking; False: not causal",
                     "Shorthand for at h=I"):
            self.assertIn(line, doc)
        self.assertNotIn("--", doc.split("Options", 1)[1])   # keywords, not flags

    def test_module_help_is_short(self):
        lines = pydoc.render_doc(attnscope, renderer=pydoc.plaintext).splitlines()
        self.assertLess(len(lines), 450)   # 431 with report() and Report (issue 34); thousands with ndarray's methods
        self.assertNotIn("argpartition", "\n".join(lines))   # ndarray's methods are not listed under Tensor
        t = attnscope.Tensor(np.ones((2, 3)), attrs={"causal": True})
        self.assertEqual(t.sum(), 6.0)                       # ... and still there

    def test_unknown_keyword_is_a_type_error_with_a_suggestion(self):
        with self.assertRaisesRegex(TypeError, r"^matrix\(\) got an unexpected keyword argument 'blokcs' "
                                               r"\(did you mean 'blocks'\?\)$"):
            attnscope.matrix(np.ones((4, 2)), np.ones((4, 2)), "mhla", blokcs=2)

class Documents(unittest.TestCase):
    """Issue 33: results are objects with attribute access, to_pandas() and a compact table in a notebook."""

    def test_attributes_and_one_row_per_mechanism(self):
        h5 = os.path.join(SOURCE, "data", "vit_digits.h5")
        doc = attnscope.analyze(h5 + ":/layers/2/q", h5 + ":/layers/2/k", head=1, mechanism="softmax,linear,mhla")
        self.assertIsInstance(doc, dict)
        self.assertEqual(doc.input.n, doc["input"]["n"])
        self.assertIs(doc.results[0], doc["results"][0])          # read once, stored once: changes stay
        doc.results[0]["note"] = 1
        self.assertEqual(doc["results"][0]["note"], 1)
        with self.assertRaisesRegex(AttributeError, "no 'nope'"):
            doc.nope
        df = doc.to_pandas()
        self.assertEqual(list(df["mechanism"]), ["softmax", "linear", "mhla"])
        for i, r in enumerate(doc["results"]):
            self.assertEqual(df["rank"][i], r["rank"])
            self.assertEqual(df["effective_rank"][i], r["effective_rank"])
            self.assertEqual(df["entropy.mean"][i], r["entropy"]["mean"])
            self.assertEqual(df["past_block.rank"][i] if "past_block.rank" in df else None,
                             r["past_block"]["rank"] if "past_block" in r else None)
        self.assertNotIn("singular_values", df.columns)

    def test_units_are_rows_too(self):
        h5 = os.path.join(SOURCE, "data", "gaussian.h5")
        doc = attnscope.analyze(h5 + ":/q", h5 + ":/k", at={"h": "all"}, mechanism=["softmax", "linear"])
        df = doc.to_pandas()
        self.assertEqual(len(df), 2 * len(doc["units"]))
        self.assertEqual(list(df["at.h"]), [0, 0, 1, 1])
        self.assertEqual(list(df["rank"]), [r["rank"] for u in doc["units"] for r in u["results"]])

    def test_notebook_table_and_spectrum(self):
        rng = np.random.default_rng(5)
        q, k = rng.standard_normal((48, 8)), rng.standard_normal((48, 8))
        page = attnscope.analyze(q, k)._repr_html_()
        self.assertIn("<table>", page)
        self.assertEqual(page.count("<tr>"), 1 + 3)
        for m in ("softmax", "linear", "mhla"):
            self.assertIn(f"<td>{m}</td>", page)
        self.assertIn('<img alt="singular values" src="data:image/png;base64,', page)

class Aggregate(unittest.TestCase):
    """Issue 33: attnscope.aggregate is `attnscope aggregate --json`, with typed keywords and tables."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        job = os.path.join(cls.tmp.name, "job.toml")
        data = os.path.join(SOURCE, "data")
        with open(job, "w") as f:
            f.write(f'inputs = ["{data}/gaussian.h5", "{data}/lowrank.h5"]\nq = "/q"\nk = "/k"\nheads = "all"\n'
                    '[metrics]\ntop_k = 4\n')
        cls.out = os.path.join(cls.tmp.name, "out")
        p = subprocess.run([BINARY, "batch", job, "--out", cls.out, "--jobs", "1"], capture_output=True, text=True)
        assert p.returncode == 0, p.stderr

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_equals_the_command_line(self):
        for args, kw in (([], {}), (["--by", "file", "--metric", "rank,entropy"], dict(by="file", metric=["rank", "entropy"])),
                         (["--cluster", "file", "--by", "head"], dict(cluster="file", by="head"))):
            code, out, err = cli("aggregate", self.out, "--json", *args)
            self.assertEqual(code, 0, err)
            self.assertEqual(dict(attnscope.aggregate(self.out, **kw)), json.loads(out))

    def test_tables(self):
        doc = attnscope.aggregate(self.out, by="file", metric="rank")
        df = doc.to_pandas()
        self.assertEqual(len(df), sum(len(g["mechanisms"]) for g in doc["groups"]))
        self.assertEqual(set(df["metric"]), {"rank"})
        self.assertEqual(sorted(set(df["group.file"])), sorted({g["group"]["file"] for g in doc["groups"]}))
        pairs = doc.pairs()
        self.assertEqual(len(pairs), sum(len(g["pairs"]) for g in doc["groups"]))
        self.assertIn("group.file", pairs.columns)

    def test_errors_name_keywords(self):
        with self.assertRaisesRegex(ValueError, r"^by: 'colour' is not a field of the units"):
            attnscope.aggregate(self.out, by="colour")
        with self.assertRaisesRegex(ValueError, r"^metric: 'rnak' is not a metric of these records \(without metric all"):
            attnscope.aggregate(self.out, metric="rnak")
        with self.assertRaisesRegex(TypeError, r"did you mean 'metric'"):
            attnscope.aggregate(self.out, metrics="rank")
        with self.assertRaises(FileNotFoundError):
            attnscope.aggregate(os.path.join(self.tmp.name, "absent"))
        self.assertIn("cluster : str | None = None", pydoc.render_doc(attnscope.aggregate, renderer=pydoc.plaintext))
        self.assertEqual(attnscope.aggregate(self.out, resamples=500)["resamples"], 500)
        with self.assertRaisesRegex(ValueError, r"^resamples 0 must lie in 1\.\.1000000$"):
            attnscope.aggregate(self.out, resamples=0)


class Report(unittest.TestCase):
    """Issue 34: attnscope.report writes the page of `attnscope report` and reads it back."""

    def test_equals_the_command_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            data = os.path.join(SOURCE, "data", "vit_digits.h5")
            seen = []
            r = attnscope.report(data, out=os.path.join(tmp, "mine"), jobs=2, title="digits",
                                 progress=lambda f, unit: seen.append(f))
            p = subprocess.run([BINARY, "report", data, "--out", os.path.join(tmp, "theirs"), "--jobs", "2",
                                "--title", "digits"], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(os.path.join(tmp, "theirs", "data.js")) as f:
                theirs = json.loads(f.read()[len("window.ATTNSCOPE_REPORT = "):].rstrip().rstrip(";"))
            strip = lambda d: {k: v for k, v in d.items() if k not in ("generated", "command")}   # noqa: E731
            mine = strip(dict(r.data))
            theirs = strip(theirs)
            for doc in (mine, theirs):
                for inp in doc["inputs"]:
                    inp["batch_command"] = None
            self.assertEqual(json.loads(json.dumps(mine)), theirs)
            self.assertTrue(os.path.isfile(r.index))
            with open(r.index) as f:
                self.assertIn("<title>digits</title>", f.read())
            self.assertEqual(list(r.runs), ["vit_digits"])
            self.assertEqual(len(r.runs["vit_digits"].records), 3 * 4 * 3)
            df = r.to_pandas()
            self.assertEqual(len(df), 3 * 4 * 3)
            self.assertEqual(set(df["mechanism"]), {"softmax", "linear", "mhla"})
            self.assertEqual(seen[-1], 1.0)

    def test_paged_by_layer_reads_back_as_one_page(self):
        with tempfile.TemporaryDirectory() as tmp:
            data = os.path.join(SOURCE, "data", "vit_digits.h5")
            single = attnscope.report(data, out=os.path.join(tmp, "single"), jobs=2, pages="single")
            paged = attnscope.report(data, out=os.path.join(tmp, "paged"), jobs=2, pages="layer")
            self.assertTrue(os.path.isfile(os.path.join(tmp, "paged", "vit_digits-layer-2.html")))
            self.assertFalse(os.path.exists(os.path.join(tmp, "single", "vit_digits-layer-0.html")))
            a, b = dict(single.data)["inputs"][0], dict(paged.data)["inputs"][0]
            self.assertEqual([u["page"] for u in b["units"]][:1], ["vit_digits-layer-0.html"])
            for u, v in zip(a["units"], b["units"]):
                v = {k: x for k, x in v.items() if k != "page"}
                self.assertEqual(json.loads(json.dumps(u)), json.loads(json.dumps(v)))   # the curves are back
            self.assertTrue(b["units"][0]["mechanisms"][0]["singular_values"])
            self.assertEqual(len(paged.to_pandas()), 3 * 4 * 3)
            with self.assertRaisesRegex(ValueError, "pages"):
                attnscope.report(data, out=os.path.join(tmp, "bad"), pages="folded")
            # The same folder written again on one page: the layer pages of the paged report go (none links there),
            # files that only look like them stay.
            for keep in ("vit_digits-layer-x.html", "notes-layer-1.html"):
                open(os.path.join(tmp, "paged", keep), "w").close()
            attnscope.report(data, out=os.path.join(tmp, "paged"), jobs=2, pages="single")
            left = sorted(f for f in os.listdir(os.path.join(tmp, "paged")) if "-layer-" in f)
            self.assertEqual(left, ["notes-layer-1.html", "vit_digits-layer-x.html"])

    def test_errors(self):
        with tempfile.TemporaryDirectory() as tmp:
            with self.assertRaises(FileNotFoundError):
                attnscope.report(os.path.join(tmp, "missing.h5"), out=os.path.join(tmp, "R"))
            bad = os.path.join(tmp, "bad.npy")
            with open(bad, "wb") as f:
                f.write(b"not numpy")
            with self.assertRaisesRegex(ValueError, "bad.npy"):
                attnscope.report(bad, out=os.path.join(tmp, "R"))
            self.assertFalse(os.path.exists(os.path.join(tmp, "R")))
            with self.assertRaises(TypeError):
                attnscope.report(out=os.path.join(tmp, "R"))


class TorchRecorder(unittest.TestCase):
    """Issue 34: the PyTorch recorder ships inside the module as attnscope.torch (tools/python/attnscope_dump.py)."""

    def test_import_and_record(self):
        try:
            import torch
        except ImportError:
            self.skipTest("python3 cannot import torch (apt-get install python3-torch)")
        import attnscope.torch as bridge
        self.assertTrue(bridge.__file__.endswith(os.path.join("attnscope", "torch.py")))
        with open(os.path.join(SOURCE, "tools", "python", "attnscope_dump.py")) as a, open(bridge.__file__) as b:
            self.assertEqual(a.read(), b.read())
        torch.manual_seed(0)
        mha = torch.nn.MultiheadAttention(16, 2, batch_first=True).eval()
        x = torch.randn(1, 12, 16)
        with torch.no_grad(), bridge.AttnScopeRecorder(mha) as rec:
            mha(x, x, x)
        q, k, _ = rec.tensors(0, 0)
        self.assertEqual(tuple(q.shape), (2, 12, 8))
        doc = rec.analyze(0, head=1)
        self.assertEqual(doc["input"]["n"], 12)


class Batch(unittest.TestCase):
    """Issue 33: attnscope.batch runs a TOML job as `attnscope batch` does and reads the folder back as tables."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.job = os.path.join(self.tmp.name, "job.toml")
        data = os.path.join(SOURCE, "data")
        with open(self.job, "w") as f:
            f.write(f'inputs = ["{data}/gaussian.h5", "{data}/lowrank.h5"]\nq = "/q"\nk = "/k"\nheads = [0, 1]\n'
                    '[[figure]]\nview = "spectrum"\nheads = [0]\n')

    def tearDown(self):
        self.tmp.cleanup()

    @staticmethod
    def without_timings(records):
        return [{k: v for k, v in r.items() if k not in ("seconds", "timing")} for r in records]

    def test_equals_the_command_line(self):
        mine, theirs = os.path.join(self.tmp.name, "mine"), os.path.join(self.tmp.name, "theirs")
        seen = []
        b = attnscope.batch(self.job, mine, jobs=2, progress=lambda f, stage: seen.append((f, stage)))
        p = subprocess.run([BINARY, "batch", self.job, "--out", theirs, "--jobs", "2"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(theirs, "results.jsonl")) as f:
            cli_records = [json.loads(line) for line in f]
        key = lambda r: r["key"]   # noqa: E731  (jobs=2: any order)
        self.assertEqual(sorted(self.without_timings(b.records), key=key), sorted(self.without_timings(cli_records), key=key))
        self.assertEqual(len(b.records), 2 * 2 * 3)   # files x heads x default mechanisms
        df = b.to_pandas()
        self.assertEqual(len(df), len(b.records))
        self.assertEqual(set(df["mechanism"]), {"softmax", "linear", "mhla"})
        with open(os.path.join(theirs, "aggregate.json")) as f:
            self.assertEqual(dict(b.aggregate), json.load(f))
        rows = b.aggregate.to_pandas()
        self.assertTrue(((rows["mechanism"] == "mhla") & (rows["metric"] == "rank")).any())
        self.assertEqual(len(b.aggregate.pairs()), len(b.aggregate["pairs"]))
        self.assertEqual([os.path.basename(f) for f in b.figures],
                         sorted(os.listdir(os.path.join(theirs, "figures"))))
        # Progress: one report per unit, increasing, then (1.0, "done").
        self.assertEqual(seen[-1], (1.0, "done"))
        fractions = [f for f, _ in seen[:-1]]
        self.assertEqual(fractions, sorted(fractions))
        self.assertEqual(len(fractions), 4)

    def test_resumes_and_refuses_bad_jobs(self):
        out = os.path.join(self.tmp.name, "out")
        first = attnscope.batch(self.job, out)
        again = attnscope.batch(self.job, out)   # every unit recorded: kept, not analysed again
        self.assertEqual(self.without_timings(again.records), self.without_timings(first.records))
        with self.assertRaises(FileNotFoundError):
            attnscope.batch(os.path.join(self.tmp.name, "absent.toml"))
        bad = os.path.join(self.tmp.name, "bad.toml")
        with open(bad, "w") as f:
            f.write('inputs = ["x.h5"]\nq = "/q"\nk = "/k"\nbogus = 1\n')
        with self.assertRaisesRegex(ValueError, r"^.*bad\.toml:4: unknown key 'bogus' in the job"):
            attnscope.batch(bad, os.path.join(self.tmp.name, "never"))
        self.assertFalse(os.path.exists(os.path.join(self.tmp.name, "never")))


class Depth(unittest.TestCase):
    """Issue 33: attnscope.depth is `attnscope depth --json`, with typed keywords, a table and progress."""

    def test_equals_the_command_line(self):
        for name, args, kw in (("trained_mqar_softmax.h5", [], {}),
                               ("vit_digits.h5", ["--alpha", "0.8", "--mechanism", "linear,mhla", "--layers", "0,2"],
                                dict(alpha=0.8, mechanism=["linear", "mhla"], layers=[0, 2])),
                               ("vit_digits.h5", ["--head", "1", "--prefix-tokens", "1"], dict(head=1, prefix_tokens=1))):
            path = os.path.join(SOURCE, "data", name)
            code, out, err = cli("depth", path, "--json", "-", *args)
            self.assertEqual(code, 0, err)
            self.assertEqual(dict(attnscope.depth(path, **kw)), json.loads(out), name)

    def test_table_progress_and_errors(self):
        path = os.path.join(SOURCE, "data", "vit_digits.h5")
        seen = []
        doc = attnscope.depth(path, mechanism="linear", progress=lambda f, s: seen.append(f))
        df = doc.to_pandas()
        self.assertEqual(len(df), len(doc["depth"]))
        self.assertEqual(df["depth"].tolist(), [s["depth"] for s in doc["depth"]])
        self.assertIn("residual_to_uniform", df.columns)
        self.assertEqual(seen[-1], 1.0)
        self.assertGreaterEqual(len(seen), 2)
        with self.assertRaisesRegex(ValueError, r"^heads=max: only 'mean' \(the mean over every head\); one head is head=H$"):
            attnscope.depth(path, heads="max")
        with self.assertRaisesRegex(TypeError, r"^alpha: expected a number, got str$"):
            attnscope.depth(path, alpha="0.5")
        with self.assertRaises(FileNotFoundError):
            attnscope.depth(path + ".absent")


class Figures(unittest.TestCase):
    """Issue 33: attnscope.figure renders with the attnscope executable: the command line's figure, byte for byte."""

    def setUp(self):
        if cli("figure", "--help")[0] != 0:
            self.skipTest("attnscope was built without the desktop app (no figure subcommand)")

    def test_same_bytes_as_the_command_line(self):
        h5 = os.path.join(SOURCE, "data", "gaussian.h5")
        with tempfile.TemporaryDirectory() as tmp:
            for view, fmt in (("spectrum", "png"), ("entropy", "svg")):
                want = os.path.join(tmp, "cli." + fmt)
                code, _, err = cli("figure", "--view", view, "--q", h5 + ":/q", "--k", h5 + ":/k", "--head", "1",
                                   "--width", "400", "--height", "300", "--out", want)
                self.assertEqual(code, 0, err)
                written = os.path.join(tmp, "py." + fmt)
                fig = attnscope.figure(view, h5 + ":/q", h5 + ":/k", format=fmt, out=written, head=1, width=400, height=300)
                with open(want, "rb") as f:
                    self.assertEqual(fig.data, f.read(), view)
                with open(written, "rb") as f:
                    self.assertEqual(f.read(), fig.data)
            self.assertIsNotNone(fig._repr_svg_())
            self.assertIsNone(fig._repr_png_())

    def test_arrays_and_errors(self):
        rng = np.random.default_rng(4)
        q, k = rng.standard_normal((64, 8)), rng.standard_normal((64, 8))
        fig = attnscope.figure("spectrum", q, k, width=300, height=200)
        self.assertEqual(fig.data[:8], b"\x89PNG\r\n\x1a\n")
        self.assertIs(fig._repr_png_(), fig.data)
        with self.assertRaisesRegex(ValueError, r"^blocks must be at least 1 \(got 0\)$"):
            attnscope.figure("maps", q, k, blocks=0)
        with self.assertRaisesRegex(ValueError, r"^view nope is not one of maps"):
            attnscope.figure("nope", q, k)
        with self.assertRaisesRegex(ValueError, r"^format 'gif'"):
            attnscope.figure("maps", q, k, format="gif")


class Progress(unittest.TestCase):
    """Issue 33: every call's progress starts with what it computes, never goes back, and reaches 1.0."""

    def test_analyze_matrix_and_sweep_reach_one(self):
        rng = np.random.default_rng(9)
        q, k = rng.standard_normal((300, 16)), rng.standard_normal((300, 16))
        for name, call in (("analyze", lambda cb: attnscope.analyze(q, k, progress=cb)),
                           ("matrix", lambda cb: attnscope.matrix(q, k, "mhla", progress=cb)),
                           ("sweep", lambda cb: attnscope.sweep(q, k, vary="n=64,128", mechanism="linear", progress=cb))):
            with self.subTest(call=name):
                seen = []
                call(lambda f, stage: seen.append((f, stage)))
                self.assertGreaterEqual(len(seen), 2, seen)
                fractions = [f for f, _ in seen]
                self.assertEqual(fractions, sorted(fractions))
                self.assertEqual(seen[-1], (1.0, "done"))
                self.assertTrue(all(isinstance(stage, str) and stage for _, stage in seen))

    def test_a_failed_call_does_not_report_done(self):
        seen = []
        with self.assertRaises(ValueError):
            attnscope.analyze(np.ones((8, 4)), np.ones((8, 4)), blocks=0, progress=lambda f, s: seen.append(f))
        self.assertNotIn(1.0, seen)


if __name__ == "__main__":
    unittest.main(verbosity=2)
