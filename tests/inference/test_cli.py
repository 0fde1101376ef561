"""``python -m bert_tf`` subcommands, run in-process (one run as a real subprocess), checked
against Google's outputs (tiny model with heads) and against the tested Python API."""

import json
import os
import shutil
import re
import subprocess
import sys

import numpy as np
import pytest

from bert_tf.__main__ import main
from tests.inference.conftest import FILL_MASK, NEXT_SENTENCE
from tests.inference.test_heads import TOL, _check_candidates
from bert_tf import visualize
from tests.inference.test_visualize import _embedded_data, png_pixels, png_size

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(capsys, *argv):
  status = main(list(argv))
  captured = capsys.readouterr()
  return status, captured.out, captured.err


def test_fill_mask(tiny_google, capsys):
  folder, reference = tiny_google
  status, out, _ = _run(capsys, "fill-mask", f"--model={folder}", "--top_k=3", "--json",
                        FILL_MASK[0][0], FILL_MASK[1][0])
  assert status == 0
  rows = [json.loads(line) for line in out.splitlines()]
  assert [r["text"] for r in rows] == [FILL_MASK[0][0], FILL_MASK[1][0]]
  for row, probs in zip(rows, reference["mask_probs"]):
    assert len(row["masks"]) == len(probs)
    for candidates, row_probs in zip(row["masks"], probs):
      _check_candidates(candidates, row_probs, 3)
  status, out, _ = _run(capsys, "fill-mask", f"--model={folder}", "--top_k=2", FILL_MASK[0][0])
  lines = out.splitlines()
  assert status == 0 and lines[0] == FILL_MASK[0][0] and len(lines) == 3
  best = max(range(len(reference["mask_probs"][0][0])),
             key=lambda i: reference["mask_probs"][0][0][i])
  assert lines[1].split()[0] == f"{reference['mask_probs'][0][0][best]:.4f}"


def test_next_sentence(tiny_google, capsys, tmp_path):
  folder, reference = tiny_google
  lines = [f"{a} ||| {b}" for (a, b), _, _ in NEXT_SENTENCE]
  (tmp_path / "pairs.txt").write_text("\n".join(lines) + "\n")
  status, out, _ = _run(capsys, "next-sentence", f"--model={folder}", "--json",
                        f"--input_file={tmp_path / 'pairs.txt'}")
  assert status == 0
  rows = [json.loads(line) for line in out.splitlines()]
  assert [(r["text_a"], r["text_b"]) for r in rows] == [p for p, _, _ in NEXT_SENTENCE]
  np.testing.assert_allclose([r["is_next_probability"] for r in rows], reference["is_next"],
                             atol=TOL)
  status, out, _ = _run(capsys, "next-sentence", f"--model={folder}", *NEXT_SENTENCE[1][0])
  assert status == 0 and out.startswith(f"{reference['is_next'][1]:.4f}  ")


def test_attention_html_and_png(tiny_google, tiny_bert, capsys, tmp_path):
  folder, _ = tiny_google
  html, png = tmp_path / "a.html", tmp_path / "a.png"
  status, out, _ = _run(capsys, "attention", f"--model={folder}", "The cat sat on the mat.",
                        "He walked.", f"--output_html={html}", f"--output_png={png}",
                        "--dpi=30")
  assert status == 0 and str(html) in out and str(png) in out
  expected = tiny_bert(("The cat sat on the mat.", "He walked."), output_attentions=True)
  tokens = expected.tokens[0]
  page = html.read_text()
  data = _embedded_data(page)
  assert data["tokens"] == tokens
  assert (data["layers"], data["heads"]) == (2, 4)
  # The pair's sentence B starts after the first [SEP] (the view's sentence filter).
  assert data["sentence_b_start"] == tokens.index("[SEP]") + 1 < len(tokens)
  assert '<select class="btv-filter">' in page
  np.testing.assert_allclose(data["attention"], np.stack(expected.attentions)[:, 0], atol=6e-6)
  for token in tokens:
    assert f"<code>{token}</code>" in page
  # The PNG is the library's picture of the same weights (to the colour of a pixel).
  reference = tmp_path / "reference.png"
  visualize.attention_heatmaps_png(tokens, np.stack(expected.attentions)[:, 0], str(reference),
                                   dpi=30)
  assert png_size(png) == png_size(reference)
  np.testing.assert_allclose(png_pixels(png), png_pixels(reference), atol=1.5 / 255)


