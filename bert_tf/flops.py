"""Model FLOPs and MFU, one definition for the training progress line and the benchmarks.

FLOPs count multiply-adds as 2, matmuls only (what the accelerator's peak counts). For one
sequence of S tokens with L layers, hidden H, intermediate I, vocab V and P masked positions:

  encoder   2 * S * L * (4H^2 + 2HI)        Q, K, V, output projections and the FFN
  attention 2 * S^2 * L * 2H                QK^T and probs x V
  pooler    2 * H^2
  MLM head  2 * P * (H^2 + H*V)             transform and output layer, masked positions only
  NSP head  2 * 2H
Training is 3x the forward pass (backward = 2x forward). MFU = achieved model FLOP/s divided
by the devices' dense peak (bf16 on accelerators).
"""

# Dense bf16 peaks in FLOP/s per device as TensorFlow lists them, by substrings of the name.
_PEAK_FLOPS = (
    # The H100 PCIe and NVL cards run lower clocks than the SXM module: match them first.
    ("H100 PCIe", 756e12), ("H100 NVL", 835e12),
    ("H200", 989e12), ("H100", 989e12), ("A100", 312e12), ("L4", 121e12), ("A10G", 70e12),
    ("V100", 125e12), ("T4", 65e12),
    # Cloud TPU: per TensorFlow device (a core for v2/v3, a chip for v4/v5e).
    ("TPU v5 lite", 197e12), ("TPU v5e", 197e12), ("TPU v5p", 459e12), ("TPU v4", 275e12),
    ("TPU v3", 61.5e12), ("TPU v2", 22.5e12),
)


def forward_flops_per_sequence(config, seq_length, num_masked=None, next_sentence=True):
  """Forward FLOPs for one sequence; ``num_masked=None`` means no MLM head (encoder only)."""
  h, i, n_layers, s = config.hidden_size, config.intermediate_size, config.num_hidden_layers, \
      seq_length
  flops = 2 * s * n_layers * (4 * h * h + 2 * h * i)
  flops += 2 * s * s * n_layers * 2 * h
  flops += 2 * h * h
  if num_masked:
    flops += 2 * num_masked * (h * h + h * config.vocab_size)
  if next_sentence:
    flops += 2 * 2 * h
  return flops


def train_flops_per_sequence(config, seq_length, num_masked=None, next_sentence=True):
  """Forward + backward FLOPs for one training sequence (3x forward)."""
  return 3 * forward_flops_per_sequence(config, seq_length, num_masked, next_sentence)


def peak_flops_for_device(device_description):
  """The dense bf16 peak of one device from its description (e.g. "NVIDIA H100 80GB HBM3")."""
  for needle, peak in _PEAK_FLOPS:
    if needle.lower() in (device_description or "").lower():
      return peak
  return None


def detect_peak_flops(strategy):
  """Peak FLOP/s of all of ``strategy``'s devices, or None when unknown (e.g. CPUs)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  total = 0.0
  gpus = tf.config.list_physical_devices("GPU")
  if gpus:
    name = tf.config.experimental.get_device_details(gpus[0]).get("device_name", "")
    peak = peak_flops_for_device(name)
    if peak:
      total = peak * strategy.num_replicas_in_sync
  return total or None


def mfu(flops_per_sequence, sequences_per_second, peak_flops):
  """Model FLOPs utilisation in [0, 1]."""
  return flops_per_sequence * sequences_per_second / peak_flops
