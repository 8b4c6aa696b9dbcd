#!/usr/bin/env bash
# One device call on an H200: the gpu-marked tests, the kernel benchmark and the model-level
# benchmark, logs and JSON under $OUT (see BENCHMARKS.md, "GPU"). Stages are time-boxed so that a
# hang in one still returns the others' results. Each stage ends with one line
# "STAGE <name>: PASS|FAIL (exit <rc>, <s> s) <its last summary line>", and the call ends with all
# of them again, in $OUT/summary.txt too.
# Usage: bash benchmarks/run_h200.sh [stages]
# (default tests,llama8b,gemma,kernels; also: chunks, copy, warm, int8prefill, profile, userpath, pipebatch, sweep, review, tp,
#  cudnnshapes, gemmshapes, firstreq, prefillprof, warmprobe)
set -u
OUT=${OUT:-/tmp/h200}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
# pydantic for the benchmarks that import pipelines/ (benchmarks/gpu_pylib.sh builds it; carry .gpu_pylib)
[[ -d .gpu_pylib ]] && export PYTHONPATH="$PWD/.gpu_pylib${PYTHONPATH:+:$PYTHONPATH}"
STAGES=${1:-tests,llama8b,gemma,kernels}
SUMMARY=()
{ nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.limit --format=csv; date -u; \
  python3 -c 'import torch, triton, transformers; print(torch.__version__, triton.__version__, transformers.__version__)'; } 2>&1 | tee "$OUT/env.txt"

# stage NAME SECONDS LOG TAIL CMD...: run CMD under a time limit, its output to $OUT/LOG.txt and the
# last TAIL lines to the terminal, then the stage's one-line verdict
stage() {
  local name=$1 limit=$2 log="$OUT/$3.txt" tail_n=$4
  shift 4
  local t0=$SECONDS rc
  timeout "$limit" "$@" > "$log" 2>&1
  rc=$?
  tail -n "$tail_n" "$log"
  local last verdict=PASS
  last=$(grep -v '^\s*$' "$log" | tail -n 1 | cut -c1-160)
  [[ $rc -ne 0 ]] && verdict=FAIL
  [[ $rc -eq 124 ]] && last="timed out after ${limit} s; $last"
  local line="STAGE $name: $verdict (exit $rc, $((SECONDS - t0)) s) $last"
  echo "$line"
  SUMMARY+=("$line")
}

if [[ $STAGES == *tests* ]]; then
  # the engine-level GPU tests first (tier copies, graphs with the warm tier, engine logits), then the kernels'
  stage tests "${TESTS_LIMIT:-300}" tests 25 python3 -m pytest tests/engine tests/longdoc_kernels -m gpu -q -s -p no:cacheprovider
fi
if [[ $STAGES == *llama8b* ]]; then
  stage llama8b 200 llama8b 30 python3 benchmarks/bench_engine_gpu.py --models llama8b --out "$OUT/llama8b"
fi
if [[ $STAGES == *gemma* ]]; then
  stage gemma 200 gemma 30 python3 benchmarks/bench_engine_gpu.py --models gemma --hf-static --out "$OUT/gemma"
fi
if [[ $STAGES == *chunks* ]]; then  # batch > 1 prefill with one sequence's chunk a step (the CPU default), for the TTFT
  stage chunks 150 gemma_chunks1 16 python3 benchmarks/bench_engine_gpu.py --models gemma --skip-hf --prefill-chunks 1 \
    --out "$OUT/gemma_chunks1"
fi
if [[ $STAGES == *copy* ]]; then  # the tier copier: side-stream gathers against compute, bandwidth
  stage copy 90 tier_copy 20 python3 benchmarks/bench_tier_copy_gpu.py --json "$OUT/tier_copy.json"
fi
if [[ ,$STAGES, == *,warm,* ]]; then  # e2e decode with bf16 pages and with the INT8 warm tier, side by side
  stage warm 400 warm 22 python3 benchmarks/bench_engine_gpu.py --models llama8b,gemma --warm-tier --out "$OUT/warm"
fi
if [[ $STAGES == *int8prefill* ]]; then  # the warm tier's prefill reading INT8 pages directly against dequantising
  stage int8prefill_kernel 150 int8prefill_kernel 12 python3 benchmarks/bench_kernels.py --int8-prefill \
    --out "$OUT/int8prefill_kernel.json"
  for st in 1 2; do
    stage int8prefill_tests_stages$st 150 int8prefill_tests_stages$st 6 env LONGDOC_PREFILL_READS_INT8=1 \
      LONGDOC_PREFILL_INT8_STAGES=$st python3 -m pytest tests/engine tests/longdoc_kernels -m gpu \
      -k "warm or int8" -q -s -p no:cacheprovider
  done
  # e2e: the first run also pays the process-independent first compiles and tuning; off, on, off
  for tag in off1 on off2; do
    flag=0; [[ $tag == on ]] && flag=1
    stage int8prefill_$tag 200 warm_gemma_int8prefill_$tag 12 env LONGDOC_PREFILL_READS_INT8=$flag \
      LONGDOC_PREFILL_INT8_STAGES=${INT8_STAGES:-2} python3 benchmarks/bench_engine_gpu.py --models gemma --warm-tier \
      --out "$OUT/warm_gemma_int8prefill_$tag"
  done
