"""Reference timings on a GPU node through PyTorch, beside ctwin-realrun's own kernels: the
FlashAttention-class fused attention (scaled_dot_product_attention) that training frameworks
run, forward and backward, and cuBLAS BF16/FP8 GEMMs, at the twin scenarios' shapes. Prints one
JSON object (docs/realrun-cuda.md, "Measured on an H200"). Needs torch with CUDA.

    python3 scripts/gpu-torch-reference.py > torch-reference.json
    python3 scripts/gpu-torch-reference.py serving > torch-serving-reference.json

`serving` times what a serving engine's attention does at the serving twin's shapes
(scenarios/twin/h200-serving.json, Llama-3-8B: 32 heads, 8 KV heads, head_dim 128): decode (one
query a sequence over a contiguous KV of a given context, SDPA; vLLM's paged kernels read
the same bytes through a block table) and a prefill chunk.
"""
import json
import statistics

import torch


def timed(fn, warmup=3, repeats=10):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e-3)
    return statistics.median(times)


def attention(batch, heads, kv_heads, seq, head_dim):
    q = torch.randn(batch, heads, seq, head_dim, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(batch, kv_heads, seq, head_dim, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(batch, kv_heads, seq, head_dim, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    fwd = timed(lambda: sdpa(q, k, v, is_causal=True, enable_gqa=True))
    out = sdpa(q, k, v, is_causal=True, enable_gqa=True)
    grad = torch.randn_like(out)
    fwd_bwd = timed(lambda: torch.autograd.grad(sdpa(q, k, v, is_causal=True, enable_gqa=True), (q, k, v), grad))
    # Causal: about half of seq x seq pairs, 4 FLOPs a pair and dimension forward (QK^T, PV).
    flops = 4 * batch * heads * seq * seq / 2 * head_dim
    return {"batch": batch, "heads": heads, "kv_heads": kv_heads, "seq": seq, "head_dim": head_dim,
            "forward_s": fwd, "backward_s": fwd_bwd - fwd, "forward_tflops": flops / fwd / 1e12,
            "backward_tflops": 2.5 * flops / max(fwd_bwd - fwd, 1e-12) / 1e12}


def gemm(m, n, k, fp8=False):
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    if fp8:
        a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
        one = torch.tensor(1.0, device="cuda")
        fn = lambda: torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=True)
    else:
        fn = lambda: a @ b.t()
    t = timed(fn)
    return {"m": m, "n": n, "k": k, "dtype": "fp8" if fp8 else "bf16", "s": t, "tflops": 2 * m * n * k / t / 1e12}


def decode_attention(batch, context, heads=32, kv_heads=8, head_dim=128):
    q = torch.randn(batch, heads, 1, head_dim, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(batch, kv_heads, context, head_dim, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    t = timed(lambda: sdpa(q, k, v, enable_gqa=True))
    kv_bytes = 2 * batch * kv_heads * context * head_dim * 2
    return {"batch": batch, "context": context, "heads": heads, "kv_heads": kv_heads, "head_dim": head_dim,
            "s": t, "kv_gbyte_per_s": kv_bytes / t / 1e9}


def serving():
    torch.manual_seed(1)
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
           "decode_attention": [], "prefill_attention": []}
    for batch, context in [(1, 1024), (8, 1024), (32, 1024), (64, 1024), (64, 2048), (32, 4096), (16, 8192)]:
        try:
            out["decode_attention"].append(decode_attention(batch, context))
        except Exception as e:  # noqa: BLE001
            out["decode_attention"].append({"batch": batch, "context": context, "error": str(e)})
    for shape in [(1, 32, 8, 1024, 128), (1, 32, 8, 4096, 128)]:
        try:
            out["prefill_attention"].append(attention(*shape))
        except Exception as e:  # noqa: BLE001
            out["prefill_attention"].append({"shape": shape, "error": str(e)})
    print(json.dumps(out, indent=1))


def main():
    torch.manual_seed(1)
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
           "attention": [], "gemm": []}
    # h200-fit: Llama-3.2-1B, micro-batch 2 x 4096; h200-heldout: 3B-shaped, 1 x 8192.
    for shape in [(2, 32, 8, 4096, 64), (1, 24, 8, 8192, 128)]:
        try:
            out["attention"].append(attention(*shape))
        except Exception as e:  # noqa: BLE001 - recorded, the rest still runs
            out["attention"].append({"shape": shape, "error": str(e)})
    for m, n, k in [(8192, 2048, 2048), (8192, 16384, 2048), (8192, 2048, 8192), (8192, 128256, 2048),
                    (8192, 5120, 3072), (8192, 16384, 3072), (8192, 3072, 8192), (8192, 8192, 8192)]:
        for fp8 in (False, True):
            try:
                out["gemm"].append(gemm(m, n, k, fp8))
            except Exception as e:  # noqa: BLE001
                out["gemm"].append({"m": m, "n": n, "k": k, "fp8": fp8, "error": str(e)})
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    import sys

    serving() if sys.argv[1:] == ["serving"] else main()
