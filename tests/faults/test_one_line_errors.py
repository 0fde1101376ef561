"""One line, not a traceback (issue 27, item 6).

Before, each of these was a Python traceback: an output folder that is a file, under a file or
on a read-only mount (every TensorFlow script and ``python -m bert_tf``), a vocab without
[CLS]/[SEP], ``--keep_checkpoint_max=0`` (CheckpointManager's ValueError; the original's "keep
every checkpoint"), a malformed TF_CONFIG, and a ``gs://`` path with no network (which also
hung for minutes while TensorFlow's GCS client retried). Each is now one line and exit 1, made
before anything is written; 0 keeps every checkpoint.
"""

import json
import os
import shutil
import socket
import subprocess

import keras
import pytest
import tensorflow as tf

from bert_tf import extract, optimization, paths
from bert_tf.data import glue
from bert_tf.errors import BertTfError
from bert_tf.modeling import BertConfig
from bert_tf.training import classifier, distribution, loop, pretraining, squad
from bert_tf.training.pretraining import PretrainingTask
from tests.conftest import FIXTURES
from tests.faults.support_export import digests, error_line, run_script
from tests.reference import google_models

CONFIG_DICT = google_models.tiny_config_dict(vocab_size=30522, max_position_embeddings=64)
CONFIG = BertConfig.from_dict(CONFIG_DICT)
SQUAD_V1 = FIXTURES / "squad" / "allennlp_squad_v1.1_sample.json"
SQUAD_LENGTHS = dict(max_seq_length=48, doc_stride=16, max_query_length=12)


@pytest.fixture(name="config_file")
def _config_file(tmp_path):
  path = tmp_path / "bert_config.json"
  path.write_text(json.dumps(CONFIG_DICT))
  return path


@pytest.fixture(name="read_only")
def _read_only(tmp_path):
  """A real read-only bind mount of a folder holding one file (as root, chmod would not stop
  a write); skipped where mounting is not permitted."""
  source, mount = tmp_path / "ro_source", tmp_path / "ro"
  source.mkdir()
  mount.mkdir()
  (source / "kept.txt").write_text("kept")
  bound = subprocess.run(["mount", "--bind", str(source), str(mount)], capture_output=True,
                         text=True, check=False)
  if bound.returncode:
    pytest.skip(f"mount --bind is not permitted here: {bound.stderr.strip()}")
  try:
    remount = subprocess.run(["mount", "-o", "remount,ro,bind", str(mount)],
                             capture_output=True, text=True, check=False)
    if remount.returncode:
      pytest.skip(f"a read-only remount is not permitted here: {remount.stderr.strip()}")
    with pytest.raises(OSError):
      (mount / "probe").write_text("x")
    yield mount
  finally:
    subprocess.run(["umount", str(mount)], check=True)


def _output_dir(tmp_path, read_only, case):
  """(output_dir, expected message) for an output folder that cannot be used."""
  if case == "a file":
    out = tmp_path / "out"
    out.write_text("mine")
    return out, f"--output_dir {out} is a file, not a folder"
  if case == "under a file":
    (tmp_path / "notes.txt").write_text("mine")
    out = tmp_path / "notes.txt" / "out"
    return out, f"--output_dir {out}: {tmp_path / 'notes.txt'} is a file, not a folder"
  out = read_only / "out"
  return out, (f"--output_dir {out}: cannot write there (in {read_only}, where it would be "
               "made): Read-only file system")


def _run(script, out, uncased_vocab):
  """The library function each TensorFlow script calls, with training asked for."""
  strategy = tf.distribute.get_strategy()
  if script == "run_classifier":
    return classifier.run_classifier(CONFIG, "MRPC", str(uncased_vocab), str(out), strategy,
                                     data_dir=str(FIXTURES / "glue" / "MRPC"), do_train=True,
                                     max_seq_length=32)
  if script == "run_squad":
    return squad.run_squad(CONFIG, str(uncased_vocab), str(out), strategy, do_train=True,
                           train_file=str(SQUAD_V1), **SQUAD_LENGTHS)
  return pretraining.run_pretraining(CONFIG, str(FIXTURES / "none.tfrecord"), str(out),
                                     strategy, do_train=True, max_seq_length=32)


@pytest.mark.parametrize("case", ["a file", "under a file", "read-only"])
@pytest.mark.parametrize("script", ["run_classifier", "run_squad", "run_pretraining"])
def test_an_output_dir_that_cannot_be_used(tmp_path, uncased_vocab, script, case, request):
  read_only = request.getfixturevalue("read_only") if case == "read-only" else None
  out, message = _output_dir(tmp_path, read_only, case)
  before = digests(tmp_path)
  with pytest.raises(BertTfError) as error:
    _run(script, out, uncased_vocab)
  assert str(error.value) == message
  assert digests(tmp_path) == before


