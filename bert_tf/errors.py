"""The one exception type for user mistakes.

A ``BertTfError`` means bad input: a missing file, a wrong flag, a config that does not fit a
checkpoint. Scripts print its message on one line and exit non-zero, with no traceback
(see ``bert_tf.cli``). Bugs stay ordinary exceptions, with their tracebacks.
"""


import errno
import re


class BertTfError(Exception):
  """A user-facing error whose message names the file, line, flag or variable at fault."""


# The machine's state, not a bug: a full disk or quota, a read-only or forbidden folder.
_ENVIRONMENT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM,
                       errno.EFBIG}
_ENVIRONMENT_TEXTS = ("No space left on device", "Disk quota exceeded",
                      "Read-only file system", "Permission denied")
# A path of a remote file system TensorFlow reads (a bucket of the TPU flag files, say).
_REMOTE_PATH = re.compile(r"\b(?:gs|s3|hdfs)://[^\s'\"]+")


def environment_error(error):
  """The one line to print for an exception that is the machine's state, not a bug (a full
  disk met while writing an output, a folder made read-only meanwhile), or None: an
  ``OSError`` of such an errno (naming its file), or TensorFlow's file-system error of that
  kind (its message's first line). The scripts print it as a user mistake: no traceback."""
  if isinstance(error, OSError) and error.errno in _ENVIRONMENT_ERRNOS:
    from bert_tf import fileio  # pylint: disable=import-outside-toplevel  # (it imports this)
    # The output's name, not its temporary one.
    where = f"{fileio.output_name(error.filename)}: " if error.filename else ""
    return f"{where}{error.strerror or error}"
  if (type(error).__module__.startswith("tensorflow") and
      type(error).__name__ in ("ResourceExhaustedError", "PermissionDeniedError")):
    first = str(getattr(error, "message", error)).strip().splitlines()
    if first and any(text in first[0] for text in _ENVIRONMENT_TEXTS):
      return first[0]
  if (type(error).__module__.startswith("tensorflow") and type(error).__name__ in (
      "FailedPreconditionError", "UnavailableError", "PermissionDeniedError",
      "UnauthenticatedError", "DeadlineExceededError", "AbortedError")):
    # A bucket that cannot be reached (no network, no credentials, a placeholder name):
    # TensorFlow's first line says why, a later one names the path.
    text = str(getattr(error, "message", error)).strip()
    path = _REMOTE_PATH.search(text)
    if path:
      first = text.splitlines()[0]
      return first if path.group(0) in first else f"{path.group(0)}: {first}"
  return None



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
