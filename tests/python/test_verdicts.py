"""The study's verdicts (tools/study/verdicts.py) follow the declared rules of tools/study/claims.toml and the numbers
of the aggregate files (tools/study/mqar_aggregate.py makes MQAR's from the runs): a number changed in an aggregate
file changes the verdict it feeds; a failed gate makes
the task's verdicts "not tested"; structural claims are never evidence; Holm's adjustment is over the claims."""
import copy
import json
import os
import sys
import tempfile
import unittest

SOURCE = os.environ.get("ATTNSCOPE_SOURCE_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(SOURCE, "tools", "study"))
import verdicts  # noqa: E402

with open(os.path.join(SOURCE, "tools", "study", "claims.toml"), "rb") as f:
    RULES = verdicts.tomllib.load(f)


def pair(a, b, metric, diff, low, high, p, agree=5, clusters=5):
    return {"mechanism_a": a, "mechanism_b": b, "metric": metric, "mean_diff": diff, "ci_low": low, "ci_high": high,
            "p_t": p, "agree": agree, "clusters": clusters, "ci_method": "t"}


def mech(m, metric, mean):
    return {"mechanism": m, "metric": metric, "mean": mean}


MQAR = {
    "mechanisms": [mech("softmax", "recall_accuracy", 0.995), mech("none", "recall_accuracy", 0.01)],
    "pairs": [pair("mhla_blocks16", "linear", "recall_accuracy", 0.20, 0.10, 0.30, 0.001),
              pair("mhla_blocks16", "mhla_blocks4", "recall_accuracy", 0.05, -0.01, 0.11, 0.08, agree=4),
              pair("linear", "softmax", "recall_drop_n64_to_n256", 0.3, 0.2, 0.4, 0.0005),
              pair("mhla_blocks16", "linear", "excess_effective_rank", 0.5, 0.3, 0.7, 0.002),
              # written the other way round: softmax - linear, the claim asks linear - softmax
              pair("softmax", "linear", "entropy_support_normalized_mean", -0.2, -0.3, -0.1, 0.003),
              pair("mhla_blocks16", "linear", "entropy_below_baseline", -0.1, -0.2, -0.05, 0.01)],
}


def run(mqar, extra=None):
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "mqar"))
        with open(os.path.join(root, "mqar", "aggregate.json"), "w") as f:
            json.dump(mqar, f)
        for task, doc in (extra or {}).items():
            os.makedirs(os.path.join(root, task))
            with open(os.path.join(root, task, "aggregate.json"), "w") as f:
                json.dump(doc, f)
        return {(r["claim"], r["task"]): r for r in verdicts.verdicts(RULES, root)}


class Verdicts(unittest.TestCase):
    def test_rules(self):
        v = run(MQAR)
        self.assertEqual(v[("mhla_recall", "mqar")]["verdict"], "supported")
        self.assertEqual(v[("recall_grows_with_m", "mqar")]["verdict"], "not supported")      # interval reaches 0
        self.assertEqual(v[("linear_flat_rows", "mqar")]["verdict"], "supported")             # the row turned
        self.assertEqual(v[("mhla_sharper_rows", "mqar")]["verdict"], "not supported (opposite)")
        self.assertEqual(v[("rank_bound", "all")]["verdict"], "structural only")
        # no ViT or LM aggregate: their verdicts are not tested, with the gate's reason
        self.assertEqual(v[("mhla_query_specific", "vit")]["verdict"], "not tested")
        self.assertIn("missing", v[("mhla_query_specific", "vit")]["why"])

    def test_a_task_names_its_mhla_model(self):
        # claims.toml [names.mqar]: MQAR's "mhla" is the model with M = 16 blocks; a row named plain "mhla" is not it
        v = run(MQAR)
        self.assertEqual(v[("mhla_query_specific", "mqar")]["a"], "mhla_blocks16")
        self.assertEqual(v[("mhla_query_specific", "mqar")]["verdict"], "supported")
        renamed = copy.deepcopy(MQAR)
        renamed["pairs"][3]["mechanism_a"] = "mhla"
        self.assertEqual(run(renamed)[("mhla_query_specific", "mqar")]["verdict"], "not tested")

    def test_a_changed_number_changes_the_verdict(self):
        changed = copy.deepcopy(MQAR)
        changed["pairs"][0].update(ci_low=-0.02)          # mhla - linear recall: the interval now reaches 0
        self.assertEqual(run(changed)[("mhla_recall", "mqar")]["verdict"], "not supported")
        changed = copy.deepcopy(MQAR)
        changed["pairs"][1].update(ci_low=0.01, p_t=0.001, agree=5)   # growth with M now clear
        self.assertEqual(run(changed)[("recall_grows_with_m", "mqar")]["verdict"], "supported")
        changed = copy.deepcopy(MQAR)
        changed["pairs"][0].update(agree=3)               # two of five seeds disagree
        self.assertEqual(run(changed)[("mhla_recall", "mqar")]["verdict"], "not supported")

    def test_holm_over_the_claims(self):
        changed = copy.deepcopy(MQAR)
        changed["pairs"][0].update(p_t=0.03)   # alone below 0.05; 5th of the six tested claims: 2 x 0.03 after Holm
        r = run(changed)[("mhla_recall", "mqar")]
        self.assertGreaterEqual(r["p_holm"], 0.05)
        self.assertEqual(r["verdict"], "not supported")
        self.assertEqual(verdicts.holm([0.01, 0.04, 0.03]), [0.03, 0.06, 0.06])

    def test_gates(self):
        weak = copy.deepcopy(MQAR)
        weak["mechanisms"][0]["mean"] = 0.95           # softmax does not solve the task
        for key, r in run(weak).items():
            if key[1] == "mqar":
                self.assertEqual(r["verdict"], "not tested", key)
                self.assertIn("softmax", r["why"])
        control = copy.deepcopy(MQAR)
        control["mechanisms"][1]["mean"] = 0.4         # the control without attention recalls: attention not needed
        self.assertEqual(run(control)[("mhla_recall", "mqar")]["verdict"], "not tested")
        # A ViT whose softmax model does not beat its control without attention: not tested, however clear the rows.
        vit = {"mechanisms": [], "pairs": [pair("softmax", "none", "test_accuracy", 0.01, -0.02, 0.04, 0.3),
                                           pair("mhla", "linear", "excess_effective_rank", 1.0, 0.5, 1.5, 1e-4)]}
        r = run(MQAR, {"vit": vit})[("mhla_query_specific", "vit")]
        self.assertEqual(r["verdict"], "not tested")
        vit["pairs"][0].update(ci_low=0.01)
        self.assertEqual(run(MQAR, {"vit": vit})[("mhla_query_specific", "vit")]["verdict"], "supported")