def test_the_scripts_say_it_in_one_line(tmp_path, config_file, uncased_vocab, read_only):
  """The same through each script and the CLI: exit 1, one line, nothing written."""
  (tmp_path / "notes.txt").write_text("mine")
  lines = tmp_path / "lines.txt"
  lines.write_text("the cat sat\n")
  before = digests(tmp_path)
  common = (f"--bert_config_file={config_file}", "--max_seq_length=32")
  result = run_script("run_pretraining.py", f"--input_file={tmp_path}/none.tfrecord",
                      f"--output_dir={config_file}", "--do_train=True", *common)
  assert error_line(result) == (f"run_pretraining.py: error: --output_dir {config_file} is a "
                                "file, not a folder")
  result = run_script("run_classifier.py", "--task_name=MRPC", "--do_train=True",
                      f"--data_dir={FIXTURES / 'glue' / 'MRPC'}", f"--vocab_file={uncased_vocab}",
                      f"--output_dir={tmp_path}/notes.txt/out", *common)
  assert error_line(result) == (f"run_classifier.py: error: --output_dir {tmp_path}/notes.txt/"
                                f"out: {tmp_path}/notes.txt is a file, not a folder")
  result = run_script("run_squad.py", "--do_train=True", f"--train_file={SQUAD_V1}",
                      f"--vocab_file={uncased_vocab}", f"--output_dir={read_only}",
                      f"--bert_config_file={config_file}", "--max_seq_length=48",
                      "--doc_stride=16", "--max_query_length=12")
  assert error_line(result) == (f"run_squad.py: error: --output_dir {read_only}: cannot write "
                                "there: Read-only file system")
  result = run_script("extract_features.py", f"--input_file={lines}",
                      f"--output_file={read_only}/features.jsonl", f"--vocab_file={uncased_vocab}",
                      f"--init_checkpoint={tmp_path}/x", *common)
  assert error_line(result) == (f"extract_features.py: error: --output_file {read_only}/"
                                "features.jsonl: cannot write there: Read-only file system")
  model = tmp_path / "model"
  result = run_script("-m", "bert_tf", "embed", f"--model={model}", f"--input_file={lines}",
                      f"--output_file={read_only}/e.npy")
  assert error_line(result) == (f"bert_tf embed: error: --output_file {read_only}/e.npy: "
                                "cannot write there: Read-only file system")
  result = run_script("-m", "bert_tf", "attention", f"--model={model}", "a cat",
                      f"--output_png={tmp_path}/notes.txt/heads.png")
  assert error_line(result) == (f"bert_tf attention: error: --output_png {tmp_path}/notes.txt/"
                                f"heads.png: {tmp_path}/notes.txt is a file, not a folder")
  result = run_script("-m", "bert_tf", "embed", f"--model={model}", "--batch_size=0", "a cat",
                      f"--output_file={tmp_path}/e.npy")
  assert error_line(result) == "bert_tf embed: error: --batch_size must be at least 1, got 0"
  assert digests(tmp_path) == before


def test_arguments_that_are_not_flags_are_one_line(tmp_path, config_file, uncased_vocab):
  """``--input_file data/*.tfrecord`` with a space: the shell expands the glob into several
  arguments, and the scripts read the first file only (check_tfrecords.py said "no damage"
  of a folder whose second file was damaged). Each script refuses extra arguments now;
  create_pretraining_data.py keeps Beam's options after '--' (with --runner)."""
  first, second = tmp_path / "a.tfrecord", tmp_path / "b.tfrecord"
  for path in (first, second):
    with tf.io.TFRecordWriter(str(path)) as writer:
      writer.write(b"record")
  before = digests(tmp_path)
  expected = (": error: unexpected arguments '{}': every input is a flag, --name=value (quote a "
              "glob, --input_file='data/*.tfrecord', or the shell expands it into several "
              "arguments)")
  result = run_script("data_prep/check_tfrecords.py", "--input_file", first, second)
  assert error_line(result) == "check_tfrecords.py" + expected.format(second)
  result = run_script("run_pretraining.py", f"--input_file={first}", second,
                      f"--output_dir={tmp_path / 'out'}", f"--bert_config_file={config_file}",
                      "--do_train=True", "--max_seq_length=32")
  assert error_line(result) == "run_pretraining.py" + expected.format(second)
  result = run_script("data_prep/build_vocab.py", f"--input_file={first}", second,
                      f"--vocab_file={tmp_path / 'vocab.txt'}")
  assert error_line(result) == "build_vocab.py" + expected.format(second)
  assert digests(tmp_path) == before


