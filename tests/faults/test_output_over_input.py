"""No output over its own input (issue 27, item 3).

Before: ``extract_features.py --output_file`` equal to ``--input_file`` replaced the input with
the features, ``python -m bert_tf embed`` the same, and ``run_classifier --output_dir`` equal to
``--data_dir`` replaced AX.tsv with the AX predictions; each exited 0. Now every script compares
its outputs with its inputs after resolving links (``bert_tf.paths``) and refuses with one line
naming both; the inputs are unchanged byte for byte (sha256).
"""

import json
import os
import re
import shutil

import pytest
import tensorflow as tf

from bert_tf import paths
from bert_tf.errors import BertTfError
from bert_tf.modeling import BertConfig
from bert_tf.training import classifier, squad
from tests.conftest import FIXTURES
from tests.faults.support_export import digests, error_line, run_script
from tests.reference import google_models

CONFIG = google_models.tiny_config_dict(vocab_size=30522, max_position_embeddings=64)


@pytest.fixture(scope="module")
def config_file(tmp_path_factory):
  path = tmp_path_factory.mktemp("config") / "bert_config.json"
  path.write_text(json.dumps(CONFIG))
  return path


# === The rule, on paths alone ===

def test_an_output_that_is_an_input_through_a_link_is_refused(tmp_path):
  data = tmp_path / "lines.txt"
  data.write_text("a\n")
  link = tmp_path / "link.txt"
  link.symlink_to(data)
  with pytest.raises(BertTfError) as error:
    paths.check_no_overwrite({"--input_file": str(data)}, {"--output_file": str(link)})
  assert str(error.value) == (f"--output_file {link} is --input_file {data}: the run would "
                              "write over its own input")


def test_an_input_inside_an_output_folder_is_refused_only_where_the_run_writes(tmp_path):
  out = tmp_path / "out"
  folder = paths.Folder(str(out), ["google/bert_model.ckpt*", "eval_results.txt"])
  with pytest.raises(BertTfError) as error:
    paths.check_no_overwrite({"--init_checkpoint": f"{out}/google/bert_model.ckpt"},
                             {"--output_dir": folder})
  assert str(error.value) == (
      f"--init_checkpoint {out}/google/bert_model.ckpt is inside --output_dir {out}, where "
      "the run writes google/bert_model.ckpt: it would write over its own input")
  # The vocab and config beside the checkpoints are rewritten with the same content: the
  # usual way to go on from a finished run is not refused.
  paths.check_no_overwrite({"--vocab_file": f"{out}/vocab.txt",
                            "--init_checkpoint": f"{out}/google2/bert_model.ckpt"},
                           {"--output_dir": folder})



def test_an_input_in_a_folder_whose_name_starts_with_two_dots_is_inside(tmp_path):
  """``out/..cache/train.tsv`` is inside ``out`` (os.path.commonpath says so); only ``..``
  itself, or a path through it, leads out. A folder name starting ``..`` was taken for the
  way out, and the input was written over unrefused."""
  out = tmp_path / "out"
  for name in ("..cache", "...", "..x.."):
    inside = f"{out}/{name}/train.tsv"
    assert os.path.commonpath([inside, str(out)]) == str(out)
    with pytest.raises(BertTfError, match=f"is inside --output_dir {out}, where the run writes "
                                          f"{re.escape(name)}/train.tsv"):
      paths.check_no_overwrite({"--data_dir": inside}, {"--output_dir": paths.Folder(str(out))})
  paths.check_no_overwrite({"--data_dir": f"{out}/../data/train.tsv", "--vocab_file":
                            f"{tmp_path}/out2/vocab.txt"}, {"--output_dir": paths.Folder(str(out))})

# === The scripts ===

def test_extract_features_output_file_equal_to_input_file(tmp_path, config_file, uncased_vocab):
  data = tmp_path / "input.txt"
  data.write_text("the cat sat\nhello ||| world\n")
  alias = tmp_path / "alias.txt"
  alias.symlink_to(data)
  before = digests(tmp_path)
  for output in (data, alias):
    result = run_script("extract_features.py", f"--input_file={data}",
                        f"--output_file={output}", f"--vocab_file={uncased_vocab}",
                        f"--bert_config_file={config_file}", f"--init_checkpoint={tmp_path}/x")
    assert error_line(result) == (
        f"extract_features.py: error: --output_file {output} is --input_file {data}: the run "
        "would write over its own input")
  assert digests(tmp_path) == before