def test_embed_outputs_and_word_sense_plot(minilm_bert, minilm_path, capsys, tmp_path,
                                           monkeypatch):
  from bert_tf.visualize import png  # pylint: disable=import-outside-toplevel
  figures, png_bytes = [], png.png_bytes
  monkeypatch.setattr(png, "png_bytes", lambda f: figures.append(f) or png_bytes(f))
  lines = ["river\tHe sat on the bank of the river.",
           "river\tThe river bank was muddy.",
           "money\tShe deposited cash at the bank.",
           "money\tThe bank raised its interest rates."]
  (tmp_path / "senses.txt").write_text("\n".join(lines) + "\n")
  texts = [line.split("\t")[1] for line in lines]
  npy, plot = tmp_path / "bank.npy", tmp_path / "bank.png"
  status, out, _ = _run(capsys, "embed", f"--model={minilm_path}", "--word=bank",
                        "--layers=-4,-3,-2,-1", "--combine=sum",
                        f"--input_file={tmp_path / 'senses.txt'}", f"--output_file={npy}",
                        f"--plot={plot}", "--dpi=50")
  assert status == 0, out
  expected = minilm_bert.embed_words(texts, "bank", layers=[-4, -3, -2, -1], combine="sum")
  np.testing.assert_allclose(np.load(npy), expected, atol=TOL)
  assert png_size(plot) == (400, 300)  # 8 x 6 inches at 50 dpi.
  # Labels cut around the word ("She deposited cash at..." would hide it).
  labels = [t.get_text() for t in figures[0].axes[0].texts]
  assert sorted(labels) == sorted(visualize.shorten_around(t, "bank", 24) for t in texts)
  assert "...ted cash at the bank." in labels and all("bank" in label for label in labels)
  # The same plot as HTML: one point per text, its text on hover (its <title>), grouped.
  page = tmp_path / "bank.html"
  status, out, _ = _run(capsys, "embed", f"--model={minilm_path}", "--word=bank",
                        f"--input_file={tmp_path / 'senses.txt'}", f"--plot={page}")
  assert status == 0 and out == f"wrote {page}\n"
  circles = re.findall(r'data-label="([^"]*)" data-group="([^"]*)" data-x=', page.read_text())
  assert circles == [(t, line.split("\t")[0]) for t, line in zip(texts, lines)]


def test_embed_json_lines(tiny_google, tiny_bert, capsys, tmp_path):
  folder, _ = tiny_google
  texts = ["the cat sat on the mat.", "he bought milk."]
  jsonl = tmp_path / "e.jsonl"
  status, out, _ = _run(capsys, "embed", f"--model={folder}", "--pooling=last2_concat",
                        f"--output_file={jsonl}", *texts)
  assert status == 0 and out == f"wrote 2 embeddings of size 64 to {jsonl}\n"
  rows = [json.loads(line) for line in jsonl.read_text().splitlines()]
  assert [(r["index"], r["text"]) for r in rows] == list(enumerate(texts))
  np.testing.assert_allclose([r["embedding"] for r in rows],
                             tiny_bert.embed(texts, pooling="last2_concat"), atol=1e-6)


@pytest.mark.parametrize("argv,line", [
    (["fill-mask", "--model=m", "--top_k=abc", "a [MASK]"],
     "bert_tf fill-mask: error: argument --top_k: invalid int value: 'abc'"),
    (["fill-mask", "a [MASK]"],
     "bert_tf fill-mask: error: the following arguments are required: --model"),
    (["embed", "--model=", "--output_file=x.npy", "hi"],  # was "--output_file is --model"
     "bert_tf embed: error: --model is empty: give a model folder, checkpoint or released "
     "model's name"),
    (["tokenize", "--model=m"], "bert_tf: error: argument COMMAND: invalid choice: 'tokenize' "
                                "(choose from 'fill-mask', 'next-sentence', 'embed', 'classify', "
                                "'tag', 'attention', 'export-hf', 'export-google')"),
])
def test_command_line_mistakes_are_one_line_and_status_1(capsys, argv, line, tmp_path,
                                                         monkeypatch):
  """As the module promises (argparse printed its usage block and exited 2)."""
  monkeypatch.chdir(tmp_path)
  (tmp_path / "x.npy").write_bytes(b"")
  try:
    status = main(argv)
  except SystemExit as e:
    status = e.code
  assert status == 1 and capsys.readouterr().err == line + "\n"


