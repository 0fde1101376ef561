"""The whole job: input files -> TFRecord files, in this process or in worker processes.

Mirrors ``main`` of Google's create_pretraining_data.py (validate, read, make instances, write)
and adds sharded mode; the stages are ``corpus`` -> ``instances`` -> ``records``, and this
module is the only one that knows about processes.

Reference mode (``num_workers=0``) gives the original's records exactly: one corpus, one
generator seeded with ``random_seed``. Sharded mode (``num_workers >= 1``): the input is cut
into shards (each file, large files split at document boundaries into pieces of about
``shard_size_mb``), and each shard is a small corpus of its own, processed by one of
``num_workers`` processes with its own generator seeded with ``f"{random_seed}/{shard index}"``:
documents do not cross files and random next sentences come from the same shard. Record i of a
shard goes to output file ``i % len(output_files)``: each worker writes each file's share,
framed (and compressed with ``gzip``: GZIP members), to a temporary file beside the outputs,
and the parent appends those to the outputs in shard order (a copy in the kernel), so the
parent does almost no work. Memory is bounded by a few shards, not the corpus. The output is
deterministic for a given seed and shard size (and independent of the number of workers) but
not the reference output.
"""

import collections
import contextlib
import logging
import multiprocessing
import os
import signal
import sys
import tempfile
import time

from bert_tf import faults, fileio
from bert_tf.data import tfrecord
from bert_tf.data.pretraining.corpus import LineTokenizer, expand_input_files, iter_lines
from bert_tf.data.pretraining.instances import InstanceOptions, records_from_text, special_token_ids
from bert_tf.data.pretraining.records import RoundRobinWriter, write_joined
from bert_tf.data.pretraining.summary import Summary
from bert_tf.errors import BertTfError

logger = logging.getLogger(__name__)


def plan_shards(input_files, shard_bytes):
  """Cuts the input into shards: (path, start, end) byte ranges that hold whole documents.

  A file up to ``shard_bytes`` is one shard; a larger one is cut at the first document
  boundary (just after a blank line) at or after every ``shard_bytes``. Depends only on the
  files and ``shard_bytes``, never on the number of workers.
  """
  shards = []
  for path in input_files:
    size = fileio.file_size(path)
    start = 0
    while size - start > shard_bytes:
      cut = _document_boundary(path, start + shard_bytes, size)
      if cut is None:
        break
      shards.append((path, start, cut))
      start = cut
    shards.append((path, start, None))
  return shards


def _document_boundary(path, offset, size):
  """The byte after the first blank line that ends at or after ``offset``, or None."""
  for line_start, raw in iter_lines(path, offset, size):
    if line_start < offset:  # Skip the line ``offset`` falls in.
      continue
    try:
      blank = not raw.decode("utf-8").strip()
    except UnicodeDecodeError:
      blank = False
    if blank:
      # The next line starts after this one's "\n" (and any "\r" that readline dropped).
      with fileio.open_file(path, "rb") as f:
        f.seek(line_start)
        rest = f.read(min(size - line_start, 1 << 16))
      newline = rest.find(b"\n")
      if newline < 0:
        return None
      cut = line_start + newline + 1
      return cut if cut < size else None
  return None


_WORKER = {}


def _exit_with_parent(parent_pid):
  """A worker dies with its parent (Linux: ``PR_SET_PDEATHSIG``), silently: left alone, a
  worker of a killed parent finished its shard and printed a BrokenPipeError traceback sending
  it back. Exits now if the parent is already gone."""
  try:
    import ctypes  # pylint: disable=import-outside-toplevel
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
  except (OSError, AttributeError):  # not Linux: the check below only
    pass
  if os.getppid() != parent_pid:
    os._exit(0)  # pylint: disable=protected-access


