# Per-layer cuDNN timing (docs/runs/gpu-conv-layouts-2026-11-30.txt) of CIFAR ResNet-18's convolutions at batch 128:
# forward, input gradient, weight gradient, in tf32 NCHW, bf16 NCHW, bf16 NHWC.
import torch, time
torch.backends.cudnn.benchmark = True
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
geo = [(3,64,32,1,3),(64,64,32,1,3),(64,128,32,2,3),(128,128,16,1,3),(64,128,32,2,1),
       (128,256,16,2,3),(256,256,8,1,3),(128,256,16,2,1),(256,512,8,2,3),(512,512,4,1,3),(256,512,8,2,1)]
count = [1,4,1,3,1,1,3,1,1,3,1]
B=128
def t(f, n=50):
    for _ in range(5): f()
    torch.cuda.synchronize(); s=torch.cuda.Event(enable_timing=True); e=torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(n): f()
    e.record(); torch.cuda.synchronize(); return s.elapsed_time(e)/n*1000
tot = {}
for (ci,co,h,st,k),c in zip(geo,count):
    row=[]
    for name,dt,cl in [("tf32",torch.float32,False),("bf16nchw",torch.bfloat16,False),("bf16nhwc",torch.bfloat16,True)]:
        x=torch.randn(B,ci,h,h,device="cuda",dtype=dt); w=torch.randn(co,ci,k,k,device="cuda",dtype=dt)
        if cl: x=x.to(memory_format=torch.channels_last); w=w.to(memory_format=torch.channels_last)
        pad=k//2
        y=torch.nn.functional.conv2d(x,w,stride=st,padding=pad)
        dy=torch.randn_like(y)
        f=lambda: torch.nn.functional.conv2d(x,w,stride=st,padding=pad)
        bd=lambda: torch.ops.aten.convolution_backward(dy,x,w,None,[st,st],[pad,pad],[1,1],False,[0,0],1,[True,False,False])
        bw=lambda: torch.ops.aten.convolution_backward(dy,x,w,None,[st,st],[pad,pad],[1,1],False,[0,0],1,[False,True,False])
        r=(t(f),t(bd),t(bw))
        tot[name]=tot.get(name,0)+c*sum(r) - (c*r[1] if ci==3 else 0)
        row.append("%s %.1f/%.1f/%.1f"%(name,*r))
    print((ci,co,h,st,k),"x%d"%c," | ".join(row), flush=True)
print("sum over the model's convs (us):", {k:round(v) for k,v in tot.items()})
