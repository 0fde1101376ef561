"""The one exception type for user mistakes.

A ``BertTfError`` means bad input: a missing file, a wrong flag, a config that does not fit a
checkpoint. Scripts print its message on one line and exit non-zero, with no traceback
(see ``bert_tf.cli``). Bugs stay ordinary exceptions, with their tracebacks.
"""


class BertTfError(Exception):
  """A user-facing error whose message names the file, line, flag or variable at fault."""
