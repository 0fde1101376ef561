"""Released checkpoints by name (``bert_tf.pretrained``), against a local stand-in for Google's
storage (``model_server``): load by name equals load of the folder, a second load downloads
nothing, a cut or killed download leaves nothing that looks whole and the next call succeeds,
offline is one line, and the scripts and the CLI take the same names."""

import io
import json
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

import bert_tf
from bert_tf import extract, pretrained, tokenization
from bert_tf.modeling import BertModel, checkpoints
from bert_tf.__main__ import main as cli_main
from tests.faults import hook
from tests.inference.conftest import FILL_MASK
from tests.inference.model_server import google_zip

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _listing(folder):
  """Every path under ``folder``, relative, sorted."""
  return sorted(os.path.relpath(os.path.join(root, name), folder)
                for root, dirs, files in os.walk(folder) for name in dirs + files)


def _model_files(folder):
  return {name: open(os.path.join(folder, name), "rb").read() for name in os.listdir(folder)
          if name.startswith("bert_model.ckpt.") or name in ("bert_config.json", "vocab.txt")}


def test_the_table_is_the_readme_of_google_research_bert():
  # google-research/bert's README links (checked by hand, 2026): 9 models + 24 small BERTs.
  assert pretrained.url(pretrained.find("bert-base-uncased")) == (
      "https://storage.googleapis.com/bert_models/2018_10_18/uncased_L-12_H-768_A-12.zip")
  assert pretrained.url(pretrained.find("wwm_cased_L-24_H-1024_A-16")) == (
      "https://storage.googleapis.com/bert_models/2019_05_30/wwm_cased_L-24_H-1024_A-16.zip")
  assert pretrained.url(pretrained.find("bert-base-multilingual-cased")) == (
      "https://storage.googleapis.com/bert_models/2018_11_23/multi_cased_L-12_H-768_A-12.zip")
  assert pretrained.url(pretrained.find("Google/BERT_uncased_L-4_H-256_A-4")) == (
      "https://storage.googleapis.com/bert_models/2020_02_20/uncased_L-4_H-256_A-4.zip")
  assert pretrained.find("bert-mini") is pretrained.find("uncased_L-4_H-256_A-4")
  small = [m for m in pretrained.MODELS if m.date == "2020_02_20"]
  assert len(pretrained.MODELS) == 33 and len(small) == 24
  for m in small:  # heads = hidden / 64
    _, layers, hidden, heads = m.name.split("_")
    assert int(heads[2:]) * 64 == int(hidden[2:])
  # The 2020 BERT-Base has Google's name of the 2018 one: the name keeps the 2018 model.
  assert pretrained.find("uncased_L-12_H-768_A-12").date == "2018_10_18"
  assert pretrained.find("google/bert_uncased_L-12_H-768_A-12").date == "2020_02_20"
  assert pretrained.find("bert-base-uncased/") is None and pretrained.find("gpt2") is None


# Hugging Face's hub names of Google's checkpoints (their model cards) and google-research/bert
# README's names of the small BERTs (Tiny 2/128, Mini 4/256, Small 4/512, Medium 8/512).
HUB_NAMES = {
    "bert-base-uncased": "uncased_L-12_H-768_A-12",
    "bert-large-uncased": "uncased_L-24_H-1024_A-16",
    "bert-base-cased": "cased_L-12_H-768_A-12",
    "bert-large-cased": "cased_L-24_H-1024_A-16",
    "bert-large-uncased-whole-word-masking": "wwm_uncased_L-24_H-1024_A-16",
    "bert-large-cased-whole-word-masking": "wwm_cased_L-24_H-1024_A-16",
    "bert-base-multilingual-cased": "multi_cased_L-12_H-768_A-12",
    "bert-base-multilingual-uncased": "multilingual_L-12_H-768_A-12",
    "bert-base-chinese": "chinese_L-12_H-768_A-12",
    "bert-tiny": "uncased_L-2_H-128_A-2",
    "bert-mini": "uncased_L-4_H-256_A-4",
    "bert-small": "uncased_L-4_H-512_A-8",
    "bert-medium": "uncased_L-8_H-512_A-8",
}


