"""On a GPU: does cuDNN's fused attention give the plain path's loss and gradients inside the
real model?

One BERT pretraining update's loss and gradients (``BertPretrainer``, the original's MLM + NSP
loss, ``mixed_bfloat16``, XLA-compiled, the training loop's hash dropout) computed twice from
the same weights and the same batch: with ``attention_implementation="xla"`` (the plain path)
and ``"cudnn"`` (the fused kernel). The batch has padding (sequence lengths drawn between S/2
and S) so the kernel's PADDING mask is exercised. ``attention_probs_dropout_prob`` is 0 (what
the fused kernel needs); hidden dropout stays 0.1, with the same masks in both runs.

Passes when the losses agree within ``--loss_tol`` (relative) and every gradient within
``--grad_tol`` (relative L2 error ``|g_fused - g_plain| / |g_plain|``, 16-bit rounding); prints
the worst variables. Without a GPU of compute capability 8.0 or newer: prints why and exits 0.

  python3 bench/check_fused_attention.py                      # BERT-Large, seq 128, batch 32
  python3 bench/check_fused_attention.py --seq=512 --batch=8  # phase 2 shapes
"""

import argparse
import os
import sys

import numpy as np

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, _ROOT)
sys.path.insert(0, os.path.join(_ROOT, "bench"))


