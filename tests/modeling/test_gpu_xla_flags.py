"""placement.set_gpu_xla_flags: the XLA flags a training run sets on a Hopper GPU (cuBLASLt
GEMMs, no Triton GEMMs; measured on an H100, BENCHMARKS.md), only where XLA_FLAGS does not
name them, and only on a GPU of compute capability 9.x; the Trainer sets them before its
first compile."""

import os

import keras
import pytest
import tensorflow as tf

from bert_tf import optimization
from bert_tf.modeling import BertConfig, placement
from bert_tf.training import loop
from bert_tf.training.pretraining import PretrainingTask
from tests.reference import google_models

BOTH = ["--xla_gpu_enable_cublaslt=true", "--xla_gpu_enable_triton_gemm=false"]


@pytest.fixture
def hopper(monkeypatch):
  monkeypatch.setattr(placement, "_GPU_CAPABILITIES", ((9, 0),))


def test_a_hopper_gpu_gets_both_flags_after_the_users(hopper):
  environ = {}
  assert placement.set_gpu_xla_flags(environ) == BOTH
  assert environ["XLA_FLAGS"] == " ".join(BOTH)
  assert placement.cublaslt_enabled(environ)
  environ = {"XLA_FLAGS": "--xla_dump_to=/tmp/d"}
  placement.set_gpu_xla_flags(environ)
  assert environ["XLA_FLAGS"] == "--xla_dump_to=/tmp/d " + " ".join(BOTH)
  # Once set, a second call adds nothing.
  assert placement.set_gpu_xla_flags(environ) == []


@pytest.mark.parametrize("given", ["--xla_gpu_enable_cublaslt=false",
                                   "--xla_gpu_enable_cublaslt", "--xla_gpu_enable_cublaslt "])
def test_a_flag_the_user_names_is_left_alone(hopper, given):
  environ = {"XLA_FLAGS": given}
  assert placement.set_gpu_xla_flags(environ) == ["--xla_gpu_enable_triton_gemm=false"]
  assert environ["XLA_FLAGS"].startswith(given)
  assert environ["XLA_FLAGS"].count("cublaslt") == 1


def test_a_flag_that_only_starts_like_one_is_not_it(hopper):
  environ = {"XLA_FLAGS": "--xla_gpu_enable_cublaslt_x=1"}
  assert placement.set_gpu_xla_flags(environ) == BOTH


@pytest.mark.parametrize("capabilities", [(), ((8, 0),), ((10, 0),)])
def test_elsewhere_nothing_is_set(monkeypatch, capabilities):
  monkeypatch.setattr(placement, "_GPU_CAPABILITIES", capabilities)
  environ = {}
  assert placement.set_gpu_xla_flags(environ) == [] and environ == {}


@pytest.mark.parametrize("jit_compile", [True, False])
def test_the_trainer_sets_them_under_xla(hopper, monkeypatch, tmp_path, jit_compile):
  monkeypatch.delenv("XLA_FLAGS", raising=False)
  keras.utils.set_random_seed(0)
  task = PretrainingTask(BertConfig.from_dict(google_models.tiny_config_dict()))
  model = task.build_model()
  optimizer = optimization.create_optimizer(1e-3, num_train_steps=2, num_warmup_steps=1)
  loop.Trainer(tf.distribute.get_strategy(), task, model, optimizer,
               loop.LoopConfig(model_dir=str(tmp_path), num_train_steps=2,
                               jit_compile=jit_compile))
  assert os.environ.get("XLA_FLAGS") == (" ".join(BOTH) if jit_compile else None)
