"""Shared plumbing for the absl scripts: one-line errors, no traceback for user mistakes.

Library code never reads absl FLAGS; each script parses its flags and calls the library.
"""

import os
import re
import signal
import sys

from bert_tf import quiet

# TensorFlow's C++ start-up chatter (CUDA probing, CPU features) and INFO lines are noise for a
# script's user: silenced before TensorFlow is imported, unless --verbosity/-v asks for them.
quiet.setup()

from absl import app  # pylint: disable=wrong-import-position
from absl import flags  # pylint: disable=wrong-import-position

from bert_tf import flag_ranges  # pylint: disable=wrong-import-position

from bert_tf.errors import BertTfError, environment_error, shortened


# --preserve_unused_tokens, as each script that tokenizes defines it (the original's flag,
# which its tokenization.py defined for every script importing it).
PRESERVE_UNUSED_TOKENS_HELP = (
    "Keep a word of the text that is exactly [unusedN] (and in the vocab) as one token, not "
    "split into pieces: the original's flag, for data that marks things with unused tokens. "
    "The SavedModels' in-graph tokenizer does not do it.")


def _prog():
  return os.path.basename(sys.argv[0]) if sys.argv else "bert_tf"


# Exit statuses of a stop by signal: 128 + the signal's number, as a shell reports a process
# that the signal killed.
_STOPS = {signal.SIGINT: ("interrupted", 130), signal.SIGTERM: ("terminated", 143)}


class Terminated(KeyboardInterrupt):
  """SIGTERM (a preemption, ``kill``) in a script that unwinds: raised where the process is,
  like Ctrl-C's ``KeyboardInterrupt``, so the same cleanup runs."""


def _in_interactive_shell():
  """True inside IPython or a Jupyter kernel (a script run with ``%run``): the process is the
  user's session, which a handler that exits would end."""
  ipython = sys.modules.get("IPython")
  get_ipython = getattr(ipython, "get_ipython", None)
  return bool(get_ipython and get_ipython() is not None)


def stop_at_once_on_ctrl_c(prog=None):
  """Ctrl-C (SIGINT) and SIGTERM end the process where it is: ``prog: interrupted`` and exit
  130, or ``prog: terminated`` and exit 143, no unwinding. ``prog`` defaults to the script's
  name.

  A ``KeyboardInterrupt`` lands between any two Python bytecodes, TensorFlow's own included:
  raised inside one of its context managers (a device scope half exited during a checkpoint
  save, seen in tests) it leaves TensorFlow's state half changed, and what then unwinds fails
  with another error's traceback, or the interpreter crashes at exit. Stopping at once loses
  nothing a SIGKILL would not: outputs are written under temporary names and renamed when
  whole, TensorFlow writes checkpoints the same way, and the same command resumes from the
  last checkpoint and removes a killed run's leftovers (``tests/faults/``).

  Inside IPython or a Jupyter kernel (``%run run_classifier.py ...``) nothing is installed:
  the process is the user's session (the notebook's Stop button ended the kernel and every
  variable); Ctrl-C is a ``KeyboardInterrupt`` there, and the same command resumes.
  """
  if _in_interactive_shell():
    return
  prog = prog or _prog()
  lines = {signum: f"{prog}: {word}\n".encode() for signum, (word, _) in _STOPS.items()}

  def handler(signum, frame):  # pylint: disable=unused-argument
    try:
      sys.stdout.flush()
    except Exception:  # pylint: disable=broad-except  # e.g. interrupted inside a print
      pass
    os.write(2, lines[signum])
    os._exit(_STOPS[signum][1])  # pylint: disable=protected-access

  for signum in _STOPS:
    signal.signal(signum, handler)


def _raise_terminated(signum, frame):  # pylint: disable=unused-argument
  raise Terminated()


# absl's help flags; absl itself lists only the flags of the script's own module (none for an
# installed console script, whose main module is pip's wrapper) and exits with status 1.
_HELP = ("--help", "-help", "-h", "-?", "--helpshort", "--helpfull", "--helpxml")


def help_text(main, full=False):
  """The script's docstring and every flag it takes (its own, then bert_tf's shared ones):
  what ``--help`` prints. ``full`` adds absl's and TensorFlow's (``--helpfull``)."""
  from absl import flags  # pylint: disable=import-outside-toplevel
  module = sys.modules.get(main.__module__)
  lines = [((module.__doc__ or "") if module else "").rstrip(), "", "flags:"]
  by_module = flags.FLAGS.flags_by_module_dict()
  ours = [name for name in by_module if not name.startswith(("absl.", "tensorflow."))]
  ours.sort(key=lambda name: name.startswith("bert_tf."))  # The script's own first.
  others = [name for name in by_module if name not in ours] if full else []
  for name in ours + others:
    lines += ["", flags.FLAGS.module_help(name)]
  return "\n".join(lines).lstrip("\n") + "\n"


