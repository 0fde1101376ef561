"""A progress line with ETA for long loops (embedding, feature extraction, eval, predict), on
stderr.

Written only when stderr is a terminal (a log file or a pipe gets nothing), rewritten in place
with ``\\r`` at most every ``min_interval`` seconds and ended with a newline, so that it never
mixes with what a command prints on stdout.
"""

import sys
import time


def log_line(line):
  """What a library run (``run_classifier``...) does with its lines when its caller passed
  no ``progress``: warnings and notes (``warning: ... is damaged, resuming from ...``,
  ``note: ...``) as absl warnings, which a notebook or a program shows; the rest (step lines)
  as INFO. (They were dropped: a damaged checkpoint skipped without a word.)"""
  from absl import logging  # pylint: disable=import-outside-toplevel
  if line.startswith(("warning", "note")):
    logging.warning("%s", line)
  else:
    logging.info("%s", line)


def _clock(seconds):
  seconds = int(round(seconds))
  return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def track(iterable, total, what="batches", *, stream=None, min_interval=0.5, clock=None):
  """Yields ``iterable``'s items, reporting ``what done/total, rate/s, ETA h:mm:ss``.

  Args:
    iterable: the loop's items (``total`` of them).
    total: how many items, or None when unknown (then ``what done, rate/s``, no ETA).
    what: the unit shown (``"batches"``).
    stream: where to write (default ``sys.stderr``); nothing is written unless it is a TTY.
    min_interval: seconds between two rewrites of the line (the last one always shows).
    clock: a ``time.monotonic``-like function (tests).
  """
  stream = stream if stream is not None else sys.stderr
  isatty = getattr(stream, "isatty", None)
  if (total is not None and total <= 1) or not (isatty and isatty()):
    yield from iterable
    return
  clock = clock or time.monotonic
  start = last = latest = clock()
  done = shown = 0

  def show(now):
    elapsed = now - start
    rate = done / elapsed if elapsed > 0 else 0.0
    if total is None:
      stream.write(f"\r{what} {done}, {rate:.1f}/s")
    else:
      eta = (total - done) / rate if rate > 0 else 0.0
      stream.write(f"\r{what} {done}/{total}, {rate:.1f}/s, ETA {_clock(eta)}")
    stream.flush()

  try:
    for item in iterable:
      yield item
      done += 1
      now = latest = clock()
      if now - last >= min_interval or done == total:
        last, shown = now, done
        show(now)
  finally:
    if done:
      if shown != done:  # the last count (a loop of unknown length, or one cut short)
        show(latest)
      stream.write("\n")
      stream.flush()
