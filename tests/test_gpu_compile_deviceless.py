"""bench/hlo_census.py --gpu's two halves that run without JAX: TensorFlow lowering the update
as a GPU would see it (the HLO handed to bench/gpu_compile_deviceless.py), and the HLO text
rewrite that lets XLA's StableHLO converter take TensorFlow's module. The compile itself
needs jax[cuda12] (make gpu-compiler) and is recorded in BENCHMARKS.md, not run here."""

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import gpu_compile_deviceless  # noqa: E402  pylint: disable=wrong-import-position
import hlo_census  # noqa: E402  pylint: disable=wrong-import-position


def test_copies_become_identity_bitcast_converts_and_nothing_else_changes():
  text = """ENTRY %main (p: f32[4]) -> (f32[4], f32[4]) {
  %p = f32[4]{0} parameter(0)
  %copy.5 = f32[4]{0} copy(%p), metadata={op_name="copy(x)"}
  %fused_copy = f32[4]{0} fused_copy(%p)
  %cs = (f32[4]{0}, f32[4]{0}, u32[]) copy-start(%p)
  %bc = f32[4]{0} bitcast-convert(%p)
  ROOT %t = (f32[4]{0}, f32[4]{0}) tuple(%copy.5, %bc)
}"""
  out = gpu_compile_deviceless.stablehlo_ready(text)
  assert "%copy.5 = f32[4]{0} bitcast-convert(%p)" in out
  # Names, other ops that end in "copy", copy-start and the metadata string are untouched.
  assert out.replace("%copy.5 = f32[4]{0} bitcast-convert(%p)",
                     "%copy.5 = f32[4]{0} copy(%p)") == text


def test_targets_name_sm90_parts():
  for name, config in gpu_compile_deviceless.TARGETS.items():
    assert "cuda_compute_capability { major: 9 }" in config, name
    assert re.search(r"core_count: 132\b", config)
    # A driver version inside gpu_device_info, at least XLA's 12.3 for cuDNN, cuBLAS(Lt) and
    # custom calls in command buffers (command_buffer_conversion_pass.cc): without one XLA
    # reads 0.0.0 and the dumped thunk sequence is not what a GPU runs.
    device_info = config[config.index("gpu_device_info {"):config.index("}\nplatform_name")]
    version = re.search(r'driver_version: "(\d+)\.(\d+)\.(\d+)"', device_info)
    assert version and tuple(map(int, version.groups())) >= (12, 3, 0), name
  assert "H100" in gpu_compile_deviceless.TARGETS["h100"]


def test_the_gpu_compile_takes_the_users_xla_flags_and_keeps_its_dump(monkeypatch):
  monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/elsewhere")  # the caller's: replaced
  env = hlo_census.gpu_compile_env("/d", " --xla_gpu_enable_command_buffer= ")
  assert env["XLA_FLAGS"] == ("--xla_gpu_enable_command_buffer= --xla_dump_to=/d "
                              "--xla_dump_hlo_as_text")
  assert hlo_census.gpu_compile_env("/d")["XLA_FLAGS"] == "--xla_dump_to=/d --xla_dump_hlo_as_text"


def _lower(tmp_path, *args):
  path = tmp_path / "update.hlo.txt"
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
             PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
  proc = subprocess.run(
      [sys.executable, hlo_census.__file__, "--child", "--layers=1", "--hidden=64",
       "--heads=2", "--batch=2", "--seq=16", "--predictions=3", "--vocab=1200",
       f"--lower_to={path}", *args], capture_output=True, text=True, env=env, timeout=600,
      check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return path.read_text()


@pytest.mark.parametrize("dropout, fused", [("0", True), ("0.1", False)])
def test_the_update_is_lowered_as_a_gpu_sees_it(tmp_path, dropout, fused):
  # `auto` takes cuDNN's fused attention where it applies on a GPU (no attention dropout),
  # the plain path elsewhere; nothing runs, so no GPU is needed.
  text = _lower(tmp_path, "--attention_implementation=auto",
                f"--attention_probs_dropout_prob={dropout}")
  assert text.startswith("HloModule ")
  calls = re.findall(r'custom_call_target="(__cudnn\$fmha[^"]*)"', text)
  if fused:
    assert calls == ["__cudnn$fmhaSoftmax", "__cudnn$fmhaSoftmaxBackward"], calls
  else:
    assert not calls
  # The whole update in one module: the optimizer's writes are in it (AdamWeightDecay).
  assert "AdamWeightDecay" in text
  # The GELU's gradient recomputes it, as on a GPU (activations.recomputed_under_xla).
  assert "opt-barrier" in text