def _help_asked(argv):
  before_end = argv[1:argv.index("--")] if "--" in argv else argv[1:]
  asked = [a.split("=", 1)[0] for a in before_end if a.split("=", 1)[0] in _HELP]
  return asked[0] if asked else None


def run(main, ctrl_c_stops_at_once=False, before_tensorflow=None, positional_args=False):
  """``absl.app.run`` with ``BertTfError`` printed as ``prog: error: message`` and exit 1,
  Ctrl-C as ``prog: interrupted`` and exit 130, SIGTERM as ``prog: terminated`` and exit 143:
  by ``KeyboardInterrupt`` (``Terminated`` for SIGTERM; cleanup code runs), or with
  ``ctrl_c_stops_at_once`` at once (the TensorFlow scripts; see ``stop_at_once_on_ctrl_c``).
  ``before_tensorflow(FLAGS)``, if given, runs before TensorFlow starts (see
  ``_before_tensorflow``). Arguments that are not flags are a one-line error (a glob given as
  ``--input_file data/*.tfrecord`` is expanded by the shell: only the first file would be
  read) unless ``positional_args``: then ``main`` gets them in ``argv[1:]``."""

  def _main(argv):
    if ctrl_c_stops_at_once:
      stop_at_once_on_ctrl_c()
    elif not _in_interactive_shell():  # (a shell's SIGTERM stays the shell's)
      signal.signal(signal.SIGTERM, _raise_terminated)
    try:
      flag_ranges.check(flags.FLAGS)  # nan, inf, negative rates...: one line, before anything
      if len(argv) > 1 and not positional_args:
        extra = shortened(" ".join(argv[1:]), 200)
        raise BertTfError(
            f"unexpected arguments {extra!r}: every input is a flag, --name=value (quote a "
            "glob, --input_file='data/*.tfrecord', or the shell expands it into several "
            "arguments)")
      return main(argv)
    except BertTfError as e:
      print(f"{_prog()}: error: {e}", file=sys.stderr)
      sys.exit(1)
    except Exception as e:  # pylint: disable=broad-except
      line = environment_error(e)  # a full disk, a read-only folder: one line, no traceback
      if line is None:
        raise
      print(f"{_prog()}: error: {line}", file=sys.stderr)
      sys.exit(1)
    except KeyboardInterrupt as e:
      # No traceback. Outputs are written under temporary names, so none is half-written.
      word, code = _STOPS[signal.SIGTERM if isinstance(e, Terminated) else signal.SIGINT]
      print(f"{_prog()}: {word}", file=sys.stderr)
      sys.exit(code)

  asked = _help_asked(sys.argv)
  if asked and asked != "--helpxml":
    sys.stdout.write(help_text(main, full=asked == "--helpfull"))
    sys.exit(0)
  if before_tensorflow is not None:
    _before_tensorflow(before_tensorflow)
  app.run(_main, flags_parser=_parse_flags)


_REQUIRED = re.compile(r"flag --(\w+)=None: Flag --\1 must have a value other than None\.")


def _flag_error(error):
  """absl's message for a command line that does not parse, said as the scripts' one line: a
  missing required flag as ``--name is required``; several problems joined by "; "."""
  lines = [line.strip() for line in str(error).splitlines() if line.strip()]
  lines = [f"--{m.group(1)} is required" if (m := _REQUIRED.fullmatch(line)) else line
           for line in lines]
  return "; ".join(lines) or type(error).__name__


def _own_flags(flag_values):
  """The flags of bert_tf's scripts (those that called ``define_flags_anew``) and of bert_tf's
  modules: not absl's, TensorFlow's or a user's own (a notebook's)."""
  return [flag for module, module_flags in flag_values.flags_by_module_dict().items()
          if module.startswith("bert_tf.") or _script_file(_defining_file(module))
          for flag in module_flags]


# The scripts' files that called define_flags_anew in this process.
_SCRIPT_FILES = []
# absl records a __main__ script's flags under its sys.argv[0] as typed: -> its absolute path
# (a relative one names another file once the working folder changed).
_MAIN_KEYS = {}


def _defining_file(module):
  """The file of ``module``, a key of absl's ``flags_by_module_dict``: an imported module's
  name, or a __main__ script's sys.argv[0]."""
  return (_MAIN_KEYS.get(module) or getattr(sys.modules.get(module), "__file__", None)
          or module)


def _script_file(path):
  """``path``'s entry of ``_SCRIPT_FILES`` (the same file), or None."""
  for known in _SCRIPT_FILES:
    try:
      if path and os.path.samefile(path, known):
        return known
    except OSError:
      pass
  return None