@pytest.mark.parametrize("argv,message", [
    (["data_prep/check_tfrecords.py"], "check_tfrecords.py: error: --input_file is required"),
    (["run_pretraining.py", "--do_train"],
     "run_pretraining.py: error: --input_file is required; --output_dir is required"),
    (["data_prep/build_vocab.py", "--input_file=a", "--vocab_file=v", "--vocab_size=abc"],
     "build_vocab.py: error: flag --vocab_size=abc: invalid literal for int() with base 10: "
     "'abc'"),
    (["extract_features.py", "--layer=-1"],
     "extract_features.py: error: Unknown command line flag 'layer'. Did you mean: layers ?"),
])
def test_flags_that_do_not_parse_are_one_line(argv, message):
  """A missing required flag, a value of the wrong kind, a mistyped flag: the scripts' one line
  and exit 1 (absl printed "FATAL Flags parsing error: ..." and a hint to --helpshort)."""
  result = run_script(*argv)
  assert error_line(result) == message
  assert "FATAL" not in result.stderr and "--helpshort" not in result.stderr


def test_run_pretraining_refuses_a_vocab_of_another_size(tmp_path, uncased_vocab):
  """--vocab_file is copied beside the checkpoints: one of another size than the config's
  vocab_size (here the config's 30522 against a 1000-token vocab) made a folder that
  ``bert_tf.load`` and the fine-tuning scripts refuse; it is refused before training now, as
  run_classifier and run_squad refuse it."""
  small = tmp_path / "small_vocab.txt"
  small.write_text("\n".join(uncased_vocab.read_text().splitlines()[:1000]) + "\n")
  with pytest.raises(BertTfError) as raised:
    pretraining.run_pretraining(CONFIG, str(tmp_path / "none.tfrecord"), str(tmp_path / "out"),
                                tf.distribute.get_strategy(), vocab_file=str(small))
  assert str(raised.value) == (f"vocab file {str(small)!r} has 1000 tokens but the BERT config "
                               "says vocab_size 30522: they are not of the same model")
  assert not (tmp_path / "out").exists()


# === Vocab, checkpoints kept, TF_CONFIG ===

@pytest.mark.parametrize("token", ["[CLS]", "[SEP]"])
def test_a_vocab_without_cls_or_sep(tmp_path, uncased_vocab, token):
  vocab = tmp_path / "vocab.txt"
  vocab.write_text(uncased_vocab.read_text(encoding="utf-8").replace(f"{token}\n", "[gone]\n"),
                   encoding="utf-8")
  message = f"vocab file {vocab}: no {token} token (a BERT vocab needs [UNK], [CLS], [SEP])"
  with pytest.raises(BertTfError) as error:
    _run("run_classifier", tmp_path / "mrpc", vocab)
  assert str(error.value) == message
  with pytest.raises(BertTfError) as error:
    _run("run_squad", tmp_path / "squad", vocab)
  assert str(error.value) == message
  assert sorted(os.listdir(tmp_path)) == ["vocab.txt"]


def _train(model_dir, keep_checkpoint_max, steps=5):
  """A tiny pretraining run that saves after every step."""
  keras.utils.set_random_seed(7)
  task = PretrainingTask(BertConfig.from_dict(google_models.tiny_config_dict()))
  model = task.build_model()
  optimizer = optimization.create_optimizer(1e-3, num_train_steps=steps, num_warmup_steps=1)
  examples = google_models.random_pretraining_features(
      google_models.tiny_config_dict(), batch_size=4, seq_length=8, num_predictions=2, seed=0)
  trainer = loop.Trainer(tf.distribute.get_strategy(), task, model, optimizer, loop.LoopConfig(
      model_dir=str(model_dir), num_train_steps=steps, steps_per_loop=1,
      save_checkpoints_steps=1, keep_checkpoint_max=keep_checkpoint_max))
  trainer.train(lambda ctx: tf.data.Dataset.from_tensor_slices(examples).repeat().batch(2))
  return sorted(name for name in os.listdir(model_dir) if name.endswith(".index"))


