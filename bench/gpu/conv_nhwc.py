# What an NHWC bf16 ResNet-18 step would cost in cuDNN, per layer kind, at batch 128:
# convolutions with channels_last activations and (a) channels_last filters (KRSC),
# (b) contiguous filters (KCRS); batch norm (cuDNN, channels_last bf16) forward
# and backward, alone and followed by ReLU; all timed with CUDA events.
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
bn = {}
for ch, h, c in [(64, 32, 5), (128, 16, 5), (256, 8, 5), (512, 4, 5)]:
    x = torch.randn(B, ch, h, h, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last).requires_grad_()
    m = torch.nn.BatchNorm2d(ch).cuda().to(memory_format=torch.channels_last)
    f = lambda: m(x)
    def fr(): return F.relu(m(x))
    y = m(x); dy = torch.randn_like(y)
    fb = lambda: torch.autograd.grad(m(x), x, dy)
    fbr = lambda: torch.autograd.grad(F.relu(m(x)), x, dy)
    r = (t(f), t(fr), t(fb), t(fbr))
    print("bn", ch, h, "fwd %.1f fwd+relu %.1f fwd+bwd %.1f fwd+relu+bwd %.1f" % r, flush=True)
    for i, v in enumerate(r): bn[i] = bn.get(i, 0) + c * v
print("batch norms (us, 20 layers): fwd %.0f, fwd+relu %.0f, fwd+bwd %.0f, fwd+relu+bwd %.0f" % tuple(bn[i] for i in range(4)))