def define_flags_anew(module_globals, replacing=()):
  """Call at the top of a script, before its ``flags.DEFINE_*``: scripts run one after another
  in one process (a notebook's ``%run run_classifier.py ...``, again, or then ``%run
  run_squad.py ...``; absl's flag registry is the process's) define their flags anew instead
  of failing with absl's ``DuplicateFlagError`` (``The flag 'data_dir' is defined twice``).

  The flags of the scripts that ran before are removed, except those of the scripts this one
  imported (run_classifier_with_tfhub takes run_classifier's; removed by a script run
  between, they are defined again). A user's own flags stay. ``replacing``: names of bert_tf's
  shared flags the script defines its own way (extract_features' --use_tpu), removed too. In a
  new process nothing is defined yet: nothing changes."""
  import importlib  # pylint: disable=import-outside-toplevel
  import types  # pylint: disable=import-outside-toplevel
  this_file = module_globals.get("__file__")
  if this_file and not _script_file(this_file):
    _SCRIPT_FILES.append(this_file)
  imported = [m for m in module_globals.values()
              if isinstance(m, types.ModuleType) and _script_file(getattr(m, "__file__", None))]
  kept = {m.__name__ for m in imported}
  fv = flags.FLAGS
  by_module = fv.flags_by_module_dict()
  for module, module_flags in list(by_module.items()):
    if module in kept or not _script_file(_defining_file(module)):
      continue
    for flag in list(module_flags):
      for name in {flag.name, flag.short_name} - {None}:
        if name in fv and fv[name] is flag:
          delattr(fv, name)
  for name in replacing:
    if name in fv and fv.find_module_defining_flag(name, "").startswith("bert_tf."):
      delattr(fv, name)
  if module_globals.get("__name__") == "__main__" and sys.argv and sys.argv[0]:
    _MAIN_KEYS[sys.argv[0]] = os.path.abspath(sys.argv[0])
  for module in imported:
    if module.__name__ not in by_module:  # its flags removed by a script run in between
      importlib.reload(module)


def _parse_flags(argv):
  """``app.run``'s flag parser: a mistyped or missing flag, or a value of the wrong kind, is
  ``prog: error: message`` and exit 1 (absl printed a FATAL line and a hint, two lines).

  The script's and bert_tf's flags start from their defaults, as in a new process: a script
  run again in one (``%run`` in a notebook) took the flags the earlier run was given and this
  one leaves out (a second ``%run run_classifier.py --do_eval`` kept the first one's
  ``--init_checkpoint``, ``--learning_rate``...)."""
  for flag in _own_flags(flags.FLAGS):
    flag.unparse()
  try:
    return flags.FLAGS(argv)
  except flags.Error as e:
    print(f"{_prog()}: error: {_flag_error(e)}", file=sys.stderr)
    sys.exit(1)


def _before_tensorflow(function):
  """Calls ``function(FLAGS)`` with the command line's flags before ``app.run`` starts
  TensorFlow's runtime (TensorFlow's ``distribute.combinations``, imported with it, registers
  an absl init callback that counts the GPUs), for settings TensorFlow reads once at its start,
  such as TF_XLA_FLAGS. A command line that does not parse is left to ``app.run`` to name; the
  flags are unparsed again after the call."""
  fv = flags.FLAGS
  try:
    fv(sys.argv, known_only=True)
  except flags.Error:
    return
  try:
    function(fv)
  except BertTfError as e:
    print(f"{_prog()}: error: {e}", file=sys.stderr)
    sys.exit(1)
  finally:  # (ours only: a notebook's own flags keep their values)
    for flag in _own_flags(fv):
      flag.unparse()


def resolve_model_flags(flag_values, required=()):
  """Resolves released model names in a script's ``--init_checkpoint``, ``--bert_config_file``
  and ``--vocab_file`` (``bert_tf.pretrained.resolve_flags``: ``--init_checkpoint=bert-base-
  uncased`` is the cached checkpoint, and the other two default to its folder's files), then
  checks that the ``required`` ones of the three are given."""
  from bert_tf import pretrained  # pylint: disable=import-outside-toplevel
  v = flag_values
  v.init_checkpoint, v.bert_config_file, v.vocab_file = pretrained.resolve_flags(
      v.init_checkpoint, v.bert_config_file, v.vocab_file,
      v.do_lower_case if "do_lower_case" in v else None)
  for name in required:
    if not v[name].value:
      raise BertTfError(f"--{name} is required (or --init_checkpoint=NAME of a released model, "
                        "e.g. bert-base-uncased, which brings its config and vocab)")