def test_keep_checkpoint_max_0_keeps_every_checkpoint(tmp_path):
  """The original's convention (tf.estimator.RunConfig: 0 keeps all): one checkpoint per save,
  5 saves."""
  assert _train(tmp_path / "all", 0) == [f"ckpt-{step}.index" for step in range(1, 6)]
  assert _train(tmp_path / "two", 2) == ["ckpt-4.index", "ckpt-5.index"]
  with pytest.raises(BertTfError) as error:
    pretraining.run_pretraining(CONFIG, "x.tfrecord", str(tmp_path / "neg"),
                                tf.distribute.get_strategy(), do_train=True, max_seq_length=32,
                                keep_checkpoint_max=-1)
  assert str(error.value) == ("--keep_checkpoint_max must be 0 (keep every checkpoint) or "
                              "more, got -1")


CLUSTER = {"worker": ["localhost:12345", "localhost:12346"]}


@pytest.mark.parametrize("tf_config,message", [
    ('{"cluster": ', "TF_CONFIG is not valid JSON: {json_error}"),
    ('["worker"]', "TF_CONFIG must be a JSON object with 'cluster' and 'task'"),
    (json.dumps({"task": {"type": "worker", "index": 0}}),
     'TF_CONFIG has no \'cluster\' (e.g. {"worker": ["host1:port", "host2:port"]})'),
    (json.dumps({"cluster": {"worker": "localhost:1"}, "task": {"type": "worker", "index": 0}}),
     "TF_CONFIG cluster job 'worker' must be a list of 'host:port' addresses, got "
     "'localhost:1'"),
    (json.dumps({"cluster": {"worker": ["localhost", "localhost:1"]},
                 "task": {"type": "worker", "index": 0}}),  # no port (TensorFlow's traceback)
     "TF_CONFIG cluster job 'worker' must be a list of 'host:port' addresses, got "
     "['localhost', 'localhost:1']"),
    (json.dumps({"cluster": CLUSTER}),
     'TF_CONFIG has no \'task\' with \'type\' and \'index\' (e.g. {"type": "worker", '
     '"index": 0})'),
    (json.dumps({"cluster": CLUSTER, "task": {"type": "chief", "index": 0}}),
     "TF_CONFIG task type 'chief' is not a job of its cluster (worker)"),
    (json.dumps({"cluster": CLUSTER, "task": {"type": "worker", "index": 2}}),
     "TF_CONFIG task index 2 is out of range: job 'worker' has task(s) 0, 1"),
    (json.dumps({"cluster": CLUSTER, "task": {"type": "worker", "index": "0"}}),
     "TF_CONFIG task index '0' is out of range: job 'worker' has task(s) 0, 1"),
])
def test_a_malformed_tf_config(monkeypatch, tf_config, message):
  if "{json_error}" in message:
    try:
      json.loads(tf_config)
    except ValueError as e:
      message = message.format(json_error=e)
  monkeypatch.setenv("TF_CONFIG", tf_config)
  with pytest.raises(BertTfError) as error:
    distribution.get_strategy("multi_worker_mirrored", worker_start_timeout_s=5)
  assert str(error.value) == message


# === gs:// with no network ===

def test_a_gs_path_that_does_not_answer_is_one_line_in_bounded_time(tmp_path):
  """TensorFlow's GCS client, through a proxy that accepts connections and never answers (a
  network that drops packets), retries for minutes; the probe gives up after
  $BERT_TF_REMOTE_TIMEOUT_S seconds with one line."""
  silent = socket.socket()
  silent.bind(("127.0.0.1", 0))
  silent.listen(16)  # the kernel completes the connections; nothing ever answers them
  proxy = f"http://127.0.0.1:{silent.getsockname()[1]}"
  env = {"HTTPS_PROXY": proxy, "https_proxy": proxy, "GOOGLE_AUTH_TOKEN_FOR_TESTING": "token",
         "BERT_TF_REMOTE_TIMEOUT_S": "3"}
  model = tmp_path / "model"
  old = {k: os.environ.get(k) for k in env}
  os.environ.update(env)  # run_script passes os.environ on
  try:
    result = run_script("-m", "bert_tf", "embed", f"--model={model}",
                        "--input_file=gs://bert-tf-no-such-bucket/lines.txt",
                        f"--output_file={tmp_path}/e.npy")
  finally:
    for key, value in old.items():
      if value is None:
        os.environ.pop(key, None)
      else:
        os.environ[key] = value
    silent.close()
  assert error_line(result) == ("bert_tf embed: error: --input_file gs://bert-tf-no-such-"
                                "bucket/lines.txt: no answer within 3 s (no network?)")
  assert sorted(os.listdir(tmp_path)) == []


