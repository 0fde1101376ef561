"""layers.shared_unit_operand: under XLA with a GPU, every 16-bit weight the layers cast is
multiplied by a vector of ones (behind an optimization barrier) shared by the weights of its
width, so that XLA's GPU compiler can fuse the sibling casts. Times 1.0: a BERT update must
give the same loss and gradients as without it, and the lowered computation must hold one
such vector per width and dtype."""

import re

import keras
import numpy as np
import pytest

from bert_tf.modeling import BertConfig, BertModel, layers, placement
from tests.modeling.padded_update import padded_update
from tests.reference import google_models


@pytest.fixture(autouse=True)
def fake_gpu(monkeypatch):
  # It applies where a GPU is visible; nothing here needs one to run.
  monkeypatch.setattr(placement, "_GPU_CAPABILITIES", ((9, 0),))


def _update(dtype, shared=True, monkeypatch=None):
  if not shared:
    monkeypatch.setattr(layers, "shared_unit_operand", lambda weight: weight)
  config = BertConfig.from_dict(google_models.tiny_config_dict())
  keras.utils.set_random_seed(0)
  model = BertModel(config, dtype=dtype)
  layers.set_dropout_rng(model, "hash")
  values, step, inputs = padded_update(model, jit=True)
  return values, step.experimental_get_compiler_ir(*inputs)(stage="hlo")


def _unit_barriers(hlo):
  return sorted(re.findall(r"= ((?:f32|bf16)\[\d+\])\S* opt-barrier\(.*"
                          r"op_name=\"[^\"]*shared_unit/", hlo))


@pytest.mark.parametrize("dtype", ["float32", "mixed_bfloat16"])
def test_bert_update_is_unchanged_and_each_width_shares_one_unit(dtype, monkeypatch):
  got, hlo = _update(dtype)
  want, plain_hlo = _update(dtype, shared=False, monkeypatch=monkeypatch)
  assert len(got) == len(want) > 30
  for g, w in zip(got, want):
    np.testing.assert_array_equal(g, w)  # times 1.0, forward and backward
  # Hidden 32 (the q/k/v and output kernels, their biases, the pooler) and intermediate 37;
  # float32 weights have no cast to fuse and are left alone.
  want_units = [] if dtype == "float32" else ["bf16[32]", "bf16[37]"]
  assert _unit_barriers(hlo) == want_units, _unit_barriers(hlo)
  assert not _unit_barriers(plain_hlo)


def test_without_a_gpu_the_weights_are_untouched(monkeypatch):
  monkeypatch.setattr(placement, "_GPU_CAPABILITIES", ())
  _, hlo = _update("mixed_bfloat16")
  assert not _unit_barriers(hlo)
