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


def _traced_matmul_flops(model, inputs):
  """2 x the multiply-adds of every MatMul and Einsum in the traced forward pass of ``model``
  on ``inputs`` (TensorSpecs of batch 1): what the model computes, read from its graph."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  graph = tf.function(lambda x: model(x, training=False)).get_concrete_function(inputs).graph
  total = 0
  for op in graph.get_operations():
    if op.type == "MatMul":
      a = op.inputs[0].shape
      total += 2 * op.outputs[0].shape.num_elements() * a[0 if op.get_attr("transpose_a") else 1]
    elif op.type in ("Einsum", "BatchMatMulV2", "BatchMatMulV3"):
      assert op.type == "Einsum", op.type  # (BatchMatMul would need its adjoints read)
      operands = op.get_attr("equation").decode().split("->")[0].split(",")
      sizes = {}
      for letters, tensor in zip(operands, op.inputs):
        sizes.update(zip(letters, tensor.shape.as_list()))
      product = 1
      for size in sizes.values():  # every index once: one multiply-add per combination
        product *= size
      total += 2 * product
  return total


def test_forward_flops_are_those_of_the_models_matmuls():
  """The docstring's formula, heads included (the MLM transform and output layer on the
  masked positions, the pooler, NSP), against the matmuls of the traced pretraining model and
  encoder: the encoder-only count of test_bert_base_flops_follow_parameter_count left the heads
  unchecked (a count without the MLM transform, or with half the NSP head, went unnoticed)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from bert_tf.modeling.models import BertPretrainer  # pylint: disable=import-outside-toplevel
  from tests.reference import google_models  # pylint: disable=import-outside-toplevel
  config = BertConfig.from_dict(google_models.tiny_config_dict(vocab_size=100))
  pretrainer, encoder = BertPretrainer(config), BertModel(config)
  for seq, masked in ((16, 3), (24, 5)):
    spec = {name: tf.TensorSpec([1, seq], tf.int32)
            for name in ("input_ids", "input_mask", "segment_ids")}
    assert _traced_matmul_flops(encoder, spec) == flops.forward_flops_per_sequence(
        config, seq, num_masked=None, next_sentence=False)
    spec["masked_lm_positions"] = tf.TensorSpec([1, masked], tf.int32)
    assert _traced_matmul_flops(pretrainer, spec) == flops.forward_flops_per_sequence(
        config, seq, num_masked=masked)
