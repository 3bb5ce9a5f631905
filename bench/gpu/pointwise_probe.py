# Whether ResNet-18's 1×1 stride-2 projections (batch 128, bf16, channels
# last) run faster as a copy of x's every other pixel followed by a 1×1
# stride-1 convolution, the input gradient then scattered back, than as
# the strided convolution: each variant's calls captured in a CUDA graph
# (cudnn.benchmark on), timed a call.
import torch, torch.nn.functional as F

torch.backends.cudnn.benchmark = True
B = 128
cl = torch.channels_last


def timed(fn, calls=10, launches=50):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    g.replay()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(launches):
        g.replay()
    e1.record()
    torch.cuda.synchronize()
    return e0.elapsed_time(e1) * 1000 / launches / calls


bwd = torch.ops.aten.convolution_backward
for ci, co, hw in [(64, 128, 32), (128, 256, 16), (256, 512, 8)]:
    oh = hw // 2
    x = torch.randn(B, ci, hw, hw, device="cuda").to(torch.bfloat16).to(memory_format=cl)
    w = (torch.randn(co, ci, 1, 1, device="cuda") / ci ** 0.5).to(torch.bfloat16).to(memory_format=cl)
    gy = torch.randn(B, co, oh, oh, device="cuda").to(torch.bfloat16).to(memory_format=cl)
    xs = x[:, :, ::2, ::2].contiguous(memory_format=cl)
    dx = torch.zeros_like(x)
    row = {}
    row["s2 fwd"] = timed(lambda: F.conv2d(x, w, stride=2))
    row["s2 dgrad"] = timed(lambda: bwd(gy, x, w, None, (2, 2), (0, 0), (1, 1), False, (0, 0), 1, (True, False, False)))
    row["s2 wgrad"] = timed(lambda: bwd(gy, x, w, None, (2, 2), (0, 0), (1, 1), False, (0, 0), 1, (False, True, False)))
    row["subsample"] = timed(lambda: xs.copy_(x[:, :, ::2, ::2]))
    row["s1 fwd"] = timed(lambda: F.conv2d(xs, w))
    row["s1 dgrad"] = timed(lambda: bwd(gy, xs, w, None, (1, 1), (0, 0), (1, 1), False, (0, 0), 1, (True, False, False)))
    row["s1 wgrad"] = timed(lambda: bwd(gy, xs, w, None, (1, 1), (0, 0), (1, 1), False, (0, 0), 1, (False, True, False)))
    dxs = bwd(gy, xs, w, None, (1, 1), (0, 0), (1, 1), False, (0, 0), 1, (True, False, False))[0]

    def scatter():
        dx.zero_()
        dx[:, :, ::2, ::2] = dxs
    row["scatter"] = timed(scatter)
    ref = bwd(gy, x, w, None, (2, 2), (0, 0), (1, 1), False, (0, 0), 1, (True, True, False))
    scatter()
    wg = bwd(gy, xs, w, None, (1, 1), (0, 0), (1, 1), False, (0, 0), 1, (False, True, False))[1]
    ok = torch.allclose(ref[0].float(), dx.float(), atol=1e-2, rtol=1e-2) and torch.allclose(ref[1].float(), wg.float(), atol=5e-1, rtol=2e-2)
    strided = row["s2 fwd"] + row["s2 dgrad"] + row["s2 wgrad"]
    pointwise = 2 * row["subsample"] + row["s1 fwd"] + row["s1 dgrad"] + row["s1 wgrad"] + row["scatter"]
    print("%d->%d at %dx%d: " % (ci, co, hw, hw) + ", ".join("%s %.1f" % kv for kv in row.items()) +
          " µs; strided %.1f, subsampled (x copied twice) %.1f; same results %s" % (strided, pointwise, ok))