def test_familiar_names_are_the_checkpoints_they_name():
  """Each familiar name is Google's checkpoint of that name, and so of its casing (mutation
  audit round 3: bert-base-cased meaning the uncased model went unnoticed)."""
  for alias, name in HUB_NAMES.items():
    spellings = [alias, alias.upper()] + ([f"google-bert/{alias}"]  # (the hub's move)
                                          if "_L-12_" in name or "_L-24_" in name else [])
    for spelled in spellings:
      assert pretrained.find(spelled).name == name, spelled
    cased = name.startswith(("cased_", "wwm_cased_", "multi_cased_"))
    assert pretrained.find(alias).do_lower_case is not cased, alias
  assert not set(pretrained.ALIASES) - set(HUB_NAMES) - {
      a for a in pretrained.ALIASES if a.startswith(("google/", "google-bert/"))}


def test_an_existing_folder_wins_over_a_name(model_mirror, tmp_path, monkeypatch):
  """A user's own folder named like a released model is theirs: resolved as itself, nothing
  downloaded (mutation audit round 3: resolving every known name went unnoticed)."""
  monkeypatch.chdir(tmp_path)
  (tmp_path / "bert-tiny").mkdir()
  assert pretrained.resolve("bert-tiny") == "bert-tiny"
  assert pretrained.resolve_file("bert-tiny", "vocab.txt") == "bert-tiny"
  assert pretrained.resolve_flags("bert-tiny") == ("bert-tiny", None, None)
  assert model_mirror.requests == []


def test_the_scripts_files_given_beside_a_name_are_kept(model_mirror, tmp_path):
  """``--init_checkpoint=NAME`` gives its folder's bert_config.json and vocab.txt only where
  --bert_config_file / --vocab_file are not given (mutation audit round 3: a given config
  replaced by the folder's went unnoticed)."""
  cached = tmp_path / "cache" / "2020_02_20" / "uncased_L-2_H-128_A-2"  # as if downloaded
  cached.mkdir(parents=True)
  for name in ("bert_config.json", "vocab.txt", "bert_model.ckpt.index",
               "bert_model.ckpt.data-00000-of-00001"):
    (cached / name).write_text("")
  checkpoint = str(cached / "bert_model.ckpt")
  assert pretrained.resolve_flags("bert-tiny") == (
      checkpoint, str(cached / "bert_config.json"), str(cached / "vocab.txt"))
  assert pretrained.resolve_flags("bert-tiny", "my/bert_config.json", "my/vocab.txt") == (
      checkpoint, "my/bert_config.json", "my/vocab.txt")
  assert model_mirror.requests == []


def test_load_by_name_equals_load_of_the_folder_and_downloads_once(tiny_google, model_mirror,
                                                                    tmp_path):
  folder, _ = tiny_google
  model_mirror.serve("bert-base-uncased", folder)
  progress = io.StringIO()
  progress.isatty = lambda: True
  cached = pretrained.folder("bert-base-uncased", stream=progress)
  assert cached == str(tmp_path / "cache" / "2018_10_18" / "uncased_L-12_H-768_A-12")
  assert _model_files(cached) == _model_files(folder)
  assert _listing(tmp_path / "cache") == [
      "2018_10_18", "2018_10_18/uncased_L-12_H-768_A-12",
      *[f"2018_10_18/uncased_L-12_H-768_A-12/{n}" for n in sorted(_model_files(folder))]]
  size = len(next(iter(model_mirror.files.values())))
  lines = progress.getvalue().split("\n")
  assert lines[0] == (f"downloading uncased_L-12_H-768_A-12 of {size / 1e6:.1f} MB from "
                      f"{model_mirror.url}/2018_10_18/uncased_L-12_H-768_A-12.zip to "
                      f"{tmp_path / 'cache'}")
  assert lines[1].rsplit("\r", 1)[-1].startswith(f"  {size / 1e6:.1f} MB/{size / 1e6:.1f} MB, ")

  by_name = bert_tf.load("bert-base-uncased")
  by_folder = bert_tf.load(str(folder))
  assert model_mirror.requests == ["/2018_10_18/uncased_L-12_H-768_A-12.zip"]  # once
  assert by_name.do_lower_case and by_name.has_masked_lm and by_name.has_next_sentence
  for a, b in zip(by_name.model.weights, by_folder.model.weights):
    assert a.path == b.path
    np.testing.assert_array_equal(a.numpy(), b.numpy())
  text = FILL_MASK[0][0]
  assert by_name.fill_mask(text) == by_folder.fill_mask(text)
  # Every alias of the same checkpoint is the same folder; no request.
  assert pretrained.resolve("UNCASED_L-12_H-768_A-12") == pretrained.resolve(
      "google-bert/bert-base-uncased") == cached
  assert len(model_mirror.requests) == 1