def _init_worker(parent_pid, *config):
  """A pool worker's start: dies with its parent, leaves signals to it, then takes ``config``
  (``_set_worker_state``)."""
  _exit_with_parent(parent_pid)
  # The parent alone answers Ctrl-C and SIGTERM (one line, its cleanup), and then ends the
  # workers with SIGTERM (``Pool.terminate``): a Ctrl-C to the whole process group must not
  # raise in each worker (a traceback each), nor SIGTERM unwind one (the parent's handler,
  # inherited by the fork).
  signal.signal(signal.SIGINT, signal.SIG_IGN)
  signal.signal(signal.SIGTERM, signal.SIG_DFL)
  _set_worker_state(*config)


def _set_worker_state(tokenizer, options, skip_invalid_utf8, shards, vocab_file, spill_dir,
                      num_outputs, gzip):
  """What ``_shard_records`` reads, in this worker process (a pool's or a Beam runner's)."""
  _WORKER.update(tokenizer=tokenizer, options=options, skip=skip_invalid_utf8, shards=shards,
                 vocab_file=vocab_file, line_tokenizer=LineTokenizer(tokenizer),
                 spill_dir=spill_dir, num_outputs=num_outputs, gzip=gzip)


def _shard_records(shard_index):
  """Worker: makes one shard's records, with its own generator, and writes them out for the
  parent to append: record i goes to output file ``i % num_outputs``, each file's share framed
  (and GZIP-compressed with ``gzip``) end to end in a file of ``spill_dir``.

  Returns (those files, their record counts, summary). Framing, compressing and writing here
  keep the work off the parent, which only appends files: sending the records back through a
  pipe made the parent the bottleneck (receiving and writing them cost it about an eighth of
  all the workers' work, and compressing them would cost more than all of it).
  """
  faults.point("shard_start")
  options = _WORKER["options"]
  summary = Summary(shards=1)
  path, start, end = _WORKER["shards"][shard_index]
  records = records_from_text([(path, start, end)], _WORKER["line_tokenizer"],
                              _WORKER["tokenizer"].vocab, options, summary,
                              f"{options.random_seed}/{shard_index}", _WORKER["skip"],
                              _WORKER["vocab_file"])
  paths, counts = [], []
  num_outputs = _WORKER["num_outputs"]
  for k in range(num_outputs):
    share = records[k::num_outputs]
    paths.append(os.path.join(_WORKER["spill_dir"], f"shard-{shard_index}-{k}.records"))
    counts.append(len(share))
    writer = tfrecord.TFRecordWriter(paths[-1], _WORKER["gzip"])
    write_joined(writer, share)
    writer.close()
  summary.peak_rss_mb = _peak_rss_mb()
  return paths, counts, summary


def _peak_rss_mb():
  """Peak resident memory of this process in MB (0 where ``resource`` is unavailable)."""
  try:
    import resource  # pylint: disable=import-outside-toplevel
  except ImportError:
    return 0.0
  rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
  return rss / (1 << 20) if sys.platform == "darwin" else rss / 1024


# --- the whole job -------------------------------------------------------------------------------