fi
if [[ $STAGES == *warmprobe* ]]; then  # where the warm tier's batched prefill time goes (probe_warm_prefill.py)
  for flag in ${WARMPROBE_FLAGS:-0 1}; do
    stage warmprobe_reads_int8_$flag "${WARMPROBE_LIMIT:-280}" warmprobe_reads_int8_$flag 80 \
      env LONGDOC_PREFILL_READS_INT8=$flag python3 benchmarks/probe_warm_prefill.py ${WARMPROBE_ARGS:-}
  done
fi
if [[ $STAGES == *kernels* ]]; then
  stage kernels 120 kernels 22 python3 benchmarks/bench_kernels.py --out "$OUT/kernels.json"
fi
if [[ $STAGES == *profile* ]]; then
  stage profile 80 profile 6 python3 benchmarks/profile_engine_gpu.py
fi
if [[ $STAGES == *userpath* ]]; then  # the public API with defaults, transformers in the same process
  stage userpath "${USERPATH_LIMIT:-330}" userpath 40 python3 benchmarks/bench_user_path_gpu.py --out "$OUT/userpath.json" ${USERPATH_ARGS:-}
fi
if [[ $STAGES == *pipebatch* ]]; then  # a pipeline's 30 prompts over a 20K-token document: batched vs one by one
  stage pipebatch "${PIPEBATCH_LIMIT:-300}" pipebatch 24 python3 benchmarks/bench_pipeline_batch_gpu.py --out "$OUT/pipebatch.json"
fi
if [[ $STAGES == *sweep* ]]; then  # memory_budget 0.1-0.9, 16 x 32K, fresh tuning cache, one process per run
  stage sweep "${SWEEP_LIMIT:-480}" sweep 20 python3 benchmarks/bench_memory_sweep_gpu.py --out "$OUT/sweep.json" ${SWEEP_ARGS:-}
fi
if [[ $STAGES == *review* ]]; then  # review table: 100 documents of 8K tokens x 5 questions, batched vs a generate per cell
  stage review "${REVIEW_LIMIT:-540}" review 16 python3 benchmarks/bench_review_gpu.py --out "$OUT/review.json" ${REVIEW_ARGS:-}
fi
if [[ $STAGES == *tp* ]]; then  # tensor parallelism, W=1 against W=2 (needs a machine of >= 2 GPUs: nvidia-h200-x2)
  stage tp "${TP_LIMIT:-540}" tp 30 python3 benchmarks/bench_tp_gpu.py --out "$OUT/tp.json" ${TP_ARGS:-}
fi
if [[ $STAGES == *gemmshapes* ]]; then  # what a new row count costs a GEMM the first time (a mixed step's rows)
  stage gemmshapes 120 gemm_shapes 8 python3 benchmarks/probe_gemm_shapes.py --json "$OUT/gemm_shapes.json"
fi
if [[ $STAGES == *cudnnshapes* ]]; then  # what a new sequence length costs cuDNN's attention (first call vs second)
  # each setting in a fresh process without the driver's JIT cache: exact lengths, padded (the default),
  # and both with torch's opt-in ragged path that is meant to avoid a plan per length
  for mode in exact:0:0 aligned:128:0 exact_ragged:0:1 aligned_ragged:128:1; do
    IFS=: read -r tag align ragged <<< "$mode"
    stage cudnnshapes_$tag 120 cudnn_shapes_$tag 15 env CUDA_CACHE_DISABLE=1 TORCH_CUDNN_SDPA_AVOID_RECOMPILE=$ragged \
      python3 benchmarks/probe_cudnn_shapes.py --align "$align" --json "$OUT/cudnn_shapes_$tag.json"
  done
fi
if [[ $STAGES == *firstreq* ]]; then  # after warmup(): requests of new lengths, cuDNN on then off (8B shape)
  stage firstreq 300 first_request_8b 16 python3 benchmarks/probe_first_request.py --model ${FIRSTREQ_MODEL:-llama8b}
fi
if [[ $STAGES == *prefillprof* ]]; then  # one long prefill: kernels, host waits, Python side (engine defaults)
  stage prefillprof 200 profile_prefill 8 python3 benchmarks/profile_prefill_gpu.py ${PREFILLPROF_ARGS:---model gemma --ctx 32768 --skip-hf}
fi
echo "== summary"
printf '%s\n' "${SUMMARY[@]}" | tee "$OUT/summary.txt"