def test_a_gs_error_is_its_first_line():
  def unreachable(path):
    raise tf.errors.FailedPreconditionError(
        None, None, "Error executing an HTTP request: libcurl code 6 meaning 'Could not resolve "
        f"hostname'\n\twhen reading metadata of {path}")
  with pytest.raises(BertTfError) as error:
    paths.check_reachable("--output_dir", "gs://b/out", probe=unreachable)
  assert str(error.value) == ("--output_dir gs://b/out: cannot reach it: Error executing an HTTP "
                              "request: libcurl code 6 meaning 'Could not resolve hostname'")


def test_only_gs_paths_are_probed_once_per_bucket(monkeypatch, tmp_path):
  def never(path):
    raise AssertionError(f"probed {path}")
  for path in ("hf://org/model", str(tmp_path)):
    paths.check_reachable("--x", path, probe=never)
  probed = []
  monkeypatch.setattr(paths, "check_reachable", lambda label, path: probed.append((label, path)))
  paths.check_paths(inputs={"--input_file": "gs://b1/a.tfrecord,gs://b1/b.tfrecord",
                            "--model": "hf://org/model"},
                    outputs={"--output_dir": paths.Folder("gs://b2/out"),
                             "--output_file": str(tmp_path / "x.npy")})
  assert probed == [("--input_file", "gs://b1/a.tfrecord"), ("--output_dir", "gs://b2/out")]


def test_another_label_order_over_fine_tuned_checkpoints_is_refused(tmp_path, config_file,
                                                                   uncased_vocab):
  """An eval-only run with --labels in another order evaluated the fine-tuned weights under
  swapped names and wrote its classifier.json over the folder's (bert_tf.load(folder) then
  answered "spam" where the weights mean "ham"); so did another --task_name. Refused now,
  naming what differs, the folder byte for byte as it was; the same labels still evaluate."""
  data = tmp_path / "data"
  data.mkdir()
  rows = "text_a\tlabel\nhello world\tham\nbuy now cheap\tspam\nmeeting at noon\tham\n"
  for split in ("train", "dev"):
    (data / f"{split}.tsv").write_text(rows + "free money\tspam\n")
  out = tmp_path / "out"
  common = ("run_classifier.py", "--task_name=user", f"--data_dir={data}",
            f"--vocab_file={uncased_vocab}", f"--bert_config_file={config_file}",
            "--max_seq_length=16", "--train_batch_size=2", "--num_train_epochs=1", "--seed=1",
            f"--output_dir={out}")
  result = run_script(*common, "--do_train=True")
  assert result.returncode == 0, result.stderr[-3000:]
  before = digests(out)
  result = run_script(*common, "--do_eval=True", "--labels=spam,ham")
  assert error_line(result) == (
      f"run_classifier.py: error: --output_dir '{out}' holds checkpoints fine-tuned with other "
      f"labels ({out}/classifier.json): labels ham,spam (now spam,ham); give the same --labels "
      "/ --task_name / --do_lower_case, or use another --output_dir")
  assert digests(out) == before
  result = run_script(*common, "--do_eval=True")
  assert result.returncode == 0, result.stderr[-3000:]
  assert json.loads((out / "classifier.json").read_text())["labels"] == ["ham", "spam"]

  # A run that uses --init_checkpoint's head as it is (here an eval into a new folder; an
  # export-only run the same) is held to the labels beside it: it answered the other label.
  google = out / "google"
  for init in (google / "bert_model.ckpt", out):
    result = run_script(*common[:-1], f"--output_dir={tmp_path / 'other'}", "--do_eval=True",
                        f"--init_checkpoint={init}", "--labels=spam,ham")
    folder = google if init != out else out
    assert error_line(result) == (
        f"run_classifier.py: error: --init_checkpoint '{folder}' holds checkpoints fine-tuned "
        f"with other labels ({folder}/classifier.json): labels ham,spam (now spam,ham); give "
        "the same --labels / --task_name / --do_lower_case, or use another --init_checkpoint")
    assert not (tmp_path / "other").exists()
  result = run_script(*common[:-1], f"--output_dir={tmp_path / 'other'}", "--do_eval=True",
                      f"--init_checkpoint={google / 'bert_model.ckpt'}")
  assert result.returncode == 0, result.stderr[-3000:]
  # Its results, and no config, vocab or labels without weights (bert_tf.load of the folder
  # said "no checkpoint found").
  assert "eval_results.txt" in os.listdir(tmp_path / "other")
  assert not {"bert_config.json", "vocab.txt", "classifier.json"} & set(
      os.listdir(tmp_path / "other"))


