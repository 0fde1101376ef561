"""``python -m bert_tf`` (or ``bert_tf``): use a trained BERT from the command line.

  bert_tf fill-mask --model=DIR "Paris is the most [MASK] city."
  bert_tf next-sentence --model=DIR "I went to the store." "I bought milk."
  bert_tf embed --model=DIR --input_file=lines.txt --pooling=last4_mean \
      --output_file=emb.npy --plot=pca.png
  bert_tf embed --model=DIR --input_file=senses.txt --word=bank --plot=bank.png
  bert_tf embed --model=DIR --input_file=lines.txt --plot=pca.html   # hover a point to read it
  bert_tf attention --model=DIR "The cat sat." --output_html=heads.html --output_png=heads.png
  bert_tf export-hf --model=bert-base-uncased --output_dir=bert-base-uncased-hf
  bert_tf export-google --model=pretraining_output/ckpt-20000 --output_dir=bert-20000
  bert_tf classify --model=DIR "Lowest rates - act now" "Re: the build script"  # fine-tuned
  bert_tf tag --model=DIR "Joel Grus lives in Seattle ."   # fine-tuned by run_ner.py

``--model`` is a folder in Google, bert_tf or Hugging Face layout, or a released model's name
(``bert-base-uncased``: downloaded once; see ``bert_tf.load``).
``--input_file`` has one text per line; ``a ||| b`` makes a pair; for ``embed``, a line
``group<TAB>text`` puts the text in a colour group of the PCA plot. Mistakes print one line,
``bert_tf <command>: error: ...``, and exit 1.
"""

import argparse
import glob
import io
import json
import math
import os
import sys

import numpy as np

from bert_tf import quiet

# As in bert_tf.cli: TensorFlow's C++ start-up chatter and INFO lines are noise for the user
# (--verbosity=N brings them back).
quiet.setup()

from bert_tf.errors import (  # noqa: E402  pylint: disable=wrong-import-position
    BertTfError, environment_error)

PROG = "bert_tf"


def _bool(value):
  lowered = str(value).lower()
  if lowered in ("true", "1", "yes"):
    return True
  if lowered in ("false", "0", "no"):
    return False
  raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def _int_list(value):
  try:
    return [int(x) for x in value.split(",") if x.strip()]
  except ValueError:
    raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {value!r}") \
        from None


def _layer_list(value):
  """``--layers`` of embed: encoder layer indexes and/or ``embeddings``."""
  try:
    return [x.strip() if x.strip() == "embeddings" else int(x)
            for x in value.split(",") if x.strip()]
  except ValueError:
    raise argparse.ArgumentTypeError(
        f"expected comma-separated layer indexes (or 'embeddings'), got {value!r}") from None


class _OneLineParser(argparse.ArgumentParser):
  """Command-line mistakes are one line and exit status 1, as every other mistake here (not
  argparse's usage block and status 2). ``--help`` still shows the usage."""

  def error(self, message):
    self.exit(1, f"{self.prog}: error: {message}\n")


