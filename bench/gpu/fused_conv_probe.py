# Whether cuDNN's legacy fused call, cudnnConvolutionBiasActivationForward
# (y = act(alpha1·conv(x, w) + alpha2·z + bias)), runs on bfloat16 NHWC tensors
# with a KRSC filter on this GPU, how fast against cudnnConvolutionForward alone
# with the same algorithm, and whether it is right (against PyTorch's float32
# convolution of the same bfloat16 values). One line per ResNet-18 geometry at
# batch 128: every algorithm the _v7 heuristics propose, with the fused call's
# status and both calls' µs. The inference plan's folded batch norms need it
# (docs/cuda.md, "Folded batch norms at inference").
import ctypes, glob, os, sys
import torch, torch.nn.functional as F

def load():
    import nvidia.cudnn
    d = os.path.join(list(nvidia.cudnn.__path__)[0], "lib")
    for sub in sorted(glob.glob(os.path.join(d, "libcudnn_*.so.9"))):
        ctypes.CDLL(sub, mode=ctypes.RTLD_GLOBAL)
    return ctypes.CDLL(os.path.join(d, "libcudnn.so.9"), mode=ctypes.RTLD_GLOBAL)

L = load()
vp, i32 = ctypes.c_void_p, ctypes.c_int
def ck(s, what):
    if s != 0:
        raise RuntimeError("%s: status %d" % (what, s))

class Perf(ctypes.Structure):
    _fields_ = [("algo", i32), ("status", i32), ("time", ctypes.c_float), ("memory", ctypes.c_size_t),
                ("determinism", i32), ("mathType", i32), ("reserved", i32 * 3)]

BF16, FLOAT, NHWC, XCORR, TENSOR_OP, RELU, IDENTITY = 9, 0, 1, 1, 1, 1, 5
h = vp(); ck(L.cudnnCreate(ctypes.byref(h)), "create")
ck(L.cudnnSetStream(h, vp(torch.cuda.current_stream().cuda_stream)), "stream")
print("cuDNN", L.cudnnGetVersion(), torch.cuda.get_device_name(), flush=True)

def tensor(n, c, hh, ww, dt=BF16, fmt=NHWC):
    t = vp(); ck(L.cudnnCreateTensorDescriptor(ctypes.byref(t)), "td")
    ck(L.cudnnSetTensor4dDescriptor(t, fmt, dt, n, c, hh, ww), "set td"); return t

one, zero = ctypes.c_float(1), ctypes.c_float(0)
ws = torch.empty(1 << 28, dtype=torch.uint8, device="cuda")

def timed(f, n=20, reps=5):
    # n calls captured in one CUDA graph (a Python loop of calls would time
    # the host: about 55 µs a call), the best of reps replays.
    f(); torch.cuda.synchronize()
    g, side = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    with torch.cuda.stream(side):
        ck(L.cudnnSetStream(h, vp(side.cuda_stream)), "stream")
        with torch.cuda.graph(g, stream=side):
            for _ in range(n): f()
    ck(L.cudnnSetStream(h, vp(torch.cuda.current_stream().cuda_stream)), "stream")
    g.replay(); torch.cuda.synchronize()
    best = 1e9
    for _ in range(reps):
        s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
        s.record(); g.replay(); e.record(); torch.cuda.synchronize()
        best = min(best, s.elapsed_time(e) / n * 1000)
    return best

