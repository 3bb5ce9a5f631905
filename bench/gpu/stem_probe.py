# What cuDNN (through PyTorch, cudnn.benchmark) takes for CIFAR ResNet-18's
# stem, a 3x3 convolution of 3 channels to 64 at 32x32, batch 128: forward
# and weight gradient (the stem has no input gradient), in bf16
# channels_last (3 channels, and the input padded to 4 and 8), and in fp32
# and tf32 NCHW; against mlbuild's direct kernels (77 us forward and 137
# weight gradient in bf16 NHWC, 39 and 109 in float32 NCHW: docs/runs).
import torch, torch.nn.functional as F
torch.backends.cudnn.benchmark = True

def t(f, n=20, reps=5):
    f(); torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph(); s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        f(); torch.cuda.synchronize()
        with torch.cuda.graph(g, stream=s):
            for _ in range(n): f()
    g.replay(); torch.cuda.synchronize()
    best = 1e9
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
        a.record(); g.replay(); b.record(); torch.cuda.synchronize()
        best = min(best, a.elapsed_time(b) / n * 1000)
    return best

B = 128
for name, dt, cl, cin, tf32 in [("bf16 NHWC c3", torch.bfloat16, True, 3, False), ("bf16 NHWC c4", torch.bfloat16, True, 4, False),
                                 ("bf16 NHWC c8", torch.bfloat16, True, 8, False), ("fp32 NCHW", torch.float32, False, 3, False),
                                 ("tf32 NCHW", torch.float32, False, 3, True), ("bf16 NCHW", torch.bfloat16, False, 3, False)]:
    torch.backends.cudnn.allow_tf32 = tf32
    x = torch.randn(B, cin, 32, 32, device="cuda", dtype=dt)
    w = torch.randn(64, cin, 3, 3, device="cuda", dtype=dt)
    if cl:
        x, w = x.to(memory_format=torch.channels_last), w.to(memory_format=torch.channels_last)
    y = F.conv2d(x, w, padding=1)
    dy = torch.randn_like(y)
    fw = t(lambda: F.conv2d(x, w, padding=1))
    wg = t(lambda: torch.ops.aten.convolution_backward(dy, x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [False, True, False]))
    print("%-14s forward %6.1f us, weight gradient %6.1f us" % (name, fw, wg), flush=True)