def test_ax_predicts_with_an_mnli_model_as_init_checkpoint(tmp_path, config_file,
                                                          uncased_vocab):
  """The README's AX: predict only, with an MNLI model as --init_checkpoint: the labels beside
  it are AX's, the task's name is not (the first version of the check refused it)."""
  common = (f"--vocab_file={uncased_vocab}", f"--bert_config_file={config_file}",
            "--max_seq_length=32", "--seed=1")
  mnli = tmp_path / "mnli"
  result = run_script("run_classifier.py", "--task_name=MNLI", *common,
                      f"--data_dir={FIXTURES / 'glue' / 'MNLI'}", f"--output_dir={mnli}",
                      "--do_train=True", "--train_batch_size=2", "--num_train_epochs=1")
  assert result.returncode == 0, result.stderr[-3000:]
  result = run_script("run_classifier.py", "--task_name=AX", *common,
                      f"--data_dir={FIXTURES / 'glue' / 'diagnostic'}",
                      f"--output_dir={tmp_path / 'ax'}", "--do_predict=True",
                      f"--init_checkpoint={mnli / 'google' / 'bert_model.ckpt'}")
  assert result.returncode == 0, result.stderr[-3000:]
  assert (tmp_path / "ax" / "AX.tsv").exists()


def test_another_tag_order_over_fine_tuned_ner_checkpoints_is_refused(tmp_path, config_file,
                                                                     uncased_vocab):
  """run_ner's token_classifier.json the same way: an eval-only run with --labels in another
  order is refused, the folder as it was."""
  out = tmp_path / "out"
  common = ("run_ner.py", f"--data_dir={FIXTURES / 'ner' / 'conll2003_sample'}",
            f"--vocab_file={uncased_vocab}", f"--bert_config_file={config_file}",
            "--max_seq_length=32", "--train_batch_size=2", "--num_train_epochs=1", "--seed=1",
            f"--output_dir={out}")
  result = run_script(*common, "--do_train=True")
  assert result.returncode == 0, result.stderr[-3000:]
  kept = json.loads((out / "token_classifier.json").read_text())["labels"]
  before = digests(out)
  result = run_script(*common, "--do_eval=True", f"--labels={','.join(kept[::-1])}")
  assert error_line(result) == (
      f"run_ner.py: error: --output_dir '{out}' holds checkpoints fine-tuned with other labels "
      f"({out}/token_classifier.json): labels {','.join(kept)} (now {','.join(kept[::-1])}); "
      "give the same --labels / --task_name / --do_lower_case, or use another --output_dir")
  assert digests(out) == before
  # The same for a run that uses --init_checkpoint's head as it is.
  result = run_script(*common[:-1], f"--output_dir={tmp_path / 'other'}", "--do_eval=True",
                      f"--init_checkpoint={out}", f"--labels={','.join(kept[::-1])}")
  assert error_line(result).startswith(
      f"run_ner.py: error: --init_checkpoint '{out}' holds checkpoints fine-tuned with other "
      f"labels ({out}/token_classifier.json): labels {','.join(kept)} (now ")
  # Without --labels the tags are those beside it (it said "no tag list: give --labels").
  result = run_script(*common[:-1], f"--output_dir={tmp_path / 'other'}", "--do_eval=True",
                      f"--init_checkpoint={out}")
  assert result.returncode == 0, result.stderr[-3000:]
  assert (tmp_path / "other" / "eval_results.txt").exists()