def _parser():
  parser = _OneLineParser(prog=PROG, description=__doc__.split("\n")[0])
  commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

  common = argparse.ArgumentParser(add_help=False)
  common.add_argument("--model", required=True,
                      help="Model folder (Google, bert_tf or Hugging Face layout), checkpoint, "
                      "or a released model's name (bert-base-uncased, ...).")
  common.add_argument("--bert_config_file", default=None,
                      help="bert_config.json / config.json, if not in the model folder.")
  common.add_argument("--vocab_file", default=None, help="vocab.txt, if not in the folder.")
  common.add_argument("--do_lower_case", type=_bool, default=None,
                      help="true/false; default: learned from the model folder.")
  common.add_argument("--max_seq_length", type=int, default=None,
                      help="Longest input in word pieces (default: the model's limit).")
  common.add_argument("--batch_size", type=int, default=32)
  common.add_argument("--verbosity", "-v", "--v", type=int, default=None,
                      help="Show TensorFlow's and bert_tf's log lines (absl levels: 0 = INFO, "
                           "1 = also debug); quiet without it.")

  texts = argparse.ArgumentParser(add_help=False)
  texts.add_argument("--input_file", default=None,
                     help="One text per line ('a ||| b' for a pair) instead of TEXT arguments.")

  fill = commands.add_parser("fill-mask", parents=[common, texts],
                             help="Most likely words at each [MASK].")
  fill.add_argument("text", nargs="*", metavar="TEXT")
  fill.add_argument("--top_k", type=int, default=5)
  fill.add_argument("--json", action="store_true", help="Print JSON lines.")

  nsp = commands.add_parser("next-sentence", parents=[common, texts],
                            help="Probability that sentence B follows sentence A.")
  nsp.add_argument("text", nargs="*", metavar="TEXT", help="TEXT_A TEXT_B")
  nsp.add_argument("--json", action="store_true", help="Print JSON lines.")

  embed = commands.add_parser("embed", parents=[common, texts],
                              help="One vector per text (or per word) to .npy / JSON lines.")
  embed.add_argument("text", nargs="*", metavar="TEXT")
  embed.add_argument("--pooling", default="cls",
                     help="cls, mean, max, pooler, or lastK_mean / lastK_concat / lastK_sum.")
  embed.add_argument("--layers", type=_layer_list, default=None,
                     help="Encoder layers, as extract_features.py's --layers: -1 = the last "
                     "(default), 0 = the first; 'embeddings' = the embedding output. E.g. "
                     "-4,-3,-2,-1.")
  embed.add_argument("--combine", default=None, help="mean, sum or concat (several layers).")
  embed.add_argument("--word", default=None,
                     help="Embed this word of every text (its pieces averaged) instead.")
  embed.add_argument("--output_file", default=None, help="*.npy, or *.jsonl / *.json lines.")
  embed.add_argument("--plot", default=None,
                     help="Write a 2-D PCA scatter plot: *.png (matplotlib), or *.html "
                     "(interactive: hover a point to read its text; no network).")
  embed.add_argument("--labels", default="short", choices=("none", "short", "all"),
                     help="PNG plot: which points get their text beside them: short (default: "
                     "at most 12, spread out, cut to 24 characters), all, or none.")
  embed.add_argument("--dpi", type=int, default=100)

  classify = commands.add_parser(
      "classify", parents=[common, texts],
      help="Label of each text by a model fine-tuned with run_classifier.py.")
  classify.add_argument("text", nargs="*", metavar="TEXT")
  classify.add_argument("--json", action="store_true",
                        help="Print JSON lines (label, probability, probabilities, logits).")

  tag = commands.add_parser(
      "tag", parents=[common, texts],
      help="Tag of each word (named entities, ...) by a model fine-tuned with run_ner.py.")
  tag.add_argument("text", nargs="*", metavar="TEXT")
  tag.add_argument("--split", default="basic", choices=("basic", "whitespace"),
                   help="Words: as the basic tokenizer cuts (punctuation apart; default), or "
                   "at whitespace only.")
  tag.add_argument("--json", action="store_true",
                   help="Print JSON lines (words, tags, entities).")

  att = commands.add_parser("attention", parents=[common],
                            help="HTML head view and PNG heatmaps of one text's attention.")
  att.add_argument("text", nargs="+", metavar="TEXT", help="TEXT_A [TEXT_B]")
  att.add_argument("--output_html", default=None,
                   help="Self-contained HTML: head view and model view (each layer x head).")
  att.add_argument("--output_png", default=None,
                   help="PNG grid of heatmaps (layers x heads); too many tokens for one readable "
                   "picture: several files, <stem>-layersA-B-headsC-D.png.")
  att.add_argument("--layers", type=_int_list, default=None,
                   help="Layers shown, in the HTML and the PNG (default all; -1 = the last).")
  att.add_argument("--heads", type=_int_list, default=None,
                   help="Heads shown, in the HTML and the PNG (default all).")
  att.add_argument("--cell_inches", type=float, default=None,
                   help="Side of one PNG heatmap (default: grows with the token count).")
  att.add_argument("--dpi", type=int, default=100)

  for command, help_text, files in (
      ("export-hf", "Write the model as a Hugging Face folder (transformers).",
       "model.safetensors, config.json, vocab.txt, tokenizer_config.json, "
       "special_tokens_map.json"),
      ("export-google", "Write the model (e.g. a training run's ckpt-N) in Google's layout, "
       "for Google's own code.",
       "bert_model.ckpt (Google's names), bert_config.json, vocab.txt; a fine-tuned folder's "
       "classifier.json or token_classifier.json")):
    export = commands.add_parser(command, parents=[common], help=help_text)
    export.add_argument("--output_dir", required=True, help=f"New or empty folder: {files}.")
    export.add_argument("--overwrite", action="store_true",
                        help="Replace a previous export at --output_dir (nothing else).")
  return parser


