#!/bin/bash
# The next prepared GPU run of issue 26, after TensorFlow is carried (../shared/gpu/README.md):
#   bash bench/gpu_session.sh        (on the GPU machine; results under $OUT/gpu_session/)
# Each part is bounded (a crash or a hang costs only its part) and appends to log.txt as it goes,
# most needed first: what the H100 run of 2026-11-26 left open (BENCHMARKS.md, "Measured on one
# H100") and the A/B of that day's model changes (0b). About 20 minutes in all with 0b: more
# than one session's device time after the carry, so a short session stops after 0b or 1.
set -u
source /tmp/base/tf_env.sh
D=${OUT:-/tmp/out}/gpu_session; mkdir -p "$D"; L=$D/log.txt
part() { local t=$1; shift; echo "=== $(date +%T) [$t s] $*" | tee -a "$L"
  timeout -k 5 "$t" "$@" >> "$L" 2>&1; echo "=== exit $? $(date +%T)" | tee -a "$L"; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >> "$L"
# 0. cuDNN's dropout variant (segfaults under TF's jit_compile launcher; a reading of XLA's
#    source suggests the launcher leaves ExecutableRunOptions.local_device_count at 0, so the
#    dropout thunk's per-device RNG offset vector is empty: BENCHMARKS.md). A native backtrace
#    where gdb exists, then the non-dropout and the dropout probes through TF's PjRt device API,
#    which sets local_device_count.
if command -v gdb >/dev/null; then part 90 gdb -batch -ex run -ex bt --args python3 \
  /tmp/base/fmha_dropout_probe2.py padding; fi
PJRT="--tf_xla_use_device_api=true --tf_xla_enable_device_api_for_gpu=true"
part 60 env TF_XLA_FLAGS="$PJRT" python3 /tmp/base/fmha_probe.py 32 512 full
part 60 env TF_XLA_FLAGS="$PJRT" python3 /tmp/base/fmha_dropout_probe2.py padding
# 0b. The model changes of 2026-11-26 (the 2-D hidden stream, the GELU recomputed in the
#    backward pass; BENCHMARKS.md, "Compiled for a GPU without one") and of 2026-11-27 (the
#    global norm in grouped reductions: 2,296 -> 1,968 kernels per update on the compile)
#    against the tree before them, same machine, one row each: phase 1 with the fused kernel
#    (attention dropout 0) and
#    phase 2 with the original recipe. The tree before is carried as .gpu/before (made here
#    with: mkdir -p .gpu/before && git archive c539d8c bert_tf bench | tar -x -C .gpu/before).
if [ -d .gpu/before/bench ]; then for tree in .gpu/before .; do
  part 150 python3 $tree/bench/bench_pretraining_gpu.py --models=large --phases=1 \
    --squad=false --dtypes=bfloat16 --xla=true --attention_implementations=auto \
    --attention_probs_dropout_prob=0 --steps_per_loop=10 --loops=2
  part 150 python3 $tree/bench/bench_pretraining_gpu.py --models=large --phases=2 \
    --squad=false --dtypes=bfloat16 --xla=true --attention_implementations=xla \
    --steps_per_loop=10 --loops=2; done; fi
# 1. The fused path's gradients inside BERT-Large (the key biases now measured against the
#    query bias's), phase-2 and phase-1 shapes.
part 150 python3 bench/check_fused_attention.py --seq=512 --batch=8
part 120 python3 bench/check_fused_attention.py
# 2. The original recipe (attention dropout 0.1) in phase 2: separate softmax/dropout passes
#    (xla) against the recomputing gradient (xla_recompute): time and memory.
part 240 python3 bench/bench_pretraining_gpu.py --models=large --phases=2 --squad=false \
  --dtypes=bfloat16 --xla=true --attention_implementations=xla,xla_recompute \
  --steps_per_loop=10 --loops=2 --output_json="$D/recompute.json"
# 3. The peer, phase 1 and 2, in its own part (the machine's torch).
for shape in "128 128 20" "32 512 80"; do set -- $shape
  part 90 env -u PYTHONPATH -u LD_LIBRARY_PATH python3 bench/_torch_peer.py --device=cuda \
    --compile --mode=train --config=large --batch_size=$1 --seq_length=$2 --num_predictions=$3 \
    --dtype=bfloat16 --min_repeats=20 --max_repeats=20; done
# 4. cuBLASLt's epilogues: with --xla_gpu_enable_cublaslt XLA's GEMM rewriter can give the
#    intermediate layer's GEMM its bias and (tanh) GELU as a GELU_AUX_BIAS epilogue, writing the
#    activation and its input from the GEMM instead of a separate pass over two bf16[B*S,4H]
#    (TensorFlow's H200 module ran that GEMM as __cublas$gemm and the bias and GELU as a kernel
#    of their own). The deviceless compile cannot tell (no autotuning: every GEMM is Triton).
part 200 python3 bench/bench_pretraining_gpu.py --models=large --phases=1 --squad=false \
  --dtypes=bfloat16 --xla=true --attention_implementations=auto --attention_probs_dropout_prob=0 \
  --steps_per_loop=10 --loops=2 --profile --xla_flags=--xla_gpu_enable_cublaslt=true
grep -h "large phase\|PASS\|FAIL\|^RESULT" "$L" | cut -c1-400