def test_the_small_berts_zips_have_no_folder(tiny_google, model_mirror):
  folder, _ = tiny_google
  model_mirror.serve("bert-tiny", folder)
  cached = pretrained.folder("google/bert_uncased_L-2_H-128_A-2", stream=io.StringIO())
  assert cached.endswith(os.path.join("2020_02_20", "uncased_L-2_H-128_A-2"))
  assert _model_files(cached) == _model_files(folder)


def test_a_folder_missing_a_file_is_downloaded_again(tiny_google, model_mirror):
  folder, _ = tiny_google
  model_mirror.serve("bert-base-uncased", folder)
  cached = pretrained.folder("bert-base-uncased", stream=io.StringIO())
  os.remove(os.path.join(cached, "vocab.txt"))
  assert pretrained.folder("bert-base-uncased", stream=io.StringIO()) == cached
  assert _model_files(cached) == _model_files(folder) and len(model_mirror.requests) == 2


def test_a_damaged_cached_model_says_where_it_is(tiny_google, model_mirror):
  """A file damaged in the cache after the download: the error says so, and how to mend it
  (it named a checkpoint deep in the cache, unreadable, and no more)."""
  folder, _ = tiny_google
  model_mirror.serve("bert-base-uncased", folder)
  cached = pretrained.folder("bert-base-uncased", stream=io.StringIO())
  with open(os.path.join(cached, "bert_config.json"), "w") as f:
    f.write("{")
  with pytest.raises(bert_tf.BertTfError) as e:
    bert_tf.load("bert-base-uncased")
  assert str(e.value) == (f"{cached}/bert_config.json: not valid JSON (line 1: Expecting "
                          f"property name enclosed in double quotes) (in the download cache: "
                          f"delete {cached} and it is downloaded again)")


def test_a_file_mirror(tiny_google, monkeypatch, tmp_path):
  folder, _ = tiny_google
  (tmp_path / "mirror" / "2018_11_23").mkdir(parents=True)
  (tmp_path / "mirror" / "2018_11_23" / "multi_cased_L-12_H-768_A-12.zip").write_bytes(
      google_zip(folder, "multi_cased_L-12_H-768_A-12"))
  monkeypatch.setenv(pretrained.MIRROR_ENV, (tmp_path / "mirror").as_uri())
  monkeypatch.setenv(pretrained.CACHE_ENV, str(tmp_path / "cache"))
  cached = pretrained.folder("bert-base-multilingual-cased", stream=io.StringIO())
  assert cached == str(tmp_path / "cache" / "2018_11_23" / "multi_cased_L-12_H-768_A-12")
  assert _model_files(cached) == _model_files(folder)


