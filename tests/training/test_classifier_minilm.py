"""Fine-tuning the real all-MiniLM-L6-v2 weights on a real labelled task beats the majority class.

The task is tests/fixtures/glue/spam_subjects (SpamAssassin e-mail subjects, ham vs spam, CC0;
see tests/fixtures/glue/README.md), in the user-task layout, read by run_classifier's own
user-task path. This is the small version (256 examples, one epoch, 32 word pieces);
the README has the full run's numbers.
"""

import numpy as np
import tensorflow as tf

from bert_tf.modeling import checkpoints
from bert_tf.training import classifier
from tests.conftest import FIXTURES

SPAM = FIXTURES / "glue" / "spam_subjects"


def _subset(source, target, per_label=None, rows=None):
  """The header and the first `rows` rows, or the first `per_label` rows of each label,
  alternating (the original's 100-record shuffle buffer would not mix a sorted file).
  Returns the labels written."""
  header, *lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
  if rows is not None:
    lines = lines[:rows]
  else:
    by_label = [[line for line in lines if line.rstrip("\n").endswith("\t" + label)][:per_label]
                for label in ("ham", "spam")]
    lines = [line for pair in zip(*by_label) for line in pair]
  target.write_text(header + "".join(lines), encoding="utf-8")
  return [line.rstrip("\n").split("\t")[-1] for line in lines]


def test_minilm_fine_tunes_well_above_majority_class(tmp_path, minilm_path):
  data = tmp_path / "data"
  data.mkdir()
  _subset(SPAM / "train.tsv", data / "train.tsv", per_label=128)   # 256, alternating
  dev_labels = _subset(SPAM / "dev.tsv", data / "dev.tsv", rows=160)
  majority = max(dev_labels.count("ham"), dev_labels.count("spam")) / len(dev_labels)
  assert 0.5 <= majority <= 0.65

  results = classifier.run_classifier(
      checkpoints.load_config(str(minilm_path / "config.json")), "user",
      str(minilm_path / "vocab.txt"), str(tmp_path / "out"), tf.distribute.get_strategy(),
      data_dir=str(data), init_checkpoint=str(minilm_path), max_seq_length=32,
      do_train=True, do_eval=True, train_batch_size=16, eval_batch_size=32,
      learning_rate=1e-4, num_train_epochs=1.0, seed=1, steps_per_loop=16,
      export_google_checkpoint=False)
  assert results["train"]["global_step"] == 16
  accuracy = results["eval"]["eval_accuracy"]
  assert accuracy >= majority + 0.15, (accuracy, majority)
  assert np.isfinite(results["eval"]["eval_loss"]) and results["eval"]["eval_f1"] > 0.6
