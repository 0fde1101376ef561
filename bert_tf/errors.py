"""The one exception type for user mistakes.

A ``BertTfError`` means bad input: a missing file, a wrong flag, a config that does not fit a
checkpoint. Scripts print its message on one line and exit non-zero, with no traceback
(see ``bert_tf.cli``). Bugs stay ordinary exceptions, with their tracebacks.
"""


class BertTfError(Exception):
  """A user-facing error whose message names the file, line, flag or variable at fault."""



def shortened(text, limit=80):
  """``text`` cut in the middle to at most ``limit`` characters (" ... " where it was cut)."""
  text = str(text)
  if len(text) <= limit:
    return text
  head = (limit - 5) * 2 // 3
  return f"{text[:head]} ... {text[len(text) - (limit - 5 - head):]}"


def quoted(value, limit=80):
  """``repr(value)`` for an error message; a longer text (a user's whole document in a one-line
  error is no longer one line) cut in the middle, with its length."""
  text = repr(value)
  if len(text) <= limit:
    return text
  if isinstance(value, str):
    return f"{shortened(value, limit)!r} ({len(value)} characters)"
  return shortened(text, limit)
