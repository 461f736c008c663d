"""The PyTorch bridge's recorder.analyze (tools/python/attnscope_dump.py) gives the numbers of its saved file.

A small encoder runs inside the recorder; recorder.analyze(layer, head) must equal attnscope.analyze on the
file recorder.save() writes (the defaults it records, causal and scale, taken the same way), values and the
output measures of A V included. Exit 77 (skipped)
without PyTorch.
"""
import os
import sys
import tempfile

try:
    import torch
except ImportError:
    print("PyTorch is not installed (python3-torch): skipped")
    sys.exit(77)

import attnscope

SOURCE = os.environ["ATTNSCOPE_SOURCE_DIR"]
sys.path.insert(0, os.path.join(SOURCE, "tools", "python"))
from attnscope_dump import AttnScopeRecorder, capture  # noqa: E402


def results(doc):
    return [{k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in r.items()} for r in doc["results"]]


def main():
    torch.manual_seed(0)
    model = torch.nn.TransformerEncoder(
        torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, batch_first=True), num_layers=2)
    model.eval()
    x = torch.randn(1, 48, 32)
    with AttnScopeRecorder(model) as rec:
        with torch.no_grad():
            model(x, mask=torch.nn.Transformer.generate_square_subsequent_mask(48))
    with tempfile.TemporaryDirectory() as tmp:
        path = rec.save(os.path.join(tmp, "acts.h5"))
        for layer in (0, 1):
            for head in (0, 3):
                direct = rec.analyze(layer, head=head, blocks=4, row_entropy=True)
                saved = attnscope.analyze(f"{path}:/layers/{layer}/q", f"{path}:/layers/{layer}/k",
                                          f"{path}:/layers/{layer}/v", head=head, blocks=4, row_entropy=True)
                if results(direct) != results(saved):
                    print(f"layer {layer} head {head}: recorder.analyze differs from the saved file's analysis")
                    return 1
                # The recorder passes the values: every mechanism has the rank of its output A V (N x d_v).
                if any(not isinstance(r.get("output"), dict) or r["output"].get("rank", 0) < 1
                       for r in direct["results"]):
                    print(f"layer {layer} head {head}: no output measures from the recorded values")
                    return 1
                if direct["results"][0]["params"].get("causal") is not True:
                    print("the recorded causal mask was not taken as causal")
                    return 1
    # capture(): the same forward pass in one call, every layer and head ready for attnscope.analyze.
    mask = torch.nn.Transformer.generate_square_subsequent_mask(48)
    layers = capture(model, x, {"mask": mask})
    if len(layers) != 2 or [list(l.q.shape) for l in layers] != [[4, 48, 8]] * 2 or not all(l.causal for l in layers):
        print(f"capture: {layers}")
        return 1
    docs = layers.analyze(blocks=4)
    for layer in (0, 1):
        for head in (0, 3):
            one = rec.analyze(layer, head=head, blocks=4)
            unit = docs[layer]["units"][head]
            if unit["at"] != {"h": head} or results(unit) != results(one):
                print(f"capture: layer {layer} head {head} differs from recorder.analyze")
                return 1
    table = layers.to_pandas(mechanism=["softmax", "linear"])
    if len(table) != 2 * 4 * 2 or sorted(set(table["layer"])) != [0, 1] or list(table.columns[:2]) != ["layer", "layer_name"]:
        print(f"capture: to_pandas has {len(table)} rows, columns {list(table.columns)[:4]}")
        return 1
    try:
        capture(torch.nn.Linear(4, 4), torch.randn(2, 4))
        print("capture of a model without attention did not raise")
        return 1
    except ValueError as e:
        if "no attention layer ran in Linear" not in str(e):
            print(f"capture without attention: {e}")
            return 1
    print("recorder.analyze equals the saved file's analysis (2 layers x 2 heads); capture() gives the same per layer "
          "and head in one call")
    return 0


if __name__ == "__main__":
    sys.exit(main())