def padded_batch(config_dict, batch_size, seq_length, num_predictions, seed=0):
  """``_harness.pretraining_batch`` with per-sequence lengths in [S/2, S]: the mask a prefix
  of ones, ids 0 past the length, masked positions inside it."""
  import _harness  # pylint: disable=import-outside-toplevel
  batch = _harness.pretraining_batch(config_dict, batch_size, seq_length, num_predictions, seed)
  rng = np.random.RandomState(seed + 1)
  lengths = rng.randint(seq_length // 2, seq_length + 1, size=batch_size)
  lengths[0] = seq_length  # one full sequence
  mask = (np.arange(seq_length)[None, :] < lengths[:, None]).astype(np.int32)
  batch["input_mask"] = mask
  batch["input_ids"] = batch["input_ids"] * mask
  batch["segment_ids"] = batch["segment_ids"] * mask
  batch["masked_lm_positions"] = np.stack([
      np.sort(rng.choice(np.arange(1, n - 1), num_predictions, replace=False))
      for n in lengths]).astype(np.int32)
  return batch


def loss_and_gradients(config, batch, implementation):
  """The pretraining loss and its gradients (numpy, by variable path) of a fresh model with
  seed 0's weights under ``implementation``."""
  import dataclasses  # pylint: disable=import-outside-toplevel

  import keras  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel

  from bert_tf.modeling import layers  # pylint: disable=import-outside-toplevel
  from bert_tf.modeling.models import pretraining_loss  # pylint: disable=import-outside-toplevel
  from bert_tf.training import DTYPE_POLICIES  # pylint: disable=import-outside-toplevel
  from bert_tf.training.pretraining import PretrainingTask  # noqa: E501 pylint: disable=import-outside-toplevel

  keras.utils.set_random_seed(0)
  task = PretrainingTask(dataclasses.replace(config, attention_implementation=implementation))
  model = task.build_model(dtype=DTYPE_POLICIES["bfloat16"])
  layers.set_dropout_rng(model, "hash")
  features = {k: tf.constant(v) for k, v in batch.items()}

  @tf.function(jit_compile=True)
  def step(features):
    with tf.GradientTape() as tape:
      loss = pretraining_loss(model(features, training=True), features)["loss"]
    return loss, tape.gradient(loss, model.trainable_variables)

  loss, grads = step(features)
  return float(loss.numpy()), {v.path: tf.convert_to_tensor(g).numpy().astype(np.float64)
                               for v, g in zip(model.trainable_variables, grads)
                               if g is not None}


# Gradients that are zero in exact arithmetic: adding a vector b to every key adds q.b to every
# score of a query's row, which softmax ignores, so the loss does not depend on the key bias.
# Both paths give rounding noise there (a relative error against noise means nothing: on an H100
# it read 12-17), so these are measured against the same layer's query-bias gradient, a sum
# over the same positions of the same kind of rows (dK = dS^T Q, dQ = dS K).
ZERO_IN_EXACT_ARITHMETIC = "attention/self/key/bias"


def _scale_path(path):
  return path.replace(ZERO_IN_EXACT_ARITHMETIC, "attention/self/query/bias")


def compare(plain, fused, loss_tol, grad_tol, show=8):
  """Prints the comparison; returns whether it passes."""
  (plain_loss, plain_grads), (fused_loss, fused_grads) = plain, fused
  loss_error = abs(fused_loss - plain_loss) / max(abs(plain_loss), 1e-12)
  print(f"loss: plain {plain_loss:.6f}  fused {fused_loss:.6f}  relative error {loss_error:.2e}")
  if set(plain_grads) != set(fused_grads):
    print("FAIL: the two runs have gradients for different variables")
    return False
  errors, noise = {}, {}
  for path, g in plain_grads.items():
    difference = np.linalg.norm(fused_grads[path] - g)
    if path.endswith(ZERO_IN_EXACT_ARITHMETIC):
      scale = np.linalg.norm(plain_grads[_scale_path(path)])
      noise[path] = difference / scale if scale else float(difference)
      continue
    norm = np.linalg.norm(g)
    errors[path] = difference / norm if norm else float(np.abs(fused_grads[path]).max())
  worst = sorted(errors.items(), key=lambda item: -item[1])
  print(f"gradients: {len(errors)} variables; largest relative L2 errors:")
  for path, error in worst[:show]:
    print(f"  {error:.2e}  {path}")
  worst_noise = sorted(noise.items(), key=lambda item: -item[1])
  if worst_noise:
    print(f"{len(noise)} key biases (zero in exact arithmetic): largest |fused - plain| / "
          f"|query bias gradient|:")
    for path, error in worst_noise[:3]:
      print(f"  {error:.2e}  {path}")
  ok = (loss_error <= loss_tol and worst[0][1] <= grad_tol
        and all(error <= grad_tol for error in noise.values()))
  print("PASS" if ok else f"FAIL (tolerances: loss {loss_tol}, gradients {grad_tol})")
  return ok


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--model", default="large", help="A config of bench/_harness.py.")
  parser.add_argument("--batch", type=int, default=32)
  parser.add_argument("--seq", type=int, default=128)
  parser.add_argument("--predictions", type=int, default=20)
  parser.add_argument("--loss_tol", type=float, default=1e-2)
  parser.add_argument("--grad_tol", type=float, default=5e-2)
  parser.add_argument("--fused", default="cudnn",
                      help="Comma-separated fused paths, each checked against the one plain "
                      "run: cudnn (the kernel on [B,N,S,D]), cudnn_btnh (the kernel on the "
                      "hidden stream's [B,S,N,D] layout, what auto takes).")
  args = parser.parse_args(argv)
  fused_paths = args.fused.split(",")
  if not set(fused_paths) <= {"cudnn", "cudnn_btnh"}:
    parser.error(f"--fused takes cudnn and/or cudnn_btnh, got {args.fused!r}")
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  import _harness  # pylint: disable=import-outside-toplevel
  from bert_tf.modeling import BertConfig  # pylint: disable=import-outside-toplevel
  from bert_tf.modeling import fused_attention  # pylint: disable=import-outside-toplevel
  if not fused_attention.gpu_supports_fused_attention():
    print("skipped: no GPU of compute capability 8.0 or newer (cuDNN's fused attention "
          "runs only there)")
    return 0
  config_dict = dict(_harness.config_dict(args.model), attention_probs_dropout_prob=0.0)
  config = BertConfig.from_dict(config_dict)
  batch = padded_batch(config_dict, args.batch, args.seq, args.predictions)
  print(f"{args.model}: batch {args.batch}, seq {args.seq}, lengths "
        f"{int(batch['input_mask'].sum(1).min())}..{args.seq}, bfloat16, XLA")
  plain = loss_and_gradients(config, batch, "xla")
  ok = True
  for implementation in fused_paths:
    print(f"== {implementation} against xla")
    ok &= compare(plain, loss_and_gradients(config, batch, implementation), args.loss_tol,
                  args.grad_tol)
  return 0 if ok else 1


if __name__ == "__main__":
  sys.exit(main())
