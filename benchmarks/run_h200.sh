#!/usr/bin/env bash
# One device call on an H200: the gpu-marked tests, the kernel benchmark and the model-level
# benchmark, logs and JSON under $OUT (see BENCHMARKS.md, "GPU"). Stages are time-boxed so that a
# hang in one still returns the others' results.  Usage: bash benchmarks/run_h200.sh [stages]
# (default tests,llama8b,gemma,kernels; also: chunks, copy, warm, profile)
set -u
OUT=${OUT:-/tmp/h200}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
STAGES=${1:-tests,llama8b,gemma,kernels}
{ nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.limit --format=csv; date -u; \
  python3 -c 'import torch, triton, transformers; print(torch.__version__, triton.__version__, transformers.__version__)'; } 2>&1 | tee "$OUT/env.txt"
if [[ $STAGES == *tests* ]]; then
  # the engine-level GPU tests first (tier copies, graphs with the warm tier, engine logits), then the kernels'
  timeout 300 python3 -m pytest tests/engine tests/longdoc_kernels -m gpu -q -s \
    -p no:cacheprovider 2>&1 | tee "$OUT/tests.txt" | tail -25
fi
if [[ $STAGES == *llama8b* ]]; then
  timeout 200 python3 benchmarks/bench_engine_gpu.py --models llama8b --out "$OUT/llama8b" 2>&1 | tee "$OUT/llama8b.txt" | tail -30
fi
if [[ $STAGES == *gemma* ]]; then
  timeout 200 python3 benchmarks/bench_engine_gpu.py --models gemma --hf-static --out "$OUT/gemma" 2>&1 | tee "$OUT/gemma.txt" | tail -30
fi
if [[ $STAGES == *chunks* ]]; then  # batch > 1 prefill with one sequence's chunk a step (the CPU default), for the TTFT
  timeout 150 python3 benchmarks/bench_engine_gpu.py --models gemma --skip-hf --prefill-chunks 1 \
    --out "$OUT/gemma_chunks1" 2>&1 | tee "$OUT/gemma_chunks1.txt" | tail -16
fi
if [[ $STAGES == *copy* ]]; then  # the tier copier: side-stream gathers against compute, bandwidth
  timeout 90 python3 benchmarks/bench_tier_copy_gpu.py --json "$OUT/tier_copy.json" 2>&1 | tee "$OUT/tier_copy.txt"
fi
if [[ $STAGES == *warm* ]]; then  # e2e decode with bf16 pages and with the INT8 warm tier, side by side
  timeout 400 python3 benchmarks/bench_engine_gpu.py --models llama8b,gemma --warm-tier \
    --out "$OUT/warm" 2>&1 | tee "$OUT/warm.txt" | tail -22
fi
if [[ $STAGES == *kernels* ]]; then
  timeout 120 python3 benchmarks/bench_kernels.py --out "$OUT/kernels.json" 2>&1 | tee "$OUT/kernels.txt" | tail -22
fi
if [[ $STAGES == *profile* ]]; then
  timeout 80 python3 benchmarks/profile_engine_gpu.py 2>&1 | tee "$OUT/profile.txt" | grep "==\|graph replays" 
fi