class MqarAggregate(unittest.TestCase):
    """tools/study/mqar_aggregate.py: runs -> rows at each mechanism's chosen learning rate -> verdicts."""

    def test_runs_to_verdicts(self):
        import mqar_aggregate
        runs = []
        accuracy = {"softmax": [1.0, 1.0, 0.999, 1.0, 1.0], "linear": [0.40, 0.45, 0.42, 0.38, 0.44],
                    "none": [0.008, 0.007, 0.009, 0.008, 0.006], "mhla_blocks16": [0.70, 0.74, 0.69, 0.75, 0.72],
                    "mhla_blocks4": [0.55, 0.52, 0.58, 0.50, 0.56]}
        for name, accs in accuracy.items():
            mech, _, variant = name.partition("_")
            var = {"blocks": int(variant[6:])} if variant else {}
            for seed, acc in enumerate(accs):
                runs.append(dict(mechanism=mech, variant=var, n=128, pairs=32, lr=3e-3, seed=seed, valid_accuracy=acc,
                                 test_accuracy=acc))
            # a worse learning rate at seed 0 is not chosen
            runs.append(dict(mechanism=mech, variant=var, n=128, pairs=32, lr=1e-3, seed=0, valid_accuracy=0.0,
                             test_accuracy=0.0))
        with tempfile.TemporaryDirectory() as root:
            os.makedirs(os.path.join(root, "runs"))
            for i, r in enumerate(runs):
                with open(os.path.join(root, "runs", f"{i}.json"), "w") as f:
                    json.dump(r, f)
            # the measures of every model (mqar_measures.py's layout): excess effective rank per layer; MHLA's above
            # linear's in every seed; a model at the learning rate not chosen is left out
            models = []
            for r in runs:
                name = r["mechanism"] + "".join(f"_{k}{v}" for k, v in r["variant"].items())
                base = {"mhla_blocks16": 3.0, "linear": 1.0}.get(name)
                if base is not None:
                    value = base + 0.1 * r["seed"] if r["lr"] == 3e-3 else -50.0
                    models.append(dict(key=str(len(models)), mechanism=r["mechanism"], variant=r["variant"], n=r["n"],
                                       pairs=r["pairs"], lr=r["lr"], seed=r["seed"], test_accuracy=r["test_accuracy"],
                                       layers={"0": {"excess_effective_rank": value},
                                               "1": {"excess_effective_rank": value + 1.0}}))
            os.makedirs(os.path.join(root, "mqar"))
            with open(os.path.join(root, "mqar", "measures.json"), "w") as f:
                json.dump(dict(models=models, correlations=[]), f)
            sys.argv = ["mqar_aggregate.py", "--runs", os.path.join(root, "runs"), "--out", os.path.join(root, "mqar")]
            mqar_aggregate.main()
            with open(os.path.join(root, "mqar", "aggregate.json")) as f:
                doc = json.load(f)
            lin = [r for r in doc["mechanisms"] if r["mechanism"] == "linear"][0]
            self.assertAlmostEqual(lin["mean"], sum(accuracy["linear"]) / 5, places=12)
            self.assertEqual(lin["ci_method"], "t")
            v = {(r["claim"], r["task"]): r for r in verdicts.verdicts(RULES, root)}
        self.assertEqual(v[("mhla_recall", "mqar")]["verdict"], "supported")
        self.assertEqual(v[("recall_grows_with_m", "mqar")]["verdict"], "supported")
        self.assertAlmostEqual(v[("mhla_recall", "mqar")]["mean_diff"], 0.72 - 0.418, places=12)
        self.assertEqual(v[("linear_collapses_with_n", "mqar")]["verdict"], "not tested")   # no N = 64 / 256 runs
        # per model the mean of its layers (value + 0.5), paired by seed: mhla_blocks16 - linear = 2.0 in every seed
        q = v[("mhla_query_specific", "mqar")]
        self.assertAlmostEqual(q["mean_diff"], 2.0, places=12)
        self.assertEqual(q["verdict"], "supported")
        row = [r for r in doc["mechanisms"] if r["mechanism"] == "linear" and r["metric"] == "excess_effective_rank"][0]
        self.assertAlmostEqual(row["mean"], 1.5 + 0.1 * 2, places=12)


