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
from attnscope_dump import AttnScopeRecorder  # noqa: E402


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
    print("recorder.analyze equals the saved file's analysis (2 layers x 2 heads)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