def test_labels_and_squad_files_that_are_not_utf8_and_a_tiny_max_seq_length(
    tmp_path, config_file, uncased_vocab):
  """A labels.txt or SQuAD file in Latin-1 was a UnicodeDecodeError traceback; a BOM in
  labels.txt (Notepad) became part of the first label ("unknown label 'ham'" of train.tsv);
  --max_seq_length below 3 was an IndexError in truncate_seq_pair (MRPC pairs,
  extract_features). Each is one line now, the BOM dropped as the .tsv readers drop it."""
  data = tmp_path / "data"
  data.mkdir()
  (data / "train.tsv").write_text("text_a\tlabel\nhello world\tham\nfree money\tspam\n")
  common = ("run_classifier.py", "--task_name=user", f"--data_dir={data}",
            f"--vocab_file={uncased_vocab}", f"--bert_config_file={config_file}",
            "--train_batch_size=2", "--do_train=True", f"--output_dir={tmp_path / 'out'}")
  (data / "labels.txt").write_bytes(b"h\xe9m\nspam\n")
  assert error_line(run_script(*common, "--max_seq_length=16")) == (
      f"run_classifier.py: error: {data}/labels.txt:1: not valid UTF-8 (byte 2 of the line)")
  squad_file = tmp_path / "latin.json"
  squad_file.write_bytes(b'{"data": [], "version": "caf\xe9"}')
  result = run_script("run_squad.py", "--do_train=True", f"--train_file={squad_file}",
                      f"--vocab_file={uncased_vocab}", f"--bert_config_file={config_file}",
                      f"--output_dir={tmp_path / 'squad'}", "--max_seq_length=48",
                      "--doc_stride=16", "--max_query_length=12")
  assert error_line(result) == (f"run_squad.py: error: {squad_file}:1: not valid UTF-8 (byte "
                                "29 of the line)")
  assert error_line(run_script(*common, "--max_seq_length=2")) == (
      "run_classifier.py: error: --max_seq_length=2: must be >= 3")
  assert not (tmp_path / "out").exists()
  (data / "labels.txt").write_bytes(b"\xef\xbb\xbfham\r\nspam\r\n")
  labels = glue.get_processor("user", data_dir=str(data)).get_labels()
  assert list(labels) == ["ham", "spam"]


def test_a_full_disk_or_read_only_folder_is_one_line():
  """A full disk met while writing (a read-only folder, a quota): the machine's state, not a
  bug: the scripts' one line naming the file and exit 1 (a traceback ended in OSError, or
  TensorFlow's ResourceExhaustedError for a file written through tf.io.gfile); other errors
  keep their tracebacks."""
  import errno  # pylint: disable=import-outside-toplevel
  from bert_tf.errors import environment_error  # pylint: disable=import-outside-toplevel
  assert environment_error(OSError(errno.ENOSPC, "No space left on device", "/o/x.npy")) == \
      "/o/x.npy: No space left on device"
  assert environment_error(PermissionError(errno.EACCES, "Permission denied")) == \
      "Permission denied"
  assert environment_error(FileNotFoundError(errno.ENOENT, "No such file", "/o")) is None
  assert environment_error(ValueError("a bug")) is None
  full = tf.errors.ResourceExhaustedError(None, None, "/o/m.safetensors; No space left on device")
  assert environment_error(full) == "/o/m.safetensors; No space left on device"
  oom = tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor")
  assert environment_error(oom) is None
  # A bucket out of reach (TensorFlow's message when the network is off; a TPU flag file's
  # placeholder gs://YOUR_BUCKET): its path and why, on one line (helper-52: a traceback).
  unreachable = tf.errors.FailedPreconditionError(None, None, (
      "Error executing an HTTP request: libcurl code 6 meaning 'Could not resolve hostname', "
      "error details: Could not resolve host: www.googleapis.com\n"
      "\t when reading metadata of gs://YOUR_BUCKET/bert_config.json"))
  assert environment_error(unreachable) == (
      "gs://YOUR_BUCKET/bert_config.json: Error executing an HTTP request: libcurl code 6 "
      "meaning 'Could not resolve hostname', error details: Could not resolve host: "
      "www.googleapis.com")
  assert environment_error(tf.errors.FailedPreconditionError(
      None, None, "Attempting to use uninitialized value bert/x")) is None
  code = ("import errno, sys\n"
          "sys.argv = ['write.py']\n"
          "from bert_tf import cli\n"
          "def main(argv):\n"
          "  raise OSError(errno.ENOSPC, 'No space left on device', '/o/out.txt')\n"
          "cli.run(main)\n")
  result = run_script("-c", code)
  assert error_line(result) == "write.py: error: /o/out.txt: No space left on device"


def test_the_cli_on_a_full_disk_is_one_line(tmp_path, minilm_path, monkeypatch, capsys):
  """python -m bert_tf embed when the disk fills while its file is written: one line, exit 1,
  no temporary file left."""
  import errno  # pylint: disable=import-outside-toplevel
  from bert_tf import __main__ as cli_module, fileio  # pylint: disable=import-outside-toplevel
  real = fileio.open_file

  def full(path, mode="r"):
    if "w" in mode:
      raise OSError(errno.ENOSPC, "No space left on device", path)
    return real(path, mode)
  monkeypatch.setattr(fileio, "open_file", full)
  out = tmp_path / "e.npy"
  status = cli_module.main(["embed", f"--model={minilm_path}", f"--output_file={out}",
                            "one text"])
  err = capsys.readouterr().err.strip().splitlines()
  assert status == 1 and err[-1] == f"bert_tf embed: error: {out}: No space left on device"
  assert "Traceback" not in "".join(err)
  assert os.listdir(tmp_path) == []


