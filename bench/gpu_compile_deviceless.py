"""Compile an HLO module for an NVIDIA GPU on a machine without one (XLA's deviceless compile).

TensorFlow's XLA cannot compile for a GPU it does not see; JAX's CUDA plugin can: given a
GPU's description (``GpuTargetConfig``: compute capability, SM count, memory, cuDNN and CUDA
versions) its compile-only client runs XLA's whole GPU pipeline (fusion, layout assignment,
cuBLAS/cuDNN rewrites, scheduling, buffer assignment) and dumps the optimized HLO, without
autotuning (no device to time on: GEMM algorithms and Triton tilings are XLA's defaults).

  bench/hlo_census.py --gpu=h100          # the training step, lowered by TensorFlow, then this

runs this script under a Python that has ``jax[cuda12]`` (``make gpu-compiler`` makes
``.venv-gpu-compiler``; about 2.5 GB, outside the project's own environment):

  .venv-gpu-compiler/bin/python bench/gpu_compile_deviceless.py MODULE.txt --target=h100

``MODULE.txt`` is HLO text (``experimental_get_compiler_ir(...)(stage="hlo")`` or an XLA
dump's ``*before_optimizations.txt``). ``XLA_FLAGS=--xla_dump_to=DIR --xla_dump_hlo_as_text``
keeps XLA's dump (``*sm_9.0a_gpu_after_optimizations.txt``, its buffer assignment). Prints one
line ``GPU_COMPILE {json}``: the module's temporary bytes (XLA's buffer assignment: what the
update needs beyond its arguments), argument/output/alias bytes, and XLA's cost analysis of
the optimized module (flops, bytes accessed: read and written by every kernel, GEMMs
included; the CPU's generic cost model applied to the GPU's module).

The XLA here is JAX's, not TensorFlow 2.21's own. ``make gpu-compiler`` installs jaxlib 0.9.1,
the release nearest TensorFlow 2.21's XLA: its compile of the update lays the hidden stream
out as TensorFlow's did on the H100 (the same transpose fusions per layer as the profile of
2026-11-28), where jaxlib 0.10.2's no longer does (BENCHMARKS.md, "The masked LM's gather
as a one-hot product"); either works here (jaxlib < 0.10 has no ``driver_version`` in its
target description: the target is read without it).
"""

import argparse
import json
import os
import re
import sys

# sm_90 as XLA's GPU compiler reads it (GpuTargetConfigProto, text format). The H200 is the
# same chip with more and faster memory. The driver version matters to the thunk sequence:
# without one XLA reads 0.0.0 (< 12.3) and leaves cuDNN, cuBLAS(Lt) and custom calls out of
# its command buffers (CUDA graphs), which on a GPU (driver 580 on the lent H100s) it puts in.
_H100 = """
gpu_device_info {
  threads_per_block_limit: 1024
  threads_per_warp: 32
  shared_memory_per_block: 49152
  shared_memory_per_core: 233472
  threads_per_core_limit: 2048
  core_count: 132
  fpus_per_core: 128
  block_dim_limit_x: 2147483647
  block_dim_limit_y: 65535
  block_dim_limit_z: 65535
  memory_bandwidth: %(bandwidth)d
  l2_cache_size: 52428800
  clock_rate_ghz: 1.98
  device_memory_size: %(memory)d
  shared_memory_per_block_optin: 232448
  cuda_compute_capability { major: 9 }
  registers_per_core_limit: 65536
  registers_per_block_limit: 65536
  driver_version: "12.9.0"
}
platform_name: "CUDA"
dnn_version_info { major: 9 minor: 10 }
runtime_version { major: 12 minor: 9 }
device_description_str: "%(name)s"
"""
TARGETS = {
    "h100": _H100 % dict(bandwidth=3352320000000, memory=84929347584,
                         name="NVIDIA H100 80GB HBM3"),
    "h200": _H100 % dict(bandwidth=4800000000000, memory=150754820096, name="NVIDIA H200"),
}


def stablehlo_ready(text):
  """HLO text that converts to StableHLO: HLO's ``copy`` (a layout copy; an identity on
  values) has no StableHLO op, so it becomes a same-type ``bitcast-convert`` (also an
  identity; XLA's simplifier removes both)."""
  # The opcode follows the result's shape (`= f32[4]{0} copy(%p)`): names and strings stay.
  return re.sub(r"([\]}]) copy\(", r"\1 bitcast-convert(", text)


def compile_module(text, target="h100"):
  """Compiles HLO ``text`` for ``target`` without a GPU; returns the stats described above."""
  os.environ.setdefault("CUDA_VISIBLE_DEVICES", "-1")
  os.environ.setdefault("JAX_PLATFORMS", "cpu")  # no CUDA client: compile-only
  os.environ.setdefault("JAX_SKIP_CUDA_CONSTRAINTS_CHECK", "1")  # no driver to check
  # pylint: disable=import-outside-toplevel,import-error
  import jax
  from jax._src.interpreters import mlir as jax_mlir
  from jax._src.lib import _jax, xla_client
  try:
    import jaxlib._hlo as hlo
  except ImportError:  # jaxlib < 0.10 (closer to TensorFlow 2.21's XLA): the parser is _jax's
    hlo = _jax
  from jax._src.lib.mlir import ir
  from jax.experimental import topologies

  config = TARGETS[target]
  try:
    topology = topologies.get_topology_desc(platform="cuda", target_config=config,
                                            topology="1x1x1")
  except Exception:  # pylint: disable=broad-except
    # jaxlib < 0.10's GpuDeviceInfoProto has no driver_version (nor, then, its effect on
    # which thunks go into command buffers): the same target without it.
    config = re.sub(r"\n *driver_version: .*", "", config)
    topology = topologies.get_topology_desc(platform="cuda", target_config=config,
                                            topology="1x1x1")
  client = topology.devices[0].client
  module = hlo.hlo_module_from_text(stablehlo_ready(text))
  bytecode = _jax.mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
  options = xla_client.CompileOptions()
  with jax_mlir.make_ir_context():
    executable = client.compile(ir.Module.parse(bytecode),
                                executable_devices=_jax.DeviceList(tuple(client.devices())),
                                compile_options=options)
  memory = executable.get_compiled_memory_stats()
  stats = {"target": target, "temp_bytes": memory.temp_size_in_bytes,
           "argument_bytes": memory.argument_size_in_bytes,
           "output_bytes": memory.output_size_in_bytes,
           "alias_bytes": memory.alias_size_in_bytes, "jaxlib": jax.__version__,
           "driver_version": "driver_version" in config}
  cost = _jax.hlo_module_cost_analysis(jax.devices("cpu")[0].client,
                                       executable.hlo_modules()[0])
  stats.update(flops=cost.get("flops"), bytes_accessed=cost.get("bytes accessed"))
  return stats


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("module", help="HLO text of the module to compile.")
  parser.add_argument("--target", default="h100", choices=sorted(TARGETS))
  args = parser.parse_args(argv)
  try:
    with open(args.module, encoding="utf-8") as f:
      text = f.read()
  except OSError as e:
    sys.exit(f"error: {args.module}: {e.strerror}")
  print("GPU_COMPILE " + json.dumps(compile_module(text, args.target), sort_keys=True),
        flush=True)


if __name__ == "__main__":
  main()
