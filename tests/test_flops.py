"""FLOPs counts against a direct count of BERT-Base's parameters (published: 110M)."""

from bert_tf import flops
from bert_tf.modeling import BertConfig, BertModel


def test_bert_base_flops_follow_parameter_count():
  config = BertConfig(vocab_size=30522)  # BERT-Base defaults
  # 6 * non-embedding matmul parameters * tokens is the classic estimate; attention adds
  # 12 * S^2 * L * H on top (fwd+bwd), heads excluded here.
  model = BertModel(config)
  layer_params = sum(
      v.shape.num_elements() for v in model.weights
      if "/encoder/" in v.path and v.path.endswith("kernel"))
  seq = 128
  expected = 6 * layer_params * seq + 3 * 2 * seq * seq * 12 * 2 * 768 + 6 * 768 * 768
  got = flops.train_flops_per_sequence(config, seq, num_masked=None, next_sentence=False)
  assert got == expected
  total_params = sum(v.shape.num_elements() for v in model.weights)
  assert 108e6 < total_params < 111e6  # the published 110M


def test_peak_lookup_and_mfu():
  assert flops.peak_flops_for_device("NVIDIA H100 80GB HBM3") == 989e12
  # NVIDIA's H100 datasheet: dense BF16 756 TFLOPS for the PCIe card, 835 for NVL.
  assert flops.peak_flops_for_device("NVIDIA H100 PCIe") == 756e12
  assert flops.peak_flops_for_device("NVIDIA H100 NVL") == 835e12
  assert flops.peak_flops_for_device("Intel CPU") is None
  assert abs(flops.mfu(1e12, 100, 989e12) - 100e12 / 989e12) < 1e-12
