# Whether cuDNN's legacy API (mlbuild's) runs CIFAR ResNet-18's stem, a 3x3
# convolution of 3 channels to 64 at 32x32, batch 128, on bfloat16 NHWC
# tensors with a KRSC filter: every algorithm the _v7 heuristics propose
# for the forward (plain and fused with bias and ReLU) and the weight
# gradient, timed in CUDA graphs (PyTorch's own calls: bench/gpu/stem_probe.py).
import ctypes, os, sys
sys.path.insert(0, os.path.dirname(__file__))
import torch, torch.nn.functional as F
from fused_conv_probe import L, ck, vp, i32, Perf, tensor, timed, h, BF16, FLOAT, NHWC, XCORR, TENSOR_OP, RELU, one, zero, ws

B, ci, co, hw = 128, 3, 64, 32
x = torch.randn(B, ci, hw, hw, device="cuda").to(torch.bfloat16).to(memory_format=torch.channels_last)
w = (torch.randn(co, ci, 3, 3, device="cuda") / 5).to(torch.bfloat16).to(memory_format=torch.channels_last)
y = torch.empty(B, co, hw, hw, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
dy = torch.randn_like(y)
dw = torch.empty_like(w)
bias = torch.randn(co, device="cuda").to(torch.bfloat16)
xd, yd, bd = tensor(B, ci, hw, hw), tensor(B, co, hw, hw), tensor(1, co, 1, 1)
wd = vp(); ck(L.cudnnCreateFilterDescriptor(ctypes.byref(wd)), "fd"); ck(L.cudnnSetFilter4dDescriptor(wd, BF16, NHWC, co, ci, 3, 3), "set fd")
cd = vp(); ck(L.cudnnCreateConvolutionDescriptor(ctypes.byref(cd)), "cd")
ck(L.cudnnSetConvolution2dDescriptor(cd, 1, 1, 1, 1, 1, 1, XCORR, FLOAT), "set cd"); ck(L.cudnnSetConvolutionMathType(cd, TENSOR_OP), "math")
ad = vp(); ck(L.cudnnCreateActivationDescriptor(ctypes.byref(ad)), "ad"); ck(L.cudnnSetActivationDescriptor(ad, RELU, 0, ctypes.c_double(0)), "set ad")
ref = F.relu(F.conv2d(x.float(), w.float(), padding=1) + bias.float().view(1, -1, 1, 1))
perf = (Perf * 8)(); n = i32()
s = L.cudnnGetConvolutionForwardAlgorithm_v7(h, xd, wd, cd, yd, 8, ctypes.byref(n), perf)
print("forward heuristics status", s, "count", n.value, flush=True)
for p in perf[:n.value]:
    a, wsz = p.algo, ctypes.c_size_t()
    if p.status != 0 or L.cudnnGetConvolutionForwardWorkspaceSize(h, xd, wd, cd, yd, a, ctypes.byref(wsz)) != 0:
        print("  algo %d status %d" % (a, p.status)); continue
    plain = lambda: L.cudnnConvolutionForward(h, ctypes.byref(one), xd, vp(x.data_ptr()), wd, vp(w.data_ptr()), cd, a, vp(ws.data_ptr()), wsz, ctypes.byref(zero), yd, vp(y.data_ptr()))
    fused = lambda: L.cudnnConvolutionBiasActivationForward(h, ctypes.byref(one), xd, vp(x.data_ptr()), wd, vp(w.data_ptr()), cd, a, vp(ws.data_ptr()), wsz, ctypes.byref(zero), yd, vp(y.data_ptr()), bd, vp(bias.data_ptr()), ad, yd, vp(y.data_ptr()))
    row = "  algo %d:" % a
    for name, f in [("plain", plain), ("fused", fused)]:
        st = f(); torch.cuda.synchronize()
        if st != 0:
            row += " %s status %d;" % (name, st); continue
        row += " %s %.1f us;" % (name, timed(lambda: ck(f(), name)))
    err = (y.float() - ref).abs().max().item() / ref.abs().max().item()
    print(row, "fused rel err %.1e" % err, flush=True)
s = L.cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, xd, yd, cd, wd, 8, ctypes.byref(n), perf)
print("weight gradient heuristics status", s, "count", n.value, flush=True)
for p in perf[:n.value]:
    a, wsz = p.algo, ctypes.c_size_t()
    if p.status != 0 or L.cudnnGetConvolutionBackwardFilterWorkspaceSize(h, xd, yd, cd, wd, a, ctypes.byref(wsz)) != 0:
        print("  algo %d status %d" % (a, p.status)); continue
    f = lambda: L.cudnnConvolutionBackwardFilter(h, ctypes.byref(one), xd, vp(x.data_ptr()), yd, vp(dy.data_ptr()), cd, a, vp(ws.data_ptr()), wsz, ctypes.byref(zero), wd, vp(dw.data_ptr()))
    st = f(); torch.cuda.synchronize()
    if st != 0:
        print("  algo %d run status %d" % (a, st)); continue
    print("  algo %d: %.1f us (determinism %d)" % (a, timed(lambda: ck(f(), "wgrad")), p.determinism), flush=True)
print("stem probe done")
