"""docs/MIGRATION.md's port of modeling.py's own example runs as written and gives what Google's
modeling.py (bert-tensorflow 1.0.4) gives on the same checkpoint, output for output."""

import pathlib
import re

import numpy as np

from tests.reference import google_models
from tests.reference.google_bert import google

DOC = pathlib.Path(__file__).resolve().parents[1] / "docs" / "MIGRATION.md"


def _example():
  text = DOC.read_text(encoding="utf-8")
  section = text.split("## Code written against `modeling.py`", 1)[1].split("\n## ", 1)[0]
  blocks = re.findall(r"```python\n(.*?)```", section, re.S)
  assert len(blocks) == 1, blocks
  return blocks[0]


def test_the_ported_example_gives_the_originals_outputs(tmp_path):
  code = _example()
  # The example's config, with the original BertConfig's defaults for the rest.
  arguments = re.search(r"config = BertConfig\((.*?)\)\n", code, re.S).group(1)
  arguments = eval(f"dict({arguments})")  # pylint: disable=eval-used
  config = google("modeling").BertConfig(**arguments).to_dict()
  features = {
      "input_ids": np.array([[31, 51, 99], [15, 5, 0]], np.int32),
      "input_mask": np.array([[1, 1, 1], [1, 1, 0]], np.int32),
      "segment_ids": np.array([[0, 0, 1], [0, 2, 0]], np.int32),
      "masked_lm_positions": np.array([[1], [1]], np.int32),
      "masked_lm_ids": np.array([[7], [9]], np.int32),
      "masked_lm_weights": np.array([[1.0], [1.0]], np.float32),
      "next_sentence_labels": np.array([[0], [1]], np.int32)}
  checkpoint = str(tmp_path / "bert_model.ckpt")
  original = google_models.run_google_pretraining(config, features, save_path=checkpoint)
  namespace = {"init_checkpoint": checkpoint}
  exec(compile(code, str(DOC), "exec"), namespace)  # pylint: disable=exec-used
  for name in ("pooled_output", "sequence_output", "embedding_output"):
    np.testing.assert_allclose(namespace[name].numpy(), original[name], atol=1e-5, rtol=0,
                               err_msg=name)
  assert len(namespace["all_encoder_layers"]) == 8 == len(original["encoder_outputs"])
  for ours, theirs in zip(namespace["all_encoder_layers"], original["encoder_outputs"]):
    np.testing.assert_allclose(ours.numpy(), theirs, atol=1e-5, rtol=0)
  assert namespace["embedding_table"].shape == (32000, 512)
  assert namespace["pooled_output"].shape == (2, 512)