if __name__ == "__main__":
    B = 128
    geo = [(64,64,32,1,3),(64,128,32,2,3),(64,128,32,2,1),(128,128,16,1,3),(128,256,16,2,3),(128,256,16,2,1),(256,256,8,1,3),(256,512,8,2,3),(256,512,8,2,1),(512,512,4,1,3)]
    ws = torch.empty(1 << 28, dtype=torch.uint8, device="cuda")
    one, zero = ctypes.c_float(1), ctypes.c_float(0)
    bad = 0
    for ci, co, hw, st, k in geo:
        pad, oh = k // 2, (hw + 2 * (k // 2) - k) // st + 1
        x = torch.randn(B, ci, hw, hw, device="cuda").to(torch.bfloat16).to(memory_format=torch.channels_last)
        w = (torch.randn(co, ci, k, k, device="cuda") / (ci * k * k) ** 0.5).to(torch.bfloat16).to(memory_format=torch.channels_last)
        z = torch.randn(B, co, oh, oh, device="cuda").to(torch.bfloat16).to(memory_format=torch.channels_last)
        bias = torch.randn(co, device="cuda")
        y = torch.empty_like(z)
        xd, yd = tensor(B, ci, hw, hw), tensor(B, co, oh, oh)
        wd = vp(); ck(L.cudnnCreateFilterDescriptor(ctypes.byref(wd)), "fd")
        ck(L.cudnnSetFilter4dDescriptor(wd, BF16, NHWC, co, ci, k, k), "set fd")
        cd = vp(); ck(L.cudnnCreateConvolutionDescriptor(ctypes.byref(cd)), "cd")
        ck(L.cudnnSetConvolution2dDescriptor(cd, pad, pad, st, st, 1, 1, XCORR, FLOAT), "set cd")
        ck(L.cudnnSetConvolutionMathType(cd, TENSOR_OP), "math")
        bds = {"float bias": tensor(1, co, 1, 1, FLOAT), "bf16 bias": tensor(1, co, 1, 1, BF16)}
        biases = {"float bias": bias, "bf16 bias": bias.to(torch.bfloat16)}
        ad = vp(); ck(L.cudnnCreateActivationDescriptor(ctypes.byref(ad)), "ad")
        ck(L.cudnnSetActivationDescriptor(ad, RELU, 0, ctypes.c_double(0)), "set ad")
        perf = (Perf * 8)(); n = i32()
        ck(L.cudnnGetConvolutionForwardAlgorithm_v7(h, xd, wd, cd, yd, 8, ctypes.byref(n), perf), "v7")
        ref = F.relu(F.conv2d(x.float(), w.float(), stride=st, padding=pad) + bias.view(1, -1, 1, 1) + z.float())
        row = []
        for p in perf[:n.value]:
            if p.status != 0:
                continue
            a, wsz = p.algo, ctypes.c_size_t()
            ck(L.cudnnGetConvolutionForwardWorkspaceSize(h, xd, wd, cd, yd, a, ctypes.byref(wsz)), "ws")
            plain = lambda: ck(L.cudnnConvolutionForward(h, ctypes.byref(one), xd, vp(x.data_ptr()), wd, vp(w.data_ptr()), cd, a, vp(ws.data_ptr()), wsz, ctypes.byref(zero), yd, vp(y.data_ptr())), "fwd")
            tp = timed(plain)
            cell = "algo %d%s: plain %.1f" % (a, "" if p.determinism == 1 else " (nondet)", tp)
            for name, bd in bds.items():
                b = biases[name]
                fused = lambda: L.cudnnConvolutionBiasActivationForward(h, ctypes.byref(one), xd, vp(x.data_ptr()), wd, vp(w.data_ptr()), cd, a, vp(ws.data_ptr()), wsz, ctypes.byref(one), yd, vp(z.data_ptr()), bd, vp(b.data_ptr()), ad, yd, vp(y.data_ptr()))
                s = fused(); torch.cuda.synchronize()
                if s != 0:
                    cell += ", %s status %d" % (name, s); continue
                err = (y.float() - ref).abs().max().item() / max(ref.abs().max().item(), 1e-6)
                tf = timed(lambda: ck(fused(), "fused"))
                if err > 2e-2: bad += 1
                cell += ", %s %.1f (rel err %.1e)" % (name, tf, err)
            row.append(cell)
        bb = biases["bf16 bias"].view(1, -1, 1, 1)
        te = timed(lambda: torch.relu_(torch.add(y, z).add_(bb)))
        print((ci, co, hw, st, k), " | ".join(row), "| eager add+bias+relu %.1f" % te, flush=True)

    # The fused call inside a CUDA graph (how mlbuild runs it): capture, replay, compare.
    ci, co, hw, st, k = 64, 64, 32, 1, 3
    x = torch.randn(B, ci, hw, hw, device="cuda").to(torch.bfloat16).to(memory_format=torch.channels_last)
    w = (torch.randn(co, ci, k, k, device="cuda") / 24).to(torch.bfloat16).to(memory_format=torch.channels_last)
    z = torch.randn(B, co, hw, hw, device="cuda").to(torch.bfloat16).to(memory_format=torch.channels_last)
    bias = torch.randn(co, device="cuda").to(torch.bfloat16); y = torch.empty_like(z)
    xd, yd, bd = tensor(B, ci, hw, hw), tensor(B, co, hw, hw), tensor(1, co, 1, 1, BF16)
    wd = vp(); L.cudnnCreateFilterDescriptor(ctypes.byref(wd)); L.cudnnSetFilter4dDescriptor(wd, BF16, NHWC, co, ci, k, k)
    cd = vp(); L.cudnnCreateConvolutionDescriptor(ctypes.byref(cd)); L.cudnnSetConvolution2dDescriptor(cd, 1, 1, 1, 1, 1, 1, XCORR, FLOAT); L.cudnnSetConvolutionMathType(cd, TENSOR_OP)
    ad = vp(); L.cudnnCreateActivationDescriptor(ctypes.byref(ad)); L.cudnnSetActivationDescriptor(ad, RELU, 0, ctypes.c_double(0))
    perf = (Perf * 8)(); n = i32(); L.cudnnGetConvolutionForwardAlgorithm_v7(h, xd, wd, cd, yd, 8, ctypes.byref(n), perf)
    a = perf[0].algo; wsz = ctypes.c_size_t(); L.cudnnGetConvolutionForwardWorkspaceSize(h, xd, wd, cd, yd, a, ctypes.byref(wsz))
    call = lambda: L.cudnnConvolutionBiasActivationForward(h, ctypes.byref(one), xd, vp(x.data_ptr()), wd, vp(w.data_ptr()), cd, a, vp(ws.data_ptr()), wsz, ctypes.byref(one), yd, vp(z.data_ptr()), bd, vp(bias.data_ptr()), ad, yd, vp(y.data_ptr()))
    print("warm status", call()); torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph(); st_ = torch.cuda.Stream()
    with torch.cuda.stream(st_):
        L.cudnnSetStream(h, vp(st_.cuda_stream))
        with torch.cuda.graph(g, stream=st_):
            s = call()
    print("captured status", s)
    y.zero_(); g.replay(); torch.cuda.synchronize()
    ref = F.relu(F.conv2d(x.float(), w.float(), padding=1) + bias.float().view(1, -1, 1, 1) + z.float())
    print("graph replay rel err %.1e" % ((y.float() - ref).abs().max().item() / ref.abs().max().item()))
    print("probe done, %d wrong" % bad)
