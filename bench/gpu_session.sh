#!/bin/bash
# The next prepared GPU run of issue 26, after TensorFlow is carried (../shared/gpu/README.md):
#   bash bench/gpu_session.sh        (on the GPU machine; results under $OUT/gpu_session/)
# One call runs at most 600 s; with device time left, call it again on the warm machine: it
# goes on from the part the last call cut (see part()).
# Each part is bounded (a crash or a hang costs only its part) and appends to log.txt as it goes,
# most needed first, so that one session's device time (about 10 minutes after the carry) ends
# with the answers that decide the next change: the input fetched ahead against inline (the
# 1-ms host stalls of the H100 profile of 2026-11-27), whether cuDNN's dropout variant runs
# with CUDA graphs off under either launcher, the fused kernel on the [B,S,N,D] layout
# (timed, then checked), then phase 2 and BERT-Base against the peer, then the A/B against
# the tree before the CPU-side changes of 2026-11-26/27 (carry .gpu/before), then the checks
# that wait for a longer session.
set -u
source /tmp/base/tf_env.sh
# XLA's autotuning results kept on disk: a later row's identical fusions (the same GEMMs in
# every BERT-Large row) skip it. The 2026-11-27 phase-1 row spent 146 s before its first update.
export XLA_FLAGS="${XLA_FLAGS:-} --xla_gpu_per_fusion_autotune_cache_dir=/tmp/xla_autotune"
D=${OUT:-/tmp/out}/gpu_session; mkdir -p "$D"; L=$D/log.txt
# A part that has ended (any exit) is not run again by a later call on the same machine: when
# one call's 600 s run out, the next `bash bench/gpu_session.sh` goes on from the part it cut.
part() { local t=$1; shift; local done=/tmp/gpu_session_done/$(echo "$*" | md5sum | cut -c1-16)
  if [ -e "$done" ]; then echo "=== done before: $*" | tee -a "$L"; return; fi
  echo "=== $(date +%T) [$t s] $*" | tee -a "$L"
  timeout -k 5 "$t" "$@" >> "$L" 2>&1; echo "=== exit $? $(date +%T)" | tee -a "$L"
  mkdir -p /tmp/gpu_session_done && touch "$done"; }
peer() { part 170 env -u PYTHONPATH -u LD_LIBRARY_PATH python3 bench/_torch_peer.py \
  --device=cuda --compile --mode=train --config=$1 --batch_size=$2 --seq_length=$3 \
  --num_predictions=$4 --dtype=bfloat16 --min_repeats=20 --max_repeats=20; }
