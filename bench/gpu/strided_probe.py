# Whether cuDNN runs ResNet-18's 1×1 stride-2 projections faster as a
# stride-1 convolution on a strided view of x (x[:, ::2, ::2, :] described
# with cudnnSetTensor4dDescriptorEx, no copy) than as the stride-2
# convolution its heuristics choose for (57 µs for 64->128 at 32×32, batch
# 128, bf16 NHWC; PyTorch's call 19 µs), and whether the fused call with an
# identity activation accepts an algorithm other than IMPLICIT_PRECOMP_GEMM.
import ctypes, os, sys
sys.path.insert(0, os.path.dirname(__file__))
import torch, torch.nn.functional as F
from fused_conv_probe import L, ck, vp, i32, Perf, tensor, timed, h, BF16, FLOAT, NHWC, XCORR, TENSOR_OP, RELU, IDENTITY, one, zero, ws

B = 128
for ci, co, hw in [(64, 128, 32), (128, 256, 16), (256, 512, 8)]:
    oh = hw // 2
    x = torch.randn(B, ci, hw, hw, device="cuda").to(torch.bfloat16).to(memory_format=torch.channels_last)
    w = (torch.randn(co, ci, 1, 1, device="cuda") / ci ** 0.5).to(torch.bfloat16).to(memory_format=torch.channels_last)
    bias = torch.randn(co, device="cuda").to(torch.bfloat16)
    y = torch.empty(B, co, oh, oh, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    ref = F.conv2d(x.float(), w.float(), stride=2) + bias.float().view(1, -1, 1, 1)
    wd = vp(); ck(L.cudnnCreateFilterDescriptor(ctypes.byref(wd)), "fd"); ck(L.cudnnSetFilter4dDescriptor(wd, BF16, NHWC, co, ci, 1, 1), "set fd")
    yd, bd = tensor(B, co, oh, oh), tensor(1, co, 1, 1)
    ad = vp(); ck(L.cudnnCreateActivationDescriptor(ctypes.byref(ad)), "ad"); ck(L.cudnnSetActivationDescriptor(ad, IDENTITY, 0, ctypes.c_double(0)), "set ad")
    rows = []
    for name, st, xd in [("stride 2", 2, tensor(B, ci, hw, hw)), ("strided view, stride 1", 1, None)]:
        if xd is None:
            xd = vp(); ck(L.cudnnCreateTensorDescriptor(ctypes.byref(xd)), "td")
            ck(L.cudnnSetTensor4dDescriptorEx(xd, BF16, B, ci, oh, oh, hw * hw * ci, 1, 2 * hw * ci, 2 * ci), "set td ex")
        cd = vp(); ck(L.cudnnCreateConvolutionDescriptor(ctypes.byref(cd)), "cd")
        ck(L.cudnnSetConvolution2dDescriptor(cd, 0, 0, st, st, 1, 1, XCORR, FLOAT), "set cd"); ck(L.cudnnSetConvolutionMathType(cd, TENSOR_OP), "math")
        perf = (Perf * 8)(); n = i32()
        s = L.cudnnGetConvolutionForwardAlgorithm_v7(h, xd, wd, cd, yd, 8, ctypes.byref(n), perf)
        if s != 0:
            rows.append("%s: heuristics status %d" % (name, s)); continue
        for p in perf[:n.value]:
            if p.status != 0:
                continue
            a, wsz = p.algo, ctypes.c_size_t()
            if L.cudnnGetConvolutionForwardWorkspaceSize(h, xd, wd, cd, yd, a, ctypes.byref(wsz)) != 0:
                continue
            plain = lambda: ck(L.cudnnConvolutionForward(h, ctypes.byref(one), xd, vp(x.data_ptr()), wd, vp(w.data_ptr()), cd, a, vp(ws.data_ptr()), wsz, ctypes.byref(zero), yd, vp(y.data_ptr())), "fwd")
            fused = lambda: L.cudnnConvolutionBiasActivationForward(h, ctypes.byref(one), xd, vp(x.data_ptr()), wd, vp(w.data_ptr()), cd, a, vp(ws.data_ptr()), wsz, ctypes.byref(zero), yd, vp(y.data_ptr()), bd, vp(bias.data_ptr()), ad, yd, vp(y.data_ptr()))
            try:
                tp = timed(plain)
            except RuntimeError as e:
                rows.append("%s algo %d: %s" % (name, a, e)); continue
            s = fused(); torch.cuda.synchronize()
            cell = "%s algo %d: plain %.1f" % (name, a, tp)
            if s != 0:
                cell += ", fused identity status %d" % s
            else:
                err = (y.float() - ref).abs().max().item() / ref.abs().max().item()
                cell += ", fused identity %.1f (rel err %.1e)" % (timed(lambda: ck(fused(), "fused")), err)
            rows.append(cell)
    print((ci, co, hw), " | ".join(rows), flush=True)
print("strided probe done")
