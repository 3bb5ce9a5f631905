"""Times cuBLAS (through PyTorch) on the GEMM shapes of models/gpt.cue and CIFAR ResNet-18
in each way their operands could be stored: fp32 exact, fp32 with bf16 arithmetic
(set_float32_matmul_precision("medium"), CUBLAS_COMPUTE_32F_FAST_16BF: what mlbuild's bf16 plans
run today), TF32, bf16 operands with fp32 or bf16 output, and the fp32 -> bf16 conversion of A.
Microseconds a GEMM, CUDA events over 50 calls. Usage on a GPU machine: python3 gemm_operands.py"""
import torch, time
def t(fn, n=50):
    for _ in range(5): fn()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(True), torch.cuda.Event(True)
    e0.record()
    for _ in range(n): fn()
    e1.record(); torch.cuda.synchronize()
    return e0.elapsed_time(e1) / n * 1000
shapes = [(16384,384,384),(16384,1536,384),(16384,384,1536),(384,384,16384),(384,1536,16384),(1536,384,16384),(65536,64,576),(576,64,65536),(32768,128,1152)]
print("M N K | fp32 exact | fp32 FAST_16BF (medium) | TF32 (high) | bf16 in, fp32 out | bf16 in, bf16 out | fp32->bf16 of A | us")
for M,N,K in shapes:
    a = torch.randn(M,K,device='cuda'); b = torch.randn(K,N,device='cuda')
    ab, bb = a.bfloat16(), b.bfloat16()
    out = torch.empty(M,N,device='cuda')
    r = []
    torch.set_float32_matmul_precision('highest'); r.append(t(lambda: torch.mm(a,b,out=out)))
    torch.set_float32_matmul_precision('medium'); r.append(t(lambda: torch.mm(a,b,out=out)))
    torch.set_float32_matmul_precision('high'); r.append(t(lambda: torch.mm(a,b,out=out)))
    torch.set_float32_matmul_precision('highest')
    try: r.append(t(lambda: torch.mm(ab,bb,out_dtype=torch.float32)))
    except Exception as e: r.append(-1)
    r.append(t(lambda: torch.mm(ab,bb)))
    r.append(t(lambda: a.to(torch.bfloat16)))
    print(M,N,K,"|"," | ".join(f"{x:.1f}" for x in r))