@pytest.mark.parametrize("argv,needle", [
    (["fill-mask", "Paris is the [MASK] of France."],
     "bert_tf fill-mask: error: fill_mask: {model} has no masked-LM head"),
    (["embed", "some text"], "bert_tf embed: error: embed: give --output_file"),
    (["embed", "--output_file=x.txt", "a"], "expected a .npy, .jsonl or .json name"),
    (["embed", "--plot=x.svg", "a"], "--plot x.svg: expected a .png or .html name"),
    (["next-sentence", "only one"], "bert_tf next-sentence: error: expected TEXT_A TEXT_B"),
    # Both inputs: one would be ignored (the TEXT arguments were, unnoticed).
    (["embed", "--input_file=texts.txt", "--output_file=e.npy", "a"],
     "bert_tf embed: error: give TEXT arguments or --input_file, not both"),
    (["attention", "a b"], "bert_tf attention: error: attention: give --output_html"),
    (["fill-mask", "--input_file=/nonexistent.txt"],
     "input file not found (--input_file): '/nonexistent.txt'"),
    # Checked before the model loads and anything is written (--dpi=0 failed after the .npy
    # with a traceback; --max_seq_length=0 meant the default).
    (["embed", "--output_file=e.npy", "--plot=p.png", "--dpi=0", "a", "b"],
     "--dpi must be at least 1, got 0"),
    (["attention", "--output_png=a.png", "--cell_inches=-1", "a b"],
     "--cell_inches must be a positive number, got -1.0"),
    (["embed", "--output_file=e.npy", "--max_seq_length=0", "a"],
     "--max_seq_length must be at least 3, got 0"),
    (["embed", "--output_file=e.npy", "--plot=p.html", "a"],
     "--plot: a PCA picture needs at least 2 texts, got 1"),
])
def test_errors_are_one_line(minilm_path, capsys, argv, needle, tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  status, _, err = _run(capsys, argv[0], f"--model={minilm_path}", *argv[1:])
  assert status == 1
  assert needle.format(model=minilm_path) in err and err.count("\n") == 1
  assert os.listdir(tmp_path) == []


def test_attention_writes_both_pictures_or_neither(tiny_google, capsys, tmp_path):
  """--layers beyond the model's 2 layers fails the PNG: no HTML is left behind either."""
  folder, _ = tiny_google
  html, png = tmp_path / "a.html", tmp_path / "a.png"
  status, out, err = _run(capsys, "attention", f"--model={folder}", "The cat sat.",
                          f"--output_html={html}", f"--output_png={png}", "--layers=5")
  assert status == 1 and out == ""
  assert err.startswith("bert_tf attention: error: ") and err.count("\n") == 1
  assert sorted(os.listdir(tmp_path)) == []


def test_attention_layers_and_heads_choose_the_html_too(tiny_google, tiny_bert, capsys,
                                                        tmp_path):
  """--layers/--heads choose the HTML's layers and heads as the PNG's (the HTML ignored them,
  so a typo passed silently when only --output_html was given): the page holds the chosen
  weights under the model's numbers, and a layer or head out of range is one line, no file."""
  folder, _ = tiny_google
  html = tmp_path / "a.html"
  status, _, _ = _run(capsys, "attention", f"--model={folder}", "The cat sat on the mat.",
                      f"--output_html={html}", "--layers=-1", "--heads=3,1")
  assert status == 0
  expected = np.stack(tiny_bert("The cat sat on the mat.", output_attentions=True).attentions)
  data = _embedded_data(html.read_text())
  assert (data["layers"], data["heads"]) == (1, 2)
  assert (data["layer_labels"], data["head_labels"]) == ([1], [3, 1])
  np.testing.assert_allclose(data["attention"], expected[[1]][:, 0][:, [3, 1]], atol=6e-6)
  for flag, what, count in (("--layers=0,2", "layer 2", 2), ("--heads=-5", "head -5", 4)):
    status, out, err = _run(capsys, "attention", f"--model={folder}", "The cat sat.",
                            f"--output_html={tmp_path / 'b.html'}", flag)
    assert (status, out) == (1, "")
    assert err == (f"bert_tf attention: error: {what} is out of range (the model has "
                   f"{count})\n")
    assert not (tmp_path / "b.html").exists()


def test_a_long_text_in_an_error_is_cut(tiny_google, capsys):
  """fill-mask of a 3,500-character text whose [MASK] truncation removed: the one-line error
  quotes the text's start and end and its length, not the whole text."""
  folder, _ = tiny_google
  text = " ".join(["word"] * 700) + " [MASK]"
  status, _, err = _run(capsys, "fill-mask", f"--model={folder}", text)
  assert status == 1 and err.count("\n") == 1
  assert err == ("bert_tf fill-mask: error: fill_mask: no [MASK] in 'word word word word word "
                 "word word word word word  ... ord word word word [MASK]' (3506 characters) "
                 "(after truncation)\n")


@pytest.mark.parametrize("argv", [
    ["attention", "--output_png=a.png", "text"],
    ["embed", "--plot=p.png", "text"],
])
def test_missing_matplotlib_is_reported_before_the_model_loads(capsys, tmp_path, monkeypatch,
                                                                argv):
  monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
  # The model does not exist: the error is matplotlib's, so nothing was loaded first.
  status, _, err = _run(capsys, argv[0], f"--model={tmp_path / 'missing'}", *argv[1:])
  assert status == 1
  assert err == (f"bert_tf {argv[0]}: error: PNG pictures need matplotlib: pip install "
                 "'bert_tf[plots]' (or pip install matplotlib)\n")


def test_module_entry_point_prints_one_line_error(tmp_path):
  result = subprocess.run([sys.executable, "-m", "bert_tf", "embed",
                           f"--model={tmp_path / 'missing'}", "--output_file=x.npy", "hello"],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
  assert result.returncode == 1
  # TensorFlow's own start-up lines may come first; ours is the last and only one.
  assert result.stderr.splitlines()[-1] == (
      f"bert_tf embed: error: model not found: '{tmp_path / 'missing'}'")
  assert "Traceback" not in result.stderr
  assert sum("error:" in line for line in result.stderr.splitlines()) == 1


def test_last_k_pooling_beyond_the_model_says_what_the_user_typed(tiny_google, tmp_path,
                                                                   capsys):
  """last4_mean on a 2-layer model: the message names the flag as typed and the model's
  depth (not the -4 index it expands to); last2_mean on the same model works."""
  folder, _ = tiny_google
  status, _, err = _run(capsys, "embed", f"--model={folder}", "--pooling=last4_mean",
                        f"--output_file={tmp_path / 'e.npy'}", "a cat.")
  assert status == 1
  assert err == ("bert_tf embed: error: pooling=last4_mean needs 4 layers; this model has "
                 "2\n")
  assert not (tmp_path / "e.npy").exists()
  status, _, _ = _run(capsys, "embed", f"--model={folder}", "--pooling=last2_mean",
                      f"--output_file={tmp_path / 'e.npy'}", "a cat.")
  assert status == 0 and (tmp_path / "e.npy").exists()


def test_last_zero_pooling_names_the_flag(tiny_google, tmp_path, capsys):
  """last0_mean chooses no layer: the message names the pooling as typed (it said "layers: no
  layer given", a flag the user never gave)."""
  folder, _ = tiny_google
  status, _, err = _run(capsys, "embed", f"--model={folder}", "--pooling=last0_mean",
                        f"--output_file={tmp_path / 'e.npy'}", "a cat.")
  assert status == 1
  assert err == ("bert_tf embed: error: pooling='last0_mean': K in lastK_mean must be at "
                 "least 1\n")
  assert not (tmp_path / "e.npy").exists()


def test_a_folder_a_training_run_holds_is_named_with_the_checkpoint_used(tiny_google, capsys,
                                                                        tmp_path):
  """Its weights are the last checkpoint so far, not the finished model's (it was silent)."""
  from bert_tf import run_lock  # pylint: disable=import-outside-toplevel
  folder, _ = tiny_google
  busy = tmp_path / "training"
  shutil.copytree(folder, busy)
  assert run_lock.running_holder(str(busy)) is None
  lock = run_lock.OutputDirLock(str(busy))  # as a training run holds it
  try:
    holder = run_lock.running_holder(str(busy))
    assert holder.startswith(f"pid {os.getpid()} on ")
    status, out, err = _run(capsys, "fill-mask", f"--model={busy}", "the [MASK] sat.")
    assert status == 0 and out
    assert err == (f"bert_tf: note: {busy} is in use by a training run ({holder}): this is its "
                   f"last checkpoint so far, {busy / 'bert_model.ckpt'}\n")
  finally:
    lock.release()
  assert run_lock.running_holder(str(busy)) is None
  status, _, err = _run(capsys, "fill-mask", f"--model={busy}", "the [MASK] sat.")
  assert status == 0 and err == ""
