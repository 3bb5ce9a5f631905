# What an NHWC bf16 ResNet-18 step's convolutions cost in cuDNN at batch 128, per
# layer (docs/runs/gpu-conv-layouts-2026-11-30.txt): channels_last activations with
# (a) channels_last filters (KRSC) and (b) contiguous filters (KCRS), timed with CUDA
# events. PyTorch may convert a contiguous filter to channels_last on every call, so
# (b) is not cuDNN on a KCRS filter: mlbuild's own test on the real cuDNN (cuda's
# TestRealConvResNetBF16NHWC, docs/runs/gpu-twelfth-c-2026-11-30.txt) found that
# cuDNN 9.14 has no backward algorithm for NHWC tensors with a KCRS filter.
import torch, torch.nn.functional as F
torch.backends.cudnn.benchmark = True
B = 128
def t(f, n=50):
    for _ in range(5): f()
    torch.cuda.synchronize(); s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(n): f()
    e.record(); torch.cuda.synchronize(); return s.elapsed_time(e) / n * 1000
geo = [(64,64,32,1,3,4),(64,128,32,2,3,1),(128,128,16,1,3,3),(64,128,32,2,1,1),(128,256,16,2,3,1),(256,256,8,1,3,3),(128,256,16,2,1,1),(256,512,8,2,3,1),(512,512,4,1,3,3),(256,512,8,2,1,1)]
tot = {"krsc": 0, "kcrs": 0}
for ci, co, h, st, k, c in geo:
    x = torch.randn(B, ci, h, h, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    pad = k // 2
    row = []
    for name, cl in [("krsc", True), ("kcrs", False)]:
        w = torch.randn(co, ci, k, k, device="cuda", dtype=torch.bfloat16)
        if cl: w = w.to(memory_format=torch.channels_last)
        y = F.conv2d(x, w, stride=st, padding=pad)
        dy = torch.randn_like(y)
        r = (t(lambda: F.conv2d(x, w, stride=st, padding=pad)),
             t(lambda: torch.ops.aten.convolution_backward(dy, x, w, None, [st, st], [pad, pad], [1, 1], False, [0, 0], 1, [True, False, False])),
             t(lambda: torch.ops.aten.convolution_backward(dy, x, w, None, [st, st], [pad, pad], [1, 1], False, [0, 0], 1, [False, True, False])))
        tot[name] += c * sum(r)
        row.append("%s %.1f/%.1f/%.1f %s" % (name, *r, str(y.is_contiguous(memory_format=torch.channels_last))))
    print((ci, co, h, st, k), "x%d" % c, " | ".join(row), flush=True)
print("convs (us, fwd+dgrad+wgrad, the model's 19 convs less the stem):", {k: round(v) for k, v in tot.items()})