def test_a_cut_download_leaves_nothing_and_the_next_call_succeeds(tiny_google, model_mirror,
                                                                  tmp_path):
  folder, _ = tiny_google
  model = model_mirror.serve("bert-base-uncased", folder)
  model_mirror.mode = "truncate"
  with pytest.raises(bert_tf.BertTfError) as error:
    pretrained.folder("bert-base-uncased", stream=io.StringIO())
  size = len(model_mirror.files[f"/{model.date}/{model.name}.zip"])
  assert str(error.value) == (
      f"cannot download uncased_L-12_H-768_A-12 from {model_mirror.url}/2018_10_18/"
      f"uncased_L-12_H-768_A-12.zip: connection lost after {size // 2} of {size} bytes "
      f"(BERT_TF_MIRROR={model_mirror.url}; or unzip it yourself and pass its folder)")
  assert _listing(tmp_path / "cache") == ["2018_10_18"]
  model_mirror.mode = "whole"
  assert _model_files(pretrained.folder("bert-base-uncased", stream=io.StringIO())) == (
      _model_files(folder))


def test_a_damaged_zip_is_not_extracted(tiny_google, model_mirror, tmp_path):
  folder, _ = tiny_google
  model = model_mirror.serve("bert-base-uncased", folder)
  path = f"/{model.date}/{model.name}.zip"
  body = bytearray(model_mirror.files[path])
  body[len(body) // 3] ^= 0xFF  # inside a member's compressed data: its CRC fails
  model_mirror.files[path] = bytes(body)
  with pytest.raises(bert_tf.BertTfError, match=r"damaged zip|not a whole zip"):
    pretrained.folder("bert-base-uncased", stream=io.StringIO())
  assert _listing(tmp_path / "cache") == ["2018_10_18"]


def _dead_pid():
  gone = subprocess.Popen(["true"])
  gone.wait()
  return gone.pid


def test_a_killed_download_leaves_nothing_whole_and_the_next_call_cleans_up(
    tiny_google, model_mirror, tmp_path):
  folder, _ = tiny_google
  model_mirror.serve("bert-base-uncased", folder)
  parent = tmp_path / "cache" / "2018_10_18"
  model_mirror.mode = "hold"  # half the zip, then the client waits for the rest
  child = subprocess.Popen(
      [sys.executable, "-c", "from bert_tf import pretrained; "
       "pretrained.folder('bert-base-uncased')"],
      env=dict(os.environ, PYTHONPATH=ROOT), stderr=subprocess.PIPE)
  try:
    # The wait ends when the held download's first half is on disk (the server then waits
    # for release(): the state lasts); the deadline only bounds a hang.
    deadline = time.monotonic() + hook.WAIT_S
    partial = []
    while not partial and time.monotonic() < deadline and child.poll() is None:
      partial = [p for p in (parent.iterdir() if parent.exists() else [])
                 if p.name.startswith("uncased_L-12_H-768_A-12.zip.tmp-")
                 and p.stat().st_size > 0]
      time.sleep(0.05)
    assert partial, child.stderr.read().decode() if child.poll() is not None else "no temp"
    child.send_signal(signal.SIGKILL)  # while it waits for the rest of the zip
    child.wait(hook.WAIT_S)
  finally:
    if child.poll() is None:
      child.kill()
    child.stderr.close()
    model_mirror.release()
  # What the kill left: a partial zip under a temporary name; nothing that looks whole.
  assert [p.name for p in parent.iterdir()] == [partial[0].name]
  # A killed extraction's folder (a stopped process's) goes too; a running process's stays.
  stale = parent / f"uncased_L-12_H-768_A-12.tmp-{_dead_pid()}-0123abcd"
  running = parent / f"uncased_L-12_H-768_A-12.tmp-{os.getpid()}-0123abcd"
  for leftover in (stale, running):
    leftover.mkdir()
    (leftover / "bert_config.json").write_text("{}")
  model_mirror.mode = "whole"
  cached = pretrained.folder("bert-base-uncased", stream=io.StringIO())
  assert _model_files(cached) == _model_files(folder)
  assert sorted(p.name for p in parent.iterdir()) == [
      "uncased_L-12_H-768_A-12", running.name]


@pytest.fixture
def refused_port():
  """A port bound by this test and not listening: connections are refused, and the port stays
  the test's (one closed after bind could be taken by another process meanwhile)."""
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    yield s.getsockname()[1]


def test_offline_is_one_line(model_mirror, monkeypatch, capsys, refused_port):
  port = refused_port
  monkeypatch.setenv(pretrained.MIRROR_ENV, f"http://127.0.0.1:{port}")
  address = f"http://127.0.0.1:{port}/2018_10_18/uncased_L-12_H-768_A-12.zip"
  with pytest.raises(bert_tf.BertTfError) as error:
    bert_tf.load("bert-base-uncased")
  message = str(error.value)
  assert "\n" not in message
  assert message.startswith(f"cannot download uncased_L-12_H-768_A-12 from {address}: ")
  assert message.endswith(f"(BERT_TF_MIRROR=http://127.0.0.1:{port}; or unzip it yourself "
                          "and pass its folder)")
  # Without a mirror the message says how to set one. (Google's storage is never reached:
  # the proxy variables point at the closed port.)
  monkeypatch.delenv(pretrained.MIRROR_ENV)
  for proxy in ("https_proxy", "HTTPS_PROXY"):
    monkeypatch.setenv(proxy, f"http://127.0.0.1:{port}")
  with pytest.raises(bert_tf.BertTfError, match=(
      r"^cannot download uncased_L-12_H-768_A-12 from https://storage\.googleapis\.com/"
      r"bert_models/2018_10_18/uncased_L-12_H-768_A-12\.zip: .* \(set BERT_TF_MIRROR to a "
      r"mirror's base URL in place of https://storage\.googleapis\.com/bert_models; or unzip "
      r"it yourself and pass its folder\)$")):
    pretrained.folder("bert-base-uncased")
  # The CLI: one line, exit 1.
  monkeypatch.setenv(pretrained.MIRROR_ENV, f"http://127.0.0.1:{port}")
  assert cli_main(["fill-mask", "--model=bert-base-uncased", "a [MASK] ."]) == 1
  err = capsys.readouterr().err.splitlines()
  assert err[-1].startswith(f"bert_tf fill-mask: error: cannot download uncased_L-12_H-768_A-12 "
                            f"from {address}: ")
  assert not any(line.startswith("Traceback") for line in err)


def test_a_cache_that_cannot_be_written_is_one_line(tiny_google, model_mirror, monkeypatch,
                                                     tmp_path):
  folder, _ = tiny_google
  model_mirror.serve("bert-base-uncased", folder)
  (tmp_path / "a_file").write_text("not a folder")
  monkeypatch.setenv(pretrained.CACHE_ENV, str(tmp_path / "a_file" / "cache"))
  with pytest.raises(bert_tf.BertTfError, match=(
      r"^cannot write uncased_L-12_H-768_A-12 into the cache .*a_file/cache: Not a directory "
      r"\(.*a_file/cache.*; set BERT_TF_CACHE to another folder\)$")):
    pretrained.folder("bert-base-uncased", stream=io.StringIO())
  assert model_mirror.requests == []


def test_the_scripts_casing_is_checked_against_the_name_before_downloading(model_mirror):
  # wwm_cased is not in the original's list of cased checkpoints: its check lets it pass.
  with pytest.raises(bert_tf.BertTfError, match=(
      r"^--do_lower_case=True does not match --init_checkpoint=bert-large-cased-whole-word-"
      r"masking: wwm_cased_L-24_H-1024_A-16 is a cased model, so pass --do_lower_case=False$")):
    pretrained.resolve_flags("bert-large-cased-whole-word-masking", do_lower_case=True)
  with pytest.raises(bert_tf.BertTfError, match=r"is a lowercased model, so pass "
                     r"--do_lower_case=True$"):
    pretrained.resolve_flags("google/bert_uncased_L-2_H-128_A-2", do_lower_case=False)
  assert model_mirror.requests == []


def test_unknown_names_get_suggestions(model_mirror, tmp_path, monkeypatch):
  with pytest.raises(bert_tf.BertTfError, match=(
      r"^model not found: 'bert-base-uncasd' \(no such folder or checkpoint, nor a released "
      r"model's name \(did you mean bert-base-uncased, ")):
    bert_tf.load("bert-base-uncasd")
  # A missing folder under an existing one is a path, not a name (it was offered names).
  (tmp_path / "out").mkdir()
  monkeypatch.chdir(tmp_path)
  with pytest.raises(bert_tf.BertTfError) as e:
    bert_tf.load("out/google")
  assert str(e.value) == "model not found: 'out/google'"
  assert model_mirror.requests == []


def test_the_cli_and_the_scripts_take_names(tiny_google, model_mirror, tmp_path, capsys):
  folder, _ = tiny_google
  model_mirror.serve("bert-base-uncased", folder)
  # The CLI's --model (through bert_tf.load) and --vocab_file.
  assert cli_main(["fill-mask", "--model=bert-base-uncased", "--vocab_file=bert-base-uncased",
                   "--json", FILL_MASK[0][0]]) == 0
  by_name = json.loads(capsys.readouterr().out)
  assert cli_main(["fill-mask", f"--model={folder}", "--json", FILL_MASK[0][0]]) == 0
  assert by_name == json.loads(capsys.readouterr().out)
  # A script's --init_checkpoint by name (config and vocab from the same folder) writes what
  # the library writes from the folder's files.
  (tmp_path / "input.txt").write_text("the cat sat on the mat .\nhe walked ||| to the park\n")
  done = subprocess.run(
      [sys.executable, os.path.join(ROOT, "extract_features.py"),
       f"--input_file={tmp_path / 'input.txt'}", f"--output_file={tmp_path / 'name.jsonl'}",
       "--layers=-1,-2", "--max_seq_length=16", "--init_checkpoint=bert-base-uncased"],
      env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True, text=True, timeout=600,
      check=False)
  assert done.returncode == 0, done.stderr
  model = BertModel(checkpoints.load_config(str(folder / "bert_config.json")))
  checkpoints.load_weights(model, str(folder / "bert_model.ckpt"))
  tokenizer = tokenization.FullTokenizer(str(folder / "vocab.txt"), do_lower_case=True)
  extract.extract_features(model, tokenizer, str(tmp_path / "input.txt"),
                           str(tmp_path / "folder.jsonl"), layers="-1,-2", max_seq_length=16,
                           batch_size=32)
  by_name = (tmp_path / "name.jsonl").read_text()
  assert by_name == (tmp_path / "folder.jsonl").read_text() and by_name.count("\n") == 2
  assert len(model_mirror.requests) == 1  # the CLI's download served the script too


def test_create_pretraining_data_takes_a_name_for_its_vocab(tiny_google, model_mirror,
                                                            tmp_path):
  folder, _ = tiny_google
  model_mirror.serve("bert-base-uncased", folder)
  (tmp_path / "corpus.txt").write_text(
      "the cat sat on the mat .\nthe dog ran to the park .\n\n"
      "he walked to the store .\nhe bought milk .\nit was in paris .\n")
  outputs = {}
  for how, vocab in (("name", "bert-base-uncased"), ("file", str(folder / "vocab.txt"))):
    done = subprocess.run(
        [sys.executable, os.path.join(ROOT, "data_prep", "create_pretraining_data.py"),
         f"--input_file={tmp_path / 'corpus.txt'}", f"--output_file={tmp_path / how}.tfrecord",
         f"--vocab_file={vocab}", "--max_seq_length=32", "--max_predictions_per_seq=5",
         "--dupe_factor=2", "--random_seed=7"],
        env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True, text=True, timeout=600,
        check=False)
    assert done.returncode == 0, done.stderr
    outputs[how] = (tmp_path / f"{how}.tfrecord").read_bytes()
  assert outputs["name"] == outputs["file"] and outputs["name"]
  assert len(model_mirror.requests) == 1