def _read_items(args, pairs_from_arguments=False):
  """``[(text_a, text_b or None)]`` and groups (or None) from TEXT arguments or --input_file."""
  if args.input_file and args.text:
    raise BertTfError("give TEXT arguments or --input_file, not both")
  if args.input_file:
    from bert_tf.extract import read_examples  # pylint: disable=import-outside-toplevel
    examples = read_examples(args.input_file)
    items = [(e.text_a, e.text_b) for e in examples]
    if not items:
      raise BertTfError(f"--input_file {args.input_file} is empty")
    return items
  if not args.text:
    raise BertTfError("no text given (TEXT arguments or --input_file)")
  if pairs_from_arguments:
    if len(args.text) != 2:
      raise BertTfError(f"expected TEXT_A TEXT_B, got {len(args.text)} texts")
    return [tuple(args.text)]
  return [(t, None) for t in args.text]


def _split_groups(items):
  """Lines ``group<TAB>text`` -> (items without the groups, groups); else (items, None)."""
  if not all("\t" in a for a, _ in items):
    return items, None
  groups = [a.split("\t", 1)[0] for a, _ in items]
  return [(a.split("\t", 1)[1], b) for a, b in items], groups


def _as_input(items):
  return [a if b is None else (a, b) for a, b in items]


def _load(args):
  from bert_tf import run_lock  # pylint: disable=import-outside-toplevel
  from bert_tf.inference import load  # pylint: disable=import-outside-toplevel
  try:
    bert = load(args.model, config_file=args.bert_config_file, vocab_file=args.vocab_file,
                do_lower_case=args.do_lower_case, max_seq_length=args.max_seq_length,
                batch_size=args.batch_size)
  except BertTfError as e:
    # The library names its argument (do_lower_case=False); the user typed the flag.
    if args.do_lower_case is not None and str(e).startswith("do_lower_case="):
      raise BertTfError(str(e).replace("do_lower_case=", "--do_lower_case=")) from None
    raise
  holder = os.path.isdir(args.model) and run_lock.running_holder(args.model)
  if holder:  # Its weights are those of the checkpoint saved last, not the finished model's.
    print(f"{PROG}: note: {args.model} is in use by a training run ({holder}): this is its "
          f"last checkpoint so far, {bert.load_report.source}", file=sys.stderr)
  return bert


def _fill_mask(args, out):
  items = _read_items(args)
  bert = _load(args)
  results = bert.fill_mask(_as_input(items), top_k=args.top_k)
  for (a, b), result in zip(items, results):
    per_mask = [result] if result and isinstance(result[0], dict) else result
    if args.json:
      out.write(json.dumps({"text": a, **({"text_b": b} if b else {}),
                            "masks": per_mask}, ensure_ascii=False) + "\n")
      continue
    out.write(f"{a}" + (f" ||| {b}" if b else "") + "\n")
    for m, candidates in enumerate(per_mask):
      if len(per_mask) > 1:
        out.write(f"  [MASK] #{m + 1}\n")
      for c in candidates:
        out.write(f"  {c['probability']:.4f}  {c['token']:<15} {c['sequence']}\n")


def _next_sentence(args, out):
  items = _read_items(args, pairs_from_arguments=True)
  if any(b is None for _, b in items):
    raise BertTfError("next-sentence needs pairs: 'a ||| b' lines in --input_file")
  bert = _load(args)
  probabilities = bert.next_sentence([a for a, _ in items], [b for _, b in items])
  for (a, b), p in zip(items, probabilities):
    if args.json:
      out.write(json.dumps({"text_a": a, "text_b": b, "is_next_probability": float(p)},
                           ensure_ascii=False) + "\n")
    else:
      out.write(f"{p:.4f}  {a} ||| {b}\n")


