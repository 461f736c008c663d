"""Statistics over units by the NumPy reference (tests/reference/attnref.py, aggregate()), for the C++ test
test_aggregate.cpp: reads batch records (a JSON list of results.jsonl objects), writes attnref.aggregate over them
and the sign-test p-values of the (positive, negative) counts asked. With CLUSTER (file, layer, head or an index
axis letter) the units are clustered by the records' value of that field: two-stage intervals.
usage: aggregate_reference.py RECORDS.json SIGN_COUNTS.json OUT.json [CLUSTER]"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "reference"))
import attnref  # noqa: E402

# A batch record's provenance: not metrics (the analyze result is the rest of the record).
PROVENANCE = {"key", "unit", "mechanism_index", "settings", "attnscope_version", "input", "layer", "head", "unit_at", "seconds"}


def cluster_value(rec, field):
    """A record's value of a unit field (docs/batch.md, `attnscope aggregate --by`), as text."""
    if field == "file":
        v = rec["input"]["file"]
    elif field in ("layer", "head"):
        v = rec.get(field)
    else:
        v = rec["input"].get("at", {}).get(field)
    return v if isinstance(v, str) else json.dumps(v)


def units_of(records, cluster=None):
    units = []
    for rec in records:
        u = {"unit": rec["unit"], "mechanism": rec["mechanism"]}
        if cluster:
            u["cluster"] = cluster_value(rec, cluster)
        u.update(attnref.flatten_result({k: v for k, v in rec.items() if k not in PROVENANCE}))
        units.append(u)
    return units


def main():
    records_path, counts_path, out_path = sys.argv[1:4]
    cluster = sys.argv[4] if len(sys.argv) > 4 else None
    with open(records_path) as f:
        records = json.load(f)
    with open(counts_path) as f:
        counts = json.load(f)
    out = attnref.aggregate(units_of(records, cluster))
    out["sign_p"] = [attnref.sign_test_p([1.0] * pos + [-1.0] * neg) for pos, neg in counts]
    with open(out_path, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
