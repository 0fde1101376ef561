"""bench/check_fused_attention.py on CPU: it skips with a message (the kernel needs a GPU), its
padded batch is what the fused kernel's PADDING mask assumes, and its comparison passes the
plain path against itself and fails a perturbed gradient."""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "bench"))

import _harness  # noqa: E402  pylint: disable=wrong-import-position
import check_fused_attention  # noqa: E402  pylint: disable=wrong-import-position


def test_skips_without_a_gpu(capsys):
  assert check_fused_attention.main([]) == 0
  assert capsys.readouterr().out.startswith("skipped: no GPU of compute capability 8.0")


def test_padded_batch_has_prefix_masks_and_positions_inside():
  batch = check_fused_attention.padded_batch(_harness.config_dict("tiny"), 6, 16, 3)
  mask = batch["input_mask"]
  lengths = mask.sum(1)
  assert lengths[0] == 16 and lengths.min() >= 8 and len(set(lengths)) > 1
  np.testing.assert_array_equal(mask, np.arange(16)[None, :] < lengths[:, None])
  assert (batch["input_ids"][mask == 0] == 0).all()
  assert (batch["masked_lm_positions"] < lengths[:, None] - 1).all()


def test_compare_passes_equal_runs_and_fails_a_perturbed_gradient(capsys):
  from bert_tf.modeling import BertConfig
  config_dict = dict(_harness.config_dict("tiny"), attention_probs_dropout_prob=0.0)
  batch = check_fused_attention.padded_batch(config_dict, 2, 16, 3)
  plain = check_fused_attention.loss_and_gradients(BertConfig.from_dict(config_dict), batch,
                                                   "xla")
  assert check_fused_attention.compare(plain, plain, 1e-2, 5e-2)
  loss, grads = plain
  path = sorted(grads)[0]
  perturbed = dict(grads, **{path: grads[path] * 1.2})
  assert not check_fused_attention.compare(plain, (loss, perturbed), 1e-2, 5e-2)
  assert f"2.00e-01  {path}" in capsys.readouterr().out


def test_key_bias_gradient_is_noise_and_is_measured_against_the_query_bias(capsys):
  """The key bias gets no gradient in exact arithmetic (softmax ignores a per-row constant):
  the plain path's is tiny next to the query bias's (16-bit rounding), so ``compare`` measures
  a key-bias difference against the query-bias gradient, and still fails a large one."""
  from bert_tf.modeling import BertConfig
  config_dict = dict(_harness.config_dict("tiny"), attention_probs_dropout_prob=0.0)
  batch = check_fused_attention.padded_batch(config_dict, 2, 16, 3)
  loss, grads = check_fused_attention.loss_and_gradients(BertConfig.from_dict(config_dict),
                                                         batch, "xla")
  keys = [p for p in grads if p.endswith("attention/self/key/bias")]
  assert keys
  for path in keys:
    query = np.linalg.norm(grads[path.replace("key/bias", "query/bias")])
    assert np.linalg.norm(grads[path]) < 2e-2 * query, path  # 2.4e-3 here (mixed bf16)
  # Noise of the key bias's own size, doubled, is far from the query bias's scale: passes.
  noisy = dict(grads, **{path: grads[path] * 3.0 for path in keys})
  assert check_fused_attention.compare((loss, grads), (loss, noisy), 1e-2, 5e-2)
  # A key-bias gradient as large as the query bias's: fails.
  path = keys[0]
  large = dict(grads, **{path: grads[path.replace("key/bias", "query/bias")]})
  assert not check_fused_attention.compare((loss, grads), (loss, large), 1e-2, 5e-2)
  assert "key biases (zero in exact arithmetic)" in capsys.readouterr().out


def test_a_bad_fused_path_is_a_one_line_usage_error(capsys):
  import pytest  # pylint: disable=import-outside-toplevel
  with pytest.raises(SystemExit) as exit_info:
    check_fused_attention.main(["--fused=cudnn,flash"])
  assert exit_info.value.code == 2
  assert "--fused takes cudnn and/or cudnn_btnh, got 'cudnn,flash'" in capsys.readouterr().err