def _embed(args, out):
  from bert_tf import fileio, visualize  # pylint: disable=import-outside-toplevel
  items, groups = _split_groups(_read_items(args))
  if not (args.output_file or args.plot):
    raise BertTfError("embed: give --output_file (.npy or .jsonl) and/or --plot (.png or .html)")
  if args.plot and not args.plot.endswith((".png", ".html")):
    raise BertTfError(f"--plot {args.plot}: expected a .png or .html name")
  if args.plot and args.plot.endswith(".png"):
    visualize.require_matplotlib()  # Before the model runs.
  if args.output_file and not args.output_file.endswith((".npy", ".jsonl", ".json")):
    raise BertTfError(f"--output_file {args.output_file}: expected a .npy, .jsonl or .json name")
  if args.word is not None and any(b is not None for _, b in items):
    raise BertTfError("--word works on single texts, not 'a ||| b' pairs")
  if args.plot and len(items) < 2:  # Before anything is written: both outputs or neither.
    raise BertTfError(f"--plot: a PCA picture needs at least 2 texts, got {len(items)}")
  bert = _load(args)
  if args.word is not None:
    vectors = bert.embed_words([a for a, _ in items], args.word, layers=args.layers,
                               combine=args.combine)
  else:
    vectors = bert.embed(_as_input(items), pooling=args.pooling, layers=args.layers,
                         combine=args.combine)
  # Both outputs or neither, the earlier ones as they were until both are whole: made in
  # memory, then written together (fileio.write_together).
  files = {}
  if args.output_file and args.output_file.endswith(".npy"):
    buffer = io.BytesIO()
    np.save(buffer, vectors)
    files[args.output_file] = buffer.getvalue()
  elif args.output_file:
    rows = []
    for i, ((a, b), vector) in enumerate(zip(items, vectors)):
      row = {"index": i, "text": a}
      if b is not None:
        row["text_b"] = b
      if groups:
        row["group"] = groups[i]
      if args.word is not None:
        row["word"] = args.word
      row["embedding"] = [round(float(x), 6) for x in vector]
      rows.append(json.dumps(row, ensure_ascii=False) + "\n")
    files[args.output_file] = "".join(rows)
  if args.plot:
    what = f"'{args.word}'" if args.word is not None else f"{args.pooling} embeddings"
    texts = [a if b is None else f"{a} ||| {b}" for a, b in items]
    if args.plot.endswith(".html"):
      files[args.plot] = visualize.pca_scatter_html(vectors, texts, title=f"PCA of {what}",
                                                    groups=groups)
    else:
      from bert_tf.visualize.png import png_bytes  # pylint: disable=import-outside-toplevel
      files[args.plot] = png_bytes(visualize.pca_scatter_figure(
          vectors, texts, title=f"PCA of {what}", dpi=args.dpi, groups=groups,
          label_mode=args.labels, focus=args.word))
  fileio.write_together(files)
  if args.output_file:
    out.write(f"wrote {len(vectors)} embeddings of size {vectors.shape[1]} to "
              f"{args.output_file}\n")
  if args.plot:
    out.write(f"wrote {args.plot}\n")


def _classify(args, out):
  items = _read_items(args)
  bert = _load(args)
  results = bert.classify(_as_input(items))
  for (a, b), result in zip(items, results):
    if args.json:
      out.write(json.dumps({"text": a, **({"text_b": b} if b else {}), **result},
                           ensure_ascii=False) + "\n")
    elif "score" in result:
      out.write(f"{result['score']:.4f}  {a}" + (f" ||| {b}" if b else "") + "\n")
    elif "labels" in result:  # multi-label: every label above 0.5, "-" for none
      names = ",".join(f"{name}:{result['probabilities'][name]:.4f}"
                       for name in result["labels"]) or "-"
      out.write(f"{names}  {a}" + (f" ||| {b}" if b else "") + "\n")
    else:
      out.write(f"{result['label']}  {result['probability']:.4f}  {a}"
                + (f" ||| {b}" if b else "") + "\n")


def _tag(args, out):
  items = _read_items(args)
  if any(b is not None for _, b in items):
    raise BertTfError("tag takes single texts, not 'a ||| b' pairs")
  bert = _load(args)
  for (text, _), result in zip(items, bert.tag([a for a, _ in items], split=args.split)):
    if args.json:
      out.write(json.dumps({"text": text, **result}, ensure_ascii=False) + "\n")
    else:
      out.write(" ".join(f"{w}/{t}" for w, t in zip(result["words"], result["tags"])) + "\n")


def _attention(args, out):
  from bert_tf import fileio, visualize  # pylint: disable=import-outside-toplevel
  if len(args.text) > 2:
    raise BertTfError(f"attention takes one text or a pair, got {len(args.text)} texts")
  if not (args.output_html or args.output_png):
    raise BertTfError("attention: give --output_html and/or --output_png")
  if args.output_png:
    visualize.require_matplotlib()  # Before the model runs.
  bert = _load(args)
  text = tuple(args.text) if len(args.text) == 2 else args.text[0]
  result = bert(text, output_attentions=True)
  tokens = result.tokens[0]
  attentions = np.stack(result.attentions)[:, 0, :, :len(tokens), :len(tokens)]  # [L,N,S,S]
  # A pair: sentence B starts at the first token of segment 1 (the view's sentence filter).
  sentence_b_start = int(np.argmax(result.input_type_ids[0])) if len(args.text) == 2 else None
  # Both pictures or neither, the earlier ones as they were until both are whole: the HTML is
  # made in memory and written together with the PNG file(s) (fileio.write_together).
  html = {}
  if args.output_html:
    html[args.output_html] = visualize.head_view_html(
        tokens, attentions, title=f"Attention: {' ||| '.join(args.text)}",
        sentence_b_start=sentence_b_start, layers=args.layers, heads=args.heads)
  if args.output_png:
    # Several files when the grid is split to keep its token labels readable.
    written = visualize.attention_heatmaps_png(
        tokens, attentions, args.output_png, layers=args.layers, heads=args.heads,
        cell_inches=args.cell_inches, dpi=args.dpi, also=html) + list(html)
  else:
    written = fileio.write_together(html)
  for path in written:
    out.write(f"wrote {path}\n")


