#!/bin/bash
# The next prepared GPU run of issue 26, after TensorFlow is carried (../shared/gpu/README.md):
#   bash bench/gpu_session.sh        (on the GPU machine; results under $OUT/gpu_session/)
# One call runs at most 600 s; with device time left, call it again on the warm machine: it
# goes on from the part the last call cut (see part()).
# Each part is bounded (a crash or a hang costs only its part) and appends to log.txt as it goes,
# most needed first, so that one session's device time (about 10 minutes after the carry; a
# BERT-Large row spent 186 s before its first update on 2026-11-27) ends with the answers that
# decide the next change: a cheap check of the fused kernels' gradients, then the two likeliest
# fixes in one row (the updates looped on the device, for the host stalls; the fused kernel on
# the [B,S,N,D] layout, for the transposes, if it passed the check: the profile tells the two
# apart) and the peer beside it, then the other fix for the stalls (the batches prefetched to
# the GPU by tf.data) and today's default, then phase 2 and BERT-Base against the peer, then
# the checks that wait for a longer session. Every row reports where its warm-up went
# (--compile_timers). XLA's autotuning results go back as
# $OUT/gpu_session/autotune.tgz after every part: keep it as .gpu/autotune.tgz here and carry
# it the next time (restored below), so that rows skip what an earlier session tuned.
set -u
source /tmp/base/tf_env.sh
# XLA's autotuning results kept on disk: a later row's identical fusions (the same GEMMs in
# every BERT-Large row) skip it. The 2026-11-27 phase-1 row spent 146 s before its first update.
export XLA_FLAGS="${XLA_FLAGS:-} --xla_gpu_per_fusion_autotune_cache_dir=/tmp/xla_autotune"
D=${OUT:-/tmp/out}/gpu_session; mkdir -p "$D" /tmp/xla_autotune; L=$D/log.txt
if [ -f .gpu/autotune.tgz ] && [ ! -e /tmp/xla_autotune/.restored ]; then
  tar -xzf .gpu/autotune.tgz -C /tmp/xla_autotune && touch /tmp/xla_autotune/.restored
  echo "autotune cache restored: $(ls /tmp/xla_autotune | wc -l) entries" >> "$L"; fi
save_autotune() { tar -czf "$D/autotune.tgz.part" -C /tmp/xla_autotune . \
  && mv "$D/autotune.tgz.part" "$D/autotune.tgz"; }