def test_cli_embed_output_file_equal_to_input_file(tmp_path):
  data = tmp_path / "lines.jsonl"
  data.write_text("the cat sat\nthe dog ran\n")
  model = tmp_path / "model"
  model.mkdir()
  before = digests(tmp_path)
  result = run_script("-m", "bert_tf", "embed", f"--model={model}", f"--input_file={data}",
                      f"--output_file={data}")
  assert error_line(result) == (f"bert_tf embed: error: --output_file {data} is --input_file "
                                f"{data}: the run would write over its own input")
  # A picture over the model's own vocab.txt is refused the same way.
  (model / "vocab.txt").write_text("[PAD]\n")
  before = digests(tmp_path)
  result = run_script("-m", "bert_tf", "attention", f"--model={model}", "a cat",
                      f"--output_html={model}/vocab.txt")
  assert error_line(result) == (f"bert_tf attention: error: --output_html {model}/vocab.txt is "
                                f"--model {model}/vocab.txt: the run would write over its own "
                                "input")
  assert digests(tmp_path) == before


def test_run_classifier_output_dir_equal_to_data_dir(tmp_path, config_file, uncased_vocab):
  """The AX predictions would replace AX.tsv, the task's own input."""
  data = tmp_path / "glue_ax"
  data.mkdir()
  shutil.copy(FIXTURES / "glue" / "diagnostic" / "diagnostic.tsv", data / "AX.tsv")
  before = digests(tmp_path)
  result = run_script("run_classifier.py", "--task_name=AX", "--do_predict=True",
                      f"--data_dir={data}", f"--output_dir={data}/",
                      f"--vocab_file={uncased_vocab}", f"--bert_config_file={config_file}",
                      "--max_seq_length=32")
  assert error_line(result) == (f"run_classifier.py: error: --output_dir {data}/ is --data_dir "
                                f"{data}: the run would write over its own input")
  assert digests(tmp_path) == before


def test_build_vocab_over_its_own_corpus(tmp_path):
  corpus = tmp_path / "corpus.txt"
  corpus.write_text("some words here\n")
  before = digests(tmp_path)
  result = run_script("data_prep/build_vocab.py", f"--input_file={corpus}",
                      f"--vocab_file={corpus}", "--vocab_size=50")
  assert error_line(result) == (f"build_vocab.py: error: --vocab_file {corpus} is --input_file "
                                f"{corpus}: the run would write over its own input")
  assert digests(tmp_path) == before


def test_fine_tuning_from_the_export_it_would_replace(tmp_path, uncased_vocab):
  """--init_checkpoint out/google/bert_model.ckpt with --output_dir out: training's Google
  export would replace the very checkpoint it started from (classifier and SQuAD)."""
  out = tmp_path / "out"
  (out / "google").mkdir(parents=True)
  for suffix in (".index", ".data-00000-of-00001"):
    (out / "google" / f"bert_model.ckpt{suffix}").write_text("weights")
  init = str(out / "google" / "bert_model.ckpt")
  squad_file = out / "predictions.json"
  squad_file.write_text(json.dumps({"version": "1.1", "data": []}))
  before = digests(tmp_path)
  config = BertConfig.from_dict(CONFIG)
  with pytest.raises(BertTfError) as error:
    classifier.run_classifier(config, "MRPC", str(uncased_vocab), str(out),
                              tf.distribute.get_strategy(), do_train=True, do_lower_case=True,
                              data_dir=str(FIXTURES / "glue" / "MRPC"), init_checkpoint=init,
                              max_seq_length=32)
  assert str(error.value) == (f"--init_checkpoint {init} is inside --output_dir {out}, where "
                              "the run writes google/bert_model.ckpt: it would write over its "
                              "own input")
  with pytest.raises(BertTfError) as error:
    squad.run_squad(config, str(uncased_vocab), str(out), tf.distribute.get_strategy(),
                    do_predict=True, predict_file=str(squad_file), init_checkpoint=init,
                    max_seq_length=48, doc_stride=16, max_query_length=12)
  assert str(error.value) == (f"--predict_file {squad_file} is inside --output_dir {out}, "
                              "where the run writes predictions.json: it would write over its "
                              "own input")
  assert digests(tmp_path) == before
