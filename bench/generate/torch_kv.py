"""PyTorch twin of `generate` on models/gpt.cue's shape: the same GPT
(pre-norm blocks, causal multi-head attention, GELU MLP, no biases, learned
positions), random weights, eager mode on the CPU, and a KV-cache loop:
the prompt's positions once, then one position a token, each layer's keys
and values appended to its cache. Prints tokens/s for greedy decoding.

usage: torch_kv.py TOKENS PROMPT_LEN THREADS [--no-cache]
"""
import sys
import time

import torch
import torch.nn.functional as F

V, T, D, H, L = 89, 256, 384, 6, 6
HD = D // H


def main():
    tokens, prompt_len, threads = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    cache = "--no-cache" not in sys.argv
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    r = lambda *s: torch.randn(*s) * 0.02
    wte, wpe = r(V, D), r(T, D)
    layers = [dict(ln1=torch.ones(D), q=r(D, D), k=r(D, D), v=r(D, D), proj=r(D, D),
                   ln2=torch.ones(D), fc=r(4 * D, D), mlp=r(D, 4 * D)) for _ in range(L)]
    lnf, head = torch.ones(D), r(V, D)

    def forward(ids, start, kc, vc):
        # ids: the positions start..start+n-1; kc, vc: per layer [H, start, HD] or None
        n = ids.shape[0]
        x = wte[ids] + wpe[start:start + n]
        for i, p in enumerate(layers):
            h = F.layer_norm(x, (D,), p["ln1"])
            q = (h @ p["q"].T).view(n, H, HD).transpose(0, 1)
            k = (h @ p["k"].T).view(n, H, HD).transpose(0, 1)
            v = (h @ p["v"].T).view(n, H, HD).transpose(0, 1)
            if kc is not None:
                if kc[i] is not None:
                    k, v = torch.cat([kc[i], k], 1), torch.cat([vc[i], v], 1)
                kc[i], vc[i] = k, v
            s = (q @ k.transpose(1, 2)) / HD ** 0.5
            m = torch.ones(n, k.shape[1], dtype=torch.bool).tril(k.shape[1] - n)
            a = s.masked_fill(~m, float("-inf")).softmax(-1)
            y = (a @ v).transpose(0, 1).reshape(n, D)
            x = x + y @ p["proj"].T
            h = F.layer_norm(x, (D,), p["ln2"])
            x = x + F.gelu(h @ p["fc"].T) @ p["mlp"].T
        return F.layer_norm(x[-1:], (D,), lnf) @ head.T

    ids = torch.randint(0, V, (prompt_len,))
    with torch.no_grad():
        start = time.perf_counter()
        if cache:
            kc, vc = [None] * L, [None] * L
            logits = forward(ids, 0, kc, vc)
            for _ in range(tokens):
                nxt = logits.argmax(-1)
                ids = torch.cat([ids, nxt])
                logits = forward(nxt, ids.shape[0] - 1, kc, vc)
        else:
            for _ in range(tokens):
                logits = forward(ids[-T:], 0, None, None)
                ids = torch.cat([ids, logits.argmax(-1)])
        secs = time.perf_counter() - start
    print(f"pytorch {'kv-cache' if cache else 'no cache'}: {tokens} tokens in {secs:.3f}s, {tokens / secs:.1f} tokens/s ({threads} thread{'s' if threads > 1 else ''}, torch {torch.__version__})")


main()