class MqarMeasures(unittest.TestCase):
    """tools/study/mqar_measures.py's rank correlation: Spearman's rho with average ranks for ties."""

    def test_spearman_against_an_independent_one(self):
        import numpy as np
        import mqar_measures
        rng = np.random.default_rng(1)
        for _ in range(20):
            x = rng.integers(0, 5, 12).astype(float)   # ties
            y = rng.standard_normal(12)
            # Pearson's r of the average ranks, the ranks counted by hand
            def ranks(v):
                return np.array([np.sum(v < a) + (np.sum(v == a) + 1) / 2 for a in v])
            want = float(np.corrcoef(ranks(x), ranks(y))[0, 1])
            self.assertAlmostEqual(mqar_measures.spearman(x, y), want, places=12)
        self.assertIsNone(mqar_measures.spearman([1, 1, 1, 1], [1, 2, 3, 4]))


class TaskAggregate(unittest.TestCase):
    """tools/study/task_aggregate.py: a trained task's scores (summary.json, the controls' JSON) and its measures'
    clustered rows -> RESULTS/<task>/aggregate.json -> the gate and the verdicts."""

    def write_study(self, root, none_accuracy):
        study = os.path.join(root, "study")
        os.makedirs(study)
        acc = {"softmax": [0.90, 0.91, 0.89, 0.92, 0.90], "linear": [0.85] * 5, "mhla": [0.91] * 5}
        rows = [{"file": f"vit_{m}_s{s}.h5", "test_accuracy": a} for m, v in acc.items() for s, a in enumerate(v)]
        rows.append({"file": "lm_softmax_s0.h5", "test_bits_per_char": 2.5})   # another task: not read
        with open(os.path.join(study, "summary.json"), "w") as f:
            json.dump(rows, f)
        for s, a in enumerate(none_accuracy):
            with open(os.path.join(study, f"vit_none_s{s}.json"), "w") as f:
                json.dump({"seed": s, "test_accuracy": a}, f)
        cross = os.path.join(root, "cross.json")
        with open(cross, "w") as f:   # what `attnscope aggregate --cluster file --json` writes (one group)
            json.dump({"groups": [{"group": {}, "mechanisms": [], "pairs": [
                pair("mhla", "linear", "excess_effective_rank", 0.4, 0.2, 0.6, 0.001),
                pair("linear", "softmax", "entropy.support_normalized_mean", 0.1, 0.05, 0.15, 0.002)]}]}, f)
        return study, cross

    def verdicts_for(self, none_accuracy):
        import task_aggregate
        with tempfile.TemporaryDirectory() as root:
            study, cross = self.write_study(root, none_accuracy)
            doc = task_aggregate.task_document("vit", study, cross)
            os.makedirs(os.path.join(root, "vit"))
            with open(os.path.join(root, "vit", "aggregate.json"), "w") as f:
                json.dump(doc, f)
            return doc, {(r["claim"], r["task"]): r for r in verdicts.verdicts(RULES, root)}

    def test_gate_and_rows(self):
        doc, v = self.verdicts_for([0.60, 0.62, 0.58, 0.61, 0.59])
        gate = [r for r in doc["pairs"] if r["metric"] == "test_accuracy" and {r["mechanism_a"], r["mechanism_b"]} ==
                {"softmax", "none"}][0]
        sign = 1 if gate["mechanism_a"] == "softmax" else -1
        self.assertAlmostEqual(sign * gate["mean_diff"], 0.904 - 0.60, places=12)
        self.assertEqual(gate["clusters"], 5)
        self.assertEqual(v[("mhla_query_specific", "vit")]["verdict"], "supported")
        self.assertEqual(v[("linear_flat_rows", "vit")]["verdict"], "supported")   # "." read as "_"
        self.assertEqual(v[("mhla_sharper_rows", "vit")]["verdict"], "not tested")  # no row of it
        # a control as good as softmax: attention is not shown to be needed, so nothing of the task is judged
        _, v = self.verdicts_for([0.90, 0.92, 0.88, 0.93, 0.89])
        self.assertEqual(v[("mhla_query_specific", "vit")]["verdict"], "not tested")
        self.assertIn("not shown to be needed", v[("mhla_query_specific", "vit")]["why"])


if __name__ == "__main__":
    unittest.main()