def _export(args, out):
  """export-hf and export-google: the output folder checked before the model loads (it may be
  a download), then the export."""
  from bert_tf.export import google, hugging_face  # pylint: disable=import-outside-toplevel
  if args.command == "export-google":
    check, export = google.check_output_dir, google.export_google
  else:
    check, export = hugging_face.check_output_dir, hugging_face.export_hugging_face
  check(args.output_dir, args.overwrite, args.model, "--output_dir")  # before loading
  bert = _load(args)
  notes = {}
  if args.command == "export-google":  # (on stderr as a note, not as an absl warning too)
    notes["progress"] = lambda note: print(f"{PROG}: note: {note}", file=sys.stderr)
  export(bert, args.output_dir, overwrite=args.overwrite, **notes)
  out.write(f"wrote {args.output_dir}\n")


def _check_paths(args):
  """No output over an input (the --model folder's files included), outputs that can be
  written, a --batch_size that makes batches: one line each, before the model loads."""
  from bert_tf import paths  # pylint: disable=import-outside-toplevel
  from bert_tf.training import preflight  # pylint: disable=import-outside-toplevel
  if not args.model.strip():
    raise BertTfError("--model is empty: give a model folder, checkpoint or released model's "
                      "name")
  preflight.check_at_least({"--batch_size": (args.batch_size, 1)})
  # Before the model loads and anything is written (a bad --dpi failed after the .npy).
  if args.max_seq_length is not None:
    preflight.check_at_least({"--max_seq_length": (args.max_seq_length, 3)})
  if getattr(args, "dpi", None) is not None:
    preflight.check_at_least({"--dpi": (args.dpi, 1)})
  inches = getattr(args, "cell_inches", None)
  if inches is not None and not (math.isfinite(inches) and inches > 0):
    raise BertTfError(f"--cell_inches must be a positive number, got {inches}")
  model = [args.model] + sorted(glob.glob(os.path.join(glob.escape(args.model), "*")
                                          if os.path.isdir(args.model)
                                          else glob.escape(args.model) + "*"))
  paths.check_paths(
      inputs={"--input_file": getattr(args, "input_file", None), "--model": model,
              "--vocab_file": args.vocab_file, "--bert_config_file": args.bert_config_file},
      outputs={f"--{name}": getattr(args, name, None)
               for name in ("output_file", "plot", "output_html", "output_png")})


_COMMANDS = {"fill-mask": _fill_mask, "next-sentence": _next_sentence, "embed": _embed,
             "attention": _attention, "export-hf": _export, "export-google": _export,
             "classify": _classify, "tag": _tag}


def main(argv=None, out=None):
  """Runs one subcommand; returns the exit status (0, or 1 after a one-line error)."""
  args = _parser().parse_args(argv)
  if args.verbosity is not None:
    from absl import logging  # pylint: disable=import-outside-toplevel
    logging.set_verbosity(args.verbosity)
  try:
    _check_paths(args)
    _COMMANDS[args.command](args, out or sys.stdout)
  except BertTfError as e:
    print(f"{PROG} {args.command}: error: {e}", file=sys.stderr)
    return 1
  except Exception as e:  # pylint: disable=broad-except
    line = environment_error(e)  # a full disk, a read-only folder: one line, no traceback
    if line is None:
      raise
    print(f"{PROG} {args.command}: error: {line}", file=sys.stderr)
    return 1
  return 0


def console_main():
  from bert_tf import cli  # pylint: disable=import-outside-toplevel
  cli.stop_at_once_on_ctrl_c(PROG)  # outputs are atomic: nothing half-written is left
  sys.exit(main())


if __name__ == "__main__":
  console_main()