# $OUT starts empty in every call: each call's log is also kept on the machine, and the checks
# below (seen) read every call's, so that a resumed session decides as the first call did.
mkdir -p /tmp/gpu_session_logs; KEEP=/tmp/gpu_session_logs/$(date +%s).txt
seen() { cat /tmp/gpu_session_logs/*.txt "$L" 2>/dev/null | grep -q -- "$1"; }
# A part that has ended (any exit) is not run again by a later call on the same machine: when
# one call's 600 s run out, the next `bash bench/gpu_session.sh` goes on from the part it cut.
part() { local t=$1; shift; local done=/tmp/gpu_session_done/$(echo "$*" | md5sum | cut -c1-16)
  if [ -e "$done" ]; then echo "=== done before: $*" | tee -a "$L"; return; fi
  echo "=== $(date +%T) [$t s] $*" | tee -a "$L"
  timeout -k 5 "$t" "$@" >> "$L" 2>&1; echo "=== exit $? $(date +%T)" | tee -a "$L"
  mkdir -p /tmp/gpu_session_done && touch "$done"; cp "$L" "$KEEP"; save_autotune; }
# peer CONFIG BATCH SEQ PREDICTIONS [ATTENTION_DROPOUT]: the peer with the rows' attention
# dropout (0 beside the fused-kernel rows: the same work on both sides; default BERT's 0.1).
peer() { part 170 env -u PYTHONPATH -u LD_LIBRARY_PATH python3 bench/_torch_peer.py \
  --device=cuda --compile --mode=train --config=$1 --batch_size=$2 --seq_length=$3 \
  --num_predictions=$4 --dtype=bfloat16 --min_repeats=20 --max_repeats=20 \
  --attention_probs_dropout_prob=${5:-0.1}; }
# Every row says where its warm-up went (--compile_timers: the Python trace, TensorFlow's XLA
# compile, XLA's HLO passes with autotuning, LLVM, PTX to cubin): 186 s on 2026-11-27 where
# XLA's deviceless compile of the same module takes 23 s on this repository's 2-core machine.
row() { local t=$1 tree=$2; shift 2; part "$t" python3 $tree/bench/bench_pretraining_gpu.py \
  --squad=false --dtypes=bfloat16 --xla=true --steps_per_loop=10 --loops=2 --compile_timers "$@"; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >> "$L"
# 0. (Until 2026-11-27 a probe of XLA's parallel LLVM compile ran here. Not any more: XLA's
#    deviceless compile of the whole BERT-Large update spends 8.4 s in its HLO passes and 8.4 s
#    in LLVM and ptxas (185 modules) on this repository's 2-core machine, so splitting the LLVM
#    module cannot explain, or save much of, a 186-s warm-up; --compile_timers on every row
#    now says where it goes.)
# 0b. The fused paths' loss and gradients against the plain path inside a 4-layer BERT (head
#    size 64, as BERT-Large's), padded batch (cheap; part 1c does BERT-Large). The kernel on
#    the [B,S,N,D] layout (cudnn_btnh) has never run on a GPU: the rows below take it only if
#    it passes here, else `auto` (the [B,N,S,D] kernel, checked on an H100 on 2026-11-26, so
#    not again here: one compile less before the first row).
part 120 python3 bench/check_fused_attention.py --model=small --fused=cudnn_btnh
if [ ! -e /tmp/gpu_session_btnh ]; then
  cat /tmp/gpu_session_logs/*.txt "$L" 2>/dev/null | awk '/^== cudnn_btnh against xla/ {f = 1}
    f && /^(PASS|FAIL)/ {print; exit}' | grep -q "^PASS" && echo cudnn_btnh > /tmp/gpu_session_btnh \
    || echo auto > /tmp/gpu_session_btnh
  echo "=== the kernel rows take: $(cat /tmp/gpu_session_btnh)" | tee -a "$L"; fi
BTNH=$(cat /tmp/gpu_session_btnh)
# 1. BERT-Large phase 1 (fused attention, attention dropout 0) with both candidate fixes first,
#    the likeliest to reach the peer: each host call's updates as one XLA computation, a while
#    loop on the GPU over the call's batches, copied once (Trainer.device_loop: no copy and no
#    launch between two updates; the host stalls were 9.7 ms per update with the batch copied
#    at each launch, 0e98937, and 14.0 with the fetch-ahead that is gone), and the fused kernel
#    on the hidden stream's [B,S,N,D] layout (cudnn_btnh: no transposes around it on the
#    deviceless compile; 11.3 ms of transposes per update on the GPU; where part 0b passed it).
#    The profile parts the effects: idle stretches and transpose time. Then the peer, with
#    attention dropout 0 as these rows (with BERT's 0.1 it ran at 1,461-1,469 seq/s on two
#    H100 machines): the ratio in the same call.
row 260 . --models=large --phases=1 --attention_implementations=$BTNH \
  --attention_probs_dropout_prob=0 --device_loop=true --profile --profile_top=12
# The device loop ran on CPU only so far: if that row failed, the kernel's row alone.
seen "device_loop=true .*seq/s" || \
  row 260 . --models=large --phases=1 --attention_implementations=$BTNH \
    --attention_probs_dropout_prob=0 --profile --profile_top=12
peer large 128 128 20 0
# 1b. The same row with cuBLASLt GEMMs and no Triton GEMMs (XLA flags): every GEMM of the
#    update was cuBLAS's on the H100 anyway, so Triton's GEMM autotuning may be warm-up for
#    nothing (the compile timers say), and with cuBLASLt the intermediate layer's GEMM writes
#    its bias and GELU from its epilogue (BIAS_GELU_AUX: the model keeps x W + b for the
#    backward pass when XLA_FLAGS asks for cuBLASLt, placement.cublaslt_enabled), which on
#    XLA's deviceless compile removes the GELU's own kernel (268 MB per layer, ~2.3 ms per
#    update; 8 of a 2-layer update's GEMMs take their bias in the epilogue too). If it beats
#    part 1's row, the scripts set both flags on a GPU.
DL=""; seen "device_loop=true .*seq/s" && DL="--device_loop=true"
row 260 . --models=large --phases=1 --attention_implementations=$BTNH \
  --attention_probs_dropout_prob=0 $DL --profile --profile_top=12 \
  --xla_flags="--xla_gpu_enable_cublaslt=true --xla_gpu_enable_triton_gemm=false"
# 1a. The other fix for the idle time, the batches prefetched to the GPU by tf.data's own
#    thread (Trainer.prefetch_to_device), with the same kernel; then today's default (the batch
#    copied from the host at each update's launch: 1,312.6 seq/s at 0e98937).
row 260 . --models=large --phases=1 --attention_implementations=$BTNH \
  --attention_probs_dropout_prob=0 --prefetch_to_device=true --profile --profile_top=12
#    That row keeps its compiled programs in TensorFlow's persistent XLA cache
#    (--xla_cache_dir, new in bert_tf: a resumed run loads its step instead of compiling it),
#    never used on a GPU before: its compile timers say what saving cost ("Serializing and
#    saving cache entry"), and the same row again says what a restart's warm-up is with the
#    step loaded ("Try loading serialized cache entry"; on CPU a BERT-Base warm-up lost only its
#    XLA compile, 2.2 of 15 s: the Python trace and TensorFlow's lowering stay).
row 260 . --models=large --phases=1 --attention_implementations=auto \
  --attention_probs_dropout_prob=0 --profile --profile_top=12 --xla_cache_dir=/tmp/xla_cache
seen "xla_cache_dir=/tmp/xla_cache.*seq/s" && row 200 . --models=large --phases=1 \
  --attention_implementations=auto --attention_probs_dropout_prob=0 \
  --xla_cache_dir=/tmp/xla_cache
# 1c. The idle fix alone (with `auto`'s kernel; the same row as part 1's where part 0b did not
#    pass cudnn_btnh, then not run again), and the fused paths' check inside BERT-Large.
row 260 . --models=large --phases=1 --attention_implementations=auto \
  --attention_probs_dropout_prob=0 --device_loop=true --profile --profile_top=12
part 300 python3 bench/check_fused_attention.py --fused=cudnn,cudnn_btnh
# 2. Phase 2 with the fused kernel (attention dropout 0) and with the original recipe (`xla`;
#    did not finish in 150 s on 2026-11-27), and BERT-Base phase 1, each against the peer.
row 200 . --models=large --phases=2 --attention_implementations=auto \
  --attention_probs_dropout_prob=0
peer large 32 512 80 0
row 240 . --models=large --phases=2 --attention_implementations=xla
peer large 32 512 80
row 180 . --models=base --phases=1 --attention_implementations=auto
peer base 256 128 20
# 3. The fused paths' gradients inside BERT-Large at phase 2's shape (part 1c did phase 1's).
part 300 python3 bench/check_fused_attention.py --seq=512 --batch=8 --fused=cudnn,cudnn_btnh
# 4. The original recipe (attention dropout 0.1) in phase 2: the plain attention (xla) against
#    the attention recomputed in the backward pass (xla_recompute: half the temporary memory on
#    the deviceless compile, 12% more bytes moved): time and memory, against the peer's.
part 240 python3 bench/bench_pretraining_gpu.py --models=large --phases=2 --squad=false \
  --dtypes=bfloat16 --xla=true --attention_implementations=xla,xla_recompute \
  --steps_per_loop=10 --loops=2 --output_json="$D/recompute.json"
# 5. A native backtrace of the dropout variant under TF's own launcher, where gdb exists (it
#    segfaults with command buffers off too, under both launchers: 2026-11-27).
if command -v gdb >/dev/null; then part 90 gdb -batch -ex run -ex bt --args python3 \
  /tmp/base/fmha_dropout_probe2.py padding; fi
grep -h "phase\|warm-up\|PASS\|FAIL\|^RESULT\|works\|^=== exit" "$L" | cut -c1-400
