#!/usr/bin/env python3
"""gpu-peer.py: the peer for scripts/gpubench — the same random-weight Llama
shapes in PyTorch on the same GPU, fp16, with its default KV cache:
Hugging Face transformers' LlamaForCausalLM (DynamicCache) when transformers
is installed, else a plain PyTorch Llama (scaled_dot_product_attention,
concatenated K/V) — the summary says which. Same measurements as gpubench:
prefill tokens/s, decode tokens/s at batch 1, 8, 64 after a short context,
and torch's own read bandwidth (a large sum).

    python3 scripts/gpu-peer.py --shapes 1b,8b --json peer.json

Measurement only; nothing here is part of kvq.
"""
import argparse, json, statistics, time

import torch
import torch.nn.functional as F

SHAPES = {
    "tiny": dict(dim=256, hidden=512, layers=2, heads=4, kv_heads=2, head_dim=64, vocab=512),
    "1b": dict(dim=2048, hidden=8192, layers=16, heads=32, kv_heads=8, head_dim=64, vocab=32000),
    "8b": dict(dim=4096, hidden=14336, layers=32, heads=32, kv_heads=8, head_dim=128, vocab=32000),
}


def sync():
    torch.cuda.synchronize()


def bandwidth(nbytes=2 << 30, reps=5):
    x = torch.empty(nbytes // 2, dtype=torch.float16, device="cuda").uniform_()
    times = []
    for _ in range(reps + 1):
        sync(); t = time.perf_counter(); x.sum(dtype=torch.float32); sync()
        times.append(time.perf_counter() - t)
    return nbytes / statistics.median(times[1:]) / 1e9


class PlainLlama(torch.nn.Module):
    """A Llama forward pass in plain PyTorch with a growing K/V cache."""

    def __init__(self, s):
        super().__init__()
        self.s = s
        d, h, kv, hd = s["dim"], s["heads"], s["kv_heads"], s["head_dim"]
        mk = lambda r, c: torch.nn.Parameter(torch.randn(r, c, dtype=torch.float16, device="cuda") / c**0.5)
        self.embed = mk(s["vocab"], d)
        self.out = mk(s["vocab"], d)
        self.layers = [dict(q=mk(h * hd, d), k=mk(kv * hd, d), v=mk(kv * hd, d), o=mk(d, h * hd),
                            g=mk(s["hidden"], d), u=mk(s["hidden"], d), dn=mk(d, s["hidden"]))
                       for _ in range(s["layers"])]
        inv = 1.0 / (10000 ** (torch.arange(0, hd, 2, device="cuda").float() / hd))
        self.inv = inv

    def rope(self, x, pos):
        ang = pos[:, None].float() * self.inv[None, :]
        cos, sin = ang.cos().half(), ang.sin().half()
        x1, x2 = x[..., ::2], x[..., 1::2]
        return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), -1).flatten(-2)

    def forward(self, ids, cache, pos0):
        s = self.s
        b, n = ids.shape
        h, kv, hd = s["heads"], s["kv_heads"], s["head_dim"]
        x = self.embed[ids]
        pos = torch.arange(pos0, pos0 + n, device="cuda")
        for i, L in enumerate(self.layers):
            y = F.rms_norm(x, (s["dim"],))
            q = (y @ L["q"].T).view(b, n, h, hd).transpose(1, 2)
            k = (y @ L["k"].T).view(b, n, kv, hd).transpose(1, 2)
            v = (y @ L["v"].T).view(b, n, kv, hd).transpose(1, 2)
            q, k = self.rope(q, pos), self.rope(k, pos)
            if cache[i] is not None:
                k = torch.cat((cache[i][0], k), 2); v = torch.cat((cache[i][1], v), 2)
            cache[i] = (k, v)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=n > 1, enable_gqa=True)
            x = x + a.transpose(1, 2).reshape(b, n, h * hd) @ L["o"].T
            y = F.rms_norm(x, (s["dim"],))
            x = x + (F.silu(y @ L["g"].T) * (y @ L["u"].T)) @ L["dn"].T
        return F.rms_norm(x[:, -1], (s["dim"],)) @ self.out.T


def make_model(s):
    try:
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError:
        return PlainLlama(s), "plain PyTorch (transformers not installed)"
    cfg = LlamaConfig(hidden_size=s["dim"], intermediate_size=s["hidden"], num_hidden_layers=s["layers"],
                      num_attention_heads=s["heads"], num_key_value_heads=s["kv_heads"], head_dim=s["head_dim"],
                      vocab_size=s["vocab"], max_position_embeddings=8192, tie_word_embeddings=False)
    with torch.device("cuda"):
        m = LlamaForCausalLM(cfg).half().eval()
    import transformers
    return m, f"transformers {transformers.__version__} LlamaForCausalLM, DynamicCache"


@torch.inference_mode()
def bench(name, s, prefill, ctx0, steps, reps, batches, bw):
    model, kind = make_model(s)
    hf = not isinstance(model, PlainLlama)
    V = s["vocab"]

    def step(ids, past, pos0):
        if hf:
            o = model(input_ids=ids, past_key_values=past, use_cache=True, logits_to_keep=1)
            return o.logits[:, -1], o.past_key_values
        past = past if past is not None else [None] * s["layers"]
        return model(ids, past, pos0), past

    times = []
    for r in range(reps + 1):
        ids = torch.randint(0, V, (1, prefill), device="cuda")
        sync(); t = time.perf_counter(); step(ids, None, 0); sync()
        if r:
            times.append(time.perf_counter() - t)
    res = dict(shape=name, peer=kind, prefill_tokens=prefill, prefill_tok_s=prefill / statistics.median(times), decode=[])
    print(f"{name} [{kind}]: prefill {prefill}: {res['prefill_tok_s']:.0f} tok/s")
    streamed = sum(p.numel() * 2 for n_, p in model.named_parameters() if "embed" not in n_) if hf else \
        sum(t.numel() * 2 for L in model.layers for t in L.values()) + model.out.numel() * 2
    limit = bw * 1e9 / streamed
    for b in batches:
        ids = torch.randint(0, V, (b, ctx0), device="cuda")
        _, past = step(ids, None, 0)
        pos = ctx0
        times = []
        for r in range(reps + 1):
            sync(); t = time.perf_counter()
            for _ in range(steps):
                _, past = step(torch.randint(0, V, (b, 1), device="cuda"), past, pos)
                pos += 1
            sync()
            if r:
                times.append((time.perf_counter() - t) / steps)
        st = statistics.median(times)
        res["decode"].append(dict(batch=b, tok_s=b / st, step_s=st))
        extra = f" = {100 * (1 / st) / limit:.0f}% of the weight-streaming limit ({limit:.0f} tok/s)" if b == 1 else ""
        print(f"  decode batch {b}: {b / st:.0f} tok/s ({st * 1e3:.2f} ms a step){extra}")
    del model
    torch.cuda.empty_cache()
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="1b,8b")
    ap.add_argument("--batches", default="1,8,64")
    ap.add_argument("--prefill", type=int, default=512)
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json")
    a = ap.parse_args()
    torch.manual_seed(1)
    bw = bandwidth()
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}: read bandwidth {bw:.0f} GB/s")
    out = dict(torch=torch.__version__, bandwidth_gb_s=bw, models=[])
    for name in a.shapes.split(","):
        out["models"].append(bench(name, SHAPES[name], a.prefill, a.context, a.steps, a.reps,
                                   [int(x) for x in a.batches.split(",")], bw))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