def create_pretraining_data(input_files, output_files, tokenizer, options=InstanceOptions(), *,
                            num_workers=0, shard_size_mb=16.0, gzip=False,
                            skip_invalid_utf8=False, vocab_file="vocab"):
  """Reads raw text, writes pretraining TFRecords; returns a ``Summary``.

  Args:
    input_files: globs (list, or a comma-separated string as the original's --input_file).
    output_files: TFRecord paths (list or comma-separated); records go round-robin (in
      sharded mode, round-robin within each shard).
    tokenizer: a ``bert_tf.tokenization.FullTokenizer`` (or anything with ``vocab``,
      ``tokenize`` and ``convert_tokens_to_ids``).
    options: ``InstanceOptions`` (the original's flags).
    num_workers: 0 for the original's exact output in this process; N >= 1 for sharded mode
      with N worker processes (deterministic, not the original's output).
    shard_size_mb: sharded mode: larger files are cut into shards of about this size.
    gzip: write GZIP-compressed TFRecords.
    skip_invalid_utf8: skip and count lines that are not UTF-8 instead of failing.
    vocab_file: the vocab's path, for messages.
  Raises:
    BertTfError: no input file, no text, a bad flag or vocab, invalid UTF-8. Nothing is left
      under an output name then.
  """
  t0 = time.time()
  options.validate()
  if num_workers < 0:
    raise BertTfError(f"--num_workers={num_workers}: must be 0 (the original's output) or more")
  if shard_size_mb <= 0:
    raise BertTfError(f"--shard_size_mb={shard_size_mb}: must be positive")
  if isinstance(output_files, str):
    output_files = [f for f in output_files.split(",") if f]
  if not output_files:
    raise BertTfError("--output_file: no output file given")
  special_token_ids(tokenizer.vocab, vocab_file)
  files = expand_input_files(input_files)
  warning = options.mask_cap_warning()
  if warning:
    logger.warning("%s", warning)
  summary = Summary(files=len(files), output_files=tuple(output_files))
  pool = contextlib.nullcontext()
  spill = contextlib.nullcontext()
  if num_workers > 0:
    shards = plan_shards(files, max(1, int(shard_size_mb * (1 << 20))))
    spill = _spill_dir(output_files[0])
    pool = _worker_pool(num_workers, tokenizer, options, skip_invalid_utf8, shards, vocab_file,
                        spill.name, len(output_files), gzip)
  # The workers start before any output file is opened (they are forked on Linux).
  with spill, pool, RoundRobinWriter(output_files, gzip) as writer:
    if num_workers <= 0:
      _reference_run(files, tokenizer, options, skip_invalid_utf8, vocab_file, summary, writer)
    else:
      _sharded_run(pool, shards, num_workers, summary, writer, gzip)
    if summary.instances == 0:
      raise BertTfError(f"--input_file: no text in {len(files)} input files (expected one "
                        "sentence per line, blank lines between documents)")
    if summary.one_document_corpora:
      logger.warning("%d corpus/shard(s) hold a single document: its random next sentences "
                     "come from the same document", summary.one_document_corpora)
  summary.seconds = time.time() - t0
  summary.peak_rss_mb = _peak_rss_mb()
  return summary


def _reference_run(files, tokenizer, options, skip_invalid_utf8, vocab_file, summary, writer):
  summary.shards = 1
  records = records_from_text([(f, 0, None) for f in files], LineTokenizer(tokenizer),
                              tokenizer.vocab, options, summary, options.random_seed,
                              skip_invalid_utf8, vocab_file)
  writer.write_framed(records)


def _spill_dir(output_file):
  """A temporary directory for the workers' shard files, removed at the end: beside the
  output when it is local (the same file system, so appending is a copy in the kernel), else
  the system's temporary directory."""
  local_dir = None if fileio.is_remote(output_file) else (
      os.path.dirname(os.path.abspath(output_file)))
  return tempfile.TemporaryDirectory(prefix=".bert_tf-shards-", dir=local_dir)


def _worker_pool(num_workers, tokenizer, options, skip_invalid_utf8, shards, vocab_file,
                 spill_dir, num_outputs, gzip):
  context = multiprocessing.get_context(
      "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
  return context.Pool(num_workers, _init_worker,
                      (os.getpid(), tokenizer, options, skip_invalid_utf8, shards, vocab_file,
                       spill_dir, num_outputs, gzip))


def _sharded_run(pool, shards, num_workers, summary, writer, gzip):
  """Shards to the workers, their records appended in shard order as they come back.

  At most two shards per worker are in flight, so at most that many shards' records wait in
  temporary files, and each worker holds one shard's corpus and records.
  """
  window = 2 * num_workers
  pending = collections.deque()
  next_shard = 0
  while pending or next_shard < len(shards):
    while next_shard < len(shards) and len(pending) < window:
      pending.append(pool.apply_async(_shard_records, (next_shard,)))
      next_shard += 1
    paths, counts, shard_summary = pending.popleft().get()
    summary.add(shard_summary)
    writer.append_shard(paths, counts, compressed=gzip)
    for path in paths:
      os.remove(path)
  summary.shards = len(shards)