def test_a_folder_where_a_data_file_should_be(tmp_path, config_file, uncased_vocab):
  """A folder named as a data file (train.tsv, a SQuAD file, a CoNLL dev.txt, extract_features'
  input) was an IsADirectoryError traceback, or 'empty' for extract_features; one line now."""
  glue_dir, conll_dir, folder = tmp_path / "glue", tmp_path / "conll", tmp_path / "adir"
  for path in (glue_dir / "train.tsv", conll_dir / "dev.txt", folder):
    path.mkdir(parents=True)
  shutil.copy(FIXTURES / "ner" / "conll2003_sample" / "train.txt", conll_dir / "train.txt")
  common = (f"--vocab_file={uncased_vocab}", f"--bert_config_file={config_file}",
            f"--output_dir={tmp_path / 'out'}", "--max_seq_length=48")
  assert error_line(run_script("run_classifier.py", "--task_name=MRPC", f"--data_dir={glue_dir}",
                               "--do_train=True", *common)) == (
      f"run_classifier.py: error: {glue_dir}/train.tsv is a folder, not a file")
  assert error_line(run_script("run_squad.py", "--do_train=True", f"--train_file={folder}",
                               "--doc_stride=16", "--max_query_length=12", *common)) == (
      f"run_squad.py: error: SQuAD file (--train_file) is a folder, not a file: '{folder}'")
  assert error_line(run_script("run_ner.py", f"--data_dir={conll_dir}", "--do_train=True",
                               "--do_eval=True", *common)) == (
      f"run_ner.py: error: {conll_dir}/dev.txt is a folder, not a file")
  assert not (tmp_path / "out").exists()
  with pytest.raises(BertTfError, match=r"^input file \(--input_file\) is a folder, not a "
                     rf"file: '{folder}'$"):
    extract.read_examples(str(folder))  # extract_features.py's and python -m bert_tf's reader


def test_a_link_to_nothing_is_named_as_one(tmp_path):
  """A symbolic link to a missing file or folder: 'no file matches' (globs pass over it) or,
  as --output_dir, 'is a file, not a folder'; now what it is, in every reader of inputs."""
  from bert_tf.data import pipeline, record_check  # pylint: disable=import-outside-toplevel
  from bert_tf.data.pretraining import corpus  # pylint: disable=import-outside-toplevel
  (tmp_path / "dangling.txt").symlink_to(tmp_path / "nowhere.txt")
  (tmp_path / "outlink").symlink_to(tmp_path / "nowhere_dir")
  link = str(tmp_path / "dangling.txt")
  says = f"{link} is a link to '{tmp_path / 'nowhere.txt'}', which does not exist"
  for read in (corpus.expand_input_files, pipeline.expand_file_patterns,
               record_check.expand_patterns):
    with pytest.raises(BertTfError) as e:
      read(link)
    assert str(e.value) == f"--input_file: {says}"
  with pytest.raises(BertTfError) as e:
    extract.read_examples(link)
  assert str(e.value) == f"input file (--input_file): {says}"
  for output in ("outlink", "outlink/run1"):
    with pytest.raises(BertTfError) as e:
      paths.check_writable("--output_dir", str(tmp_path / output), True)
    assert str(e.value) == (f"--output_dir {tmp_path / output}: {tmp_path / 'outlink'} is a "
                            f"link to '{tmp_path / 'nowhere_dir'}', which does not exist")


def test_a_text_is_cut_only_when_longer_than_the_limit():
  """errors.shortened, counted by hand: a text of the limit's length (80) is whole; one of 81
  keeps its first (80 - 5) * 2 // 3 = 50 and last 25 characters around " ... " (80 in all).
  (A text of exactly the limit was cut, unnoticed.)"""
  from bert_tf.errors import quoted, shortened  # pylint: disable=import-outside-toplevel
  text = "".join(chr(ord("a") + i % 26) for i in range(81))
  assert shortened(text[:80]) == text[:80]
  assert shortened(text) == text[:50] + " ... " + text[56:] and len(text[56:]) == 25
  assert shortened(text[:10], limit=10) == text[:10]
  assert shortened(text[:11], limit=10) == "abc ... jk"  # head (10 - 5) * 2 // 3 = 3, tail 2
  assert quoted(text[:78]) == repr(text[:78])  # 80 characters with its quotes
