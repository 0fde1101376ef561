"""The progress line: hand-computed rate and ETA on a fake terminal; nothing off a terminal."""

import io

from bert_tf import progress


class _Terminal(io.StringIO):

  def isatty(self):
    return True


def _ticks(*times):
  it = iter(times)
  return lambda: next(it)


def test_rate_and_eta_on_a_terminal():
  stream = _Terminal()
  # Start at t=0; the 4 items finish at t=1, 2, 2.2, 4 (the 3rd is within min_interval).
  items = list(progress.track("abcd", 4, "batches", stream=stream, min_interval=0.5,
                              clock=_ticks(0.0, 1.0, 2.0, 2.2, 4.0)))
  assert items == list("abcd")
  assert stream.getvalue() == ("\rbatches 1/4, 1.0/s, ETA 0:00:03"   # 3 left at 1/s
                               "\rbatches 2/4, 1.0/s, ETA 0:00:02"
                               "\rbatches 4/4, 1.0/s, ETA 0:00:00\n")


def test_long_eta_is_hours_minutes_seconds():
  stream = _Terminal()
  list(progress.track(range(10001), 10001, "batches", stream=stream, min_interval=0.5,
                      clock=_ticks(0.0, 1.0, *[1.1] * 10000)))
  assert stream.getvalue().startswith("\rbatches 1/10001, 1.0/s, ETA 2:46:40")  # 10000 s


def test_nothing_when_not_a_terminal_or_a_single_batch():
  stream = io.StringIO()
  assert list(progress.track(range(5), 5, stream=stream)) == list(range(5))
  assert stream.getvalue() == ""
  terminal = _Terminal()
  assert list(progress.track(range(1), 1, stream=terminal)) == [0]
  assert terminal.getvalue() == ""


def test_unknown_total_shows_count_and_rate_only():
  stream = _Terminal()
  items = list(progress.track(iter("abc"), None, "eval batches", stream=stream,
                              min_interval=0.5, clock=_ticks(0.0, 2.0, 4.0, 6.0)))
  assert items == list("abc")
  assert stream.getvalue() == ("\reval batches 1, 0.5/s\reval batches 2, 0.5/s"
                               "\reval batches 3, 0.5/s\n")


def test_the_last_count_shows_even_within_the_interval():
  stream = _Terminal()
  list(progress.track(iter("ab"), None, "eval batches", stream=stream, min_interval=0.5,
                      clock=_ticks(0.0, 2.0, 2.1)))
  assert stream.getvalue() == "\reval batches 1, 0.5/s\reval batches 2, 1.0/s\n"  # 2 / 2.1 s