row() { local t=$1 tree=$2; shift 2; part "$t" python3 $tree/bench/bench_pretraining_gpu.py \
  --squad=false --dtypes=bfloat16 --xla=true --steps_per_loop=10 --loops=2 "$@"; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >> "$L"
# 1b (first: about 20 s each). cuDNN's dropout variant (what the original recipe's attention dropout needs), which crashed
#    both under TensorFlow's XLA launcher and its PjRt device API (2026-11-26/27). Read in TF
#    2.21's XLA (BENCHMARKS.md, "Why the dropout variant crashes"): TF's launcher leaves the run
#    options' local_device_count at 0, so the cuDNN thunk's per-device dropout offsets are an
#    empty vector the first call writes through; PjRt sets the count. CUDA graphs (XLA's command
#    buffers, cuDNN calls among their defaults) can capture the call too. Both launchers with
#    command buffers off: the one that runs is what a user of `cudnn_dropout` needs.
part 45 env XLA_FLAGS="$XLA_FLAGS --xla_gpu_enable_command_buffer=" \
  python3 /tmp/base/fmha_dropout_probe2.py padding
part 45 env XLA_FLAGS="$XLA_FLAGS --xla_gpu_enable_command_buffer=" \
  TF_XLA_FLAGS="--tf_xla_use_device_api=true --tf_xla_enable_device_api_for_gpu=true" \
  python3 /tmp/base/fmha_dropout_probe2.py padding
# 1. The 1-ms host stalls (9.7 ms of a 100 ms phase-1 update on 2026-11-27): each batch fetched
#    and copied one update ahead by the loop (the default with a GPU since then), and copied by
#    tf.data's own thread (prefetch: no copy in the loop's thread, where one from pageable
#    host memory may hold it), against the batch fetched when its update runs (before), one
#    row each with a kernel profile (device events, idle stretches by length), BERT-Large
#    phase 1 with the fused kernel; the default first, so that a cut row leaves it, then the peer.
row 330 . --models=large --phases=1 --attention_implementations=auto \
  --attention_probs_dropout_prob=0 --input_ahead=true,prefetch,false --profile --profile_top=12
peer large 128 128 20
# 1c. The fused kernel on the hidden stream's [B,S,N,D] layout (cudnn_btnh, experimental: no
#    layout copy around the kernel; XLA's deviceless compile: 5 -> 0 transposes per layer):
#    its row (the 11.3 ms of transposes per update gone or not), then its loss and gradients (and those of `cudnn`, what `auto` takes: the check of
#    2026-11-26 stopped at the key biases) against the plain path inside BERT-Large.
row 240 . --models=large --phases=1 --attention_implementations=cudnn_btnh \
  --attention_probs_dropout_prob=0 --profile --profile_top=12
part 300 python3 bench/check_fused_attention.py --fused=cudnn,cudnn_btnh
# 2. Phase 2 with the fused kernel (attention dropout 0) and with the original recipe (`xla`;
#    did not finish in 150 s on 2026-11-27), and BERT-Base phase 1, each against the peer.
row 200 . --models=large --phases=2 --attention_implementations=auto \
  --attention_probs_dropout_prob=0
row 240 . --models=large --phases=2 --attention_implementations=xla
peer large 32 512 80
row 180 . --models=base --phases=1 --attention_implementations=auto
peer base 256 128 20
# 3. The A/B: the tree before the model changes of 2026-11-26 (the 2-D hidden stream, the GELU
#    recomputed in the backward pass) and of 2026-11-27 (the grouped global norm, the updates'
#    shared coefficients, the weights' casts: 2,296 -> 1,333 kernels per phase-1 update on the
#    deviceless compile), carried as .gpu/before (made here with:
#    mkdir -p .gpu/before && git archive c539d8c bert_tf bench | tar -x -C .gpu/before).
if [ -d .gpu/before/bench ]; then
  row 150 .gpu/before --models=large --phases=1 --attention_implementations=auto \
    --attention_probs_dropout_prob=0
  row 150 .gpu/before --models=large --phases=2 --attention_implementations=xla; fi
# 3b. The fused paths' gradients inside BERT-Large at phase 2's shape (part 1c did phase 1's).
part 300 python3 bench/check_fused_attention.py --seq=512 --batch=8 --fused=cudnn,cudnn_btnh
# 4. The original recipe (attention dropout 0.1) in phase 2: separate softmax/dropout passes
#    (xla) against the recomputing gradient (xla_recompute): time and memory.
part 240 python3 bench/bench_pretraining_gpu.py --models=large --phases=2 --squad=false \
  --dtypes=bfloat16 --xla=true --attention_implementations=xla,xla_recompute \
  --steps_per_loop=10 --loops=2 --output_json="$D/recompute.json"
# 5. cuBLASLt's epilogues: with --xla_gpu_enable_cublaslt XLA's GEMM rewriter can give the
#    intermediate layer's GEMM its bias and (tanh) GELU as a GELU_AUX_BIAS epilogue, writing the
#    activation and its input from the GEMM instead of a separate pass over two bf16[B*S,4H]
#    (TensorFlow's H200 module ran that GEMM as __cublas$gemm and the bias and GELU as a kernel
#    of their own). The deviceless compile cannot tell (no autotuning: every GEMM is Triton).
part 200 python3 bench/bench_pretraining_gpu.py --models=large --phases=1 --squad=false \
  --dtypes=bfloat16 --xla=true --attention_implementations=auto --attention_probs_dropout_prob=0 \
  --steps_per_loop=10 --loops=2 --profile --xla_flags=--xla_gpu_enable_cublaslt=true
# 6. A native backtrace of the dropout variant under TF's own launcher, where gdb exists.
if command -v gdb >/dev/null; then part 90 gdb -batch -ex run -ex bt --args python3 \
  /tmp/base/fmha_dropout_probe2.py padding; fi
grep -h "phase\|PASS\|FAIL\|^RESULT\|works\|^=== exit" "$L" | cut -c1-400
