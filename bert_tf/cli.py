"""Shared plumbing for the absl scripts: one-line errors, no traceback for user mistakes.

Library code never reads absl FLAGS; each script parses its flags and calls the library.
"""

import os
import sys

from bert_tf import quiet

# TensorFlow's C++ start-up chatter (CUDA probing, CPU features) and INFO lines are noise for a
# script's user: silenced before TensorFlow is imported, unless --verbosity/-v asks for them.
quiet.setup()

from absl import app  # pylint: disable=wrong-import-position

from bert_tf.errors import BertTfError


def run(main):
  """``absl.app.run`` with ``BertTfError`` printed as ``prog: error: message`` and exit 1,
  Ctrl-C as ``prog: interrupted`` and exit 130."""

  def _main(argv):
    try:
      return main(argv)
    except BertTfError as e:
      prog = os.path.basename(sys.argv[0]) if sys.argv else "bert_tf"
      print(f"{prog}: error: {e}", file=sys.stderr)
      sys.exit(1)
    except KeyboardInterrupt:
      # Ctrl-C: no traceback. Outputs are written under temporary names, so none is half-written.
      prog = os.path.basename(sys.argv[0]) if sys.argv else "bert_tf"
      print(f"{prog}: interrupted", file=sys.stderr)
      sys.exit(130)

  app.run(_main)
