"""Sharded-mode pretraining data as an Apache Beam pipeline (DirectRunner, Dataflow, Flink, Spark).

The same records as ``create_pretraining_data(..., num_workers=N)``, byte for byte (GZIP too):
the same shard plan (``plan_shards``), each shard made by the same worker function
(``pretraining._shard_records``: the shard's own generator seeded ``f"{seed}/{shard index}"``,
record i of the shard to output file ``i % num_outputs``, each file's share framed and
GZIP-compressed into a spill file), and each output file the concatenation of its shares in
shard order, as sharded mode's parent appends them. Only the engine changes:

  Create(shard indices) | Reshuffle            shards as elements, spread over the workers
  | ParDo(_MakeShard)                          (k, (shard, spill file, records)) per output k
  | GroupByKey | sort by shard                 one element per output file
  | fileio.WriteToFiles(_ConcatSink)           Beam's file sink: a temporary file per output,
                                               renamed to the output name when all are whole

The spill files and Beam's temporary files live in a directory under the pipeline's
``--temp_location`` (else beside the first output), removed at the end. The shards' counts go
to Beam metrics (counters, and a distribution of the workers' peak memory) and make the run's
``Summary``. No output file is written when there is no text.

apache-beam is optional (``pip install 'bert_tf[beam]'``); ``run`` says so when it is missing.
"""

import contextlib
import logging
import os
import re
import time
import uuid

from bert_tf import fileio, quiet
from bert_tf.data import pretraining
from bert_tf.errors import BertTfError

try:
  import apache_beam as beam
  from apache_beam.io import fileio as beam_fileio
  from apache_beam.io import filesystems as beam_filesystems
  _BEAM_MISSING = None
except ImportError as e:  # bert_tf[beam] not installed: run() says so; the module still loads.
  beam = beam_fileio = beam_filesystems = None
  _BEAM_MISSING = e

logger = logging.getLogger("bert_tf.data.pretraining_beam")

RUNNERS = ("DirectRunner", "DataflowRunner", "FlinkRunner", "SparkRunner")
METRICS_NAMESPACE = "bert_tf.create_pretraining_data"
# Summary fields the shards add up (the input files are counted by the driver).
_COUNTERS = tuple(n for n in pretraining.Summary._ADDITIVE if n != "files")  # pylint: disable=protected-access
_COPY_BYTES = 1 << 22


def require_beam(runner="DirectRunner"):
  """Raises a one-line ``BertTfError`` when apache-beam cannot be imported."""
  if _BEAM_MISSING is not None:
    raise BertTfError(f"--runner={runner} needs apache-beam, which is not installed "
                      f"({_BEAM_MISSING}): pip install 'bert_tf[beam]'")


class _MakeShard(beam.DoFn if beam else object):
  """A shard index -> (k, (shard index, spill file, record count)) for each output file k.

  The work is sharded mode's worker function, in this worker process's copy of its state.
  """

  def __init__(self, tokenizer, options, skip_invalid_utf8, shards, vocab_file, spill_dir,
               num_outputs, gzip):
    self._config = (tokenizer, options, skip_invalid_utf8, shards, vocab_file, spill_dir,
                    num_outputs, gzip)

  def setup(self):
    pretraining._set_worker_state(*self._config)  # pylint: disable=protected-access

  def process(self, shard_index):
    paths, counts, summary = pretraining._shard_records(shard_index)  # pylint: disable=protected-access
    for name in _COUNTERS:
      value = getattr(summary, name)
      if value:
        beam.metrics.Metrics.counter(METRICS_NAMESPACE, name).inc(value)
    beam.metrics.Metrics.distribution(METRICS_NAMESPACE, "worker_peak_rss_mb").update(
        int(round(summary.peak_rss_mb)))
    for k, (path, count) in enumerate(zip(paths, counts)):
      yield k, (shard_index, path, count)


class _ConcatSink(beam_fileio.FileSink if beam else object):
  """Writes an output file: an element (k, [(shard, spill file, count), ...] in shard order)
  becomes the spill files end to end (framed records, or GZIP members: one GZIP stream)."""

  def create_metadata(self, destination, full_file_name):
    # The shares are compressed already; AUTO would guess from the temporary name.
    from apache_beam.io.filesystem import CompressionTypes  # pylint: disable=import-outside-toplevel
    return beam_fileio.FileMetadata(mime_type="application/octet-stream",
                                    compression_type=CompressionTypes.UNCOMPRESSED)

  def open(self, fh):
    self._fh = fh  # pylint: disable=attribute-defined-outside-init

  def write(self, record):
    for _, path, _ in record[1]:
      with fileio.open_file(path, "rb") as source:
        while True:
          chunk = source.read(_COPY_BYTES)
          if not chunk:
            break
          self._fh.write(chunk)

  def flush(self):
    self._fh.flush()


def _common_dir(paths):
  """The longest directory holding all ``paths`` (local or with a scheme), and each path
  relative to it. Raises BertTfError when they share none."""
  full = [p if fileio.is_remote(p) else os.path.abspath(p) for p in paths]
  parts = [p.split("/") for p in full]
  common = []
  for pieces in zip(*(p[:-1] for p in parts)):
    if any(x != pieces[0] for x in pieces):
      break
    common.append(pieces[0])
  if len(common) < (3 if fileio.is_remote(full[0]) else 1):  # "gs:", "", bucket
    raise BertTfError("--output_file: with --runner, the output files must share a directory")
  base = "/".join(common) or "/"
  return base, ["/".join(p[len(common):]) for p in parts]


def _spill_dir(output_file, temp_location):
  """Where the shards' files and Beam's temporary files go: a new directory under
  ``temp_location`` (the pipeline's, which every worker can reach) or beside the output."""
  name = f".bert_tf-shards-{uuid.uuid4().hex[:12]}"
  if temp_location:
    return beam_filesystems.FileSystems.join(temp_location, name)
  parent = (os.path.dirname(output_file) if fileio.is_remote(output_file)
            else os.path.dirname(os.path.abspath(output_file)))
  return beam_filesystems.FileSystems.join(parent, name)


def pipeline_options(runner, beam_args=(), num_workers=0):
  """``PipelineOptions`` for ``runner`` from Beam's own flags (``beam_args``, e.g.
  ``["--project=p", "--region=us-central1", "--temp_location=gs://b/tmp"]``).

  ``num_workers`` (DirectRunner only) sets ``--direct_num_workers`` and multi-process mode
  unless ``beam_args`` set them.
  """
  require_beam(runner)
  if runner not in RUNNERS:
    raise BertTfError(f"--runner={runner}: expected one of {', '.join(RUNNERS)}")
  args = list(beam_args)
  if num_workers < 0:
    raise BertTfError(f"--num_workers={num_workers}: must be 0 or more")
  if num_workers:
    if runner != "DirectRunner":
      raise BertTfError(f"--num_workers={num_workers}: with --runner={runner} the runner's "
                        "own options (after --) set the workers")
    if not any(a.startswith("--direct_num_workers") for a in args):
      args.append(f"--direct_num_workers={num_workers}")
    if not any(a.startswith("--direct_running_mode") for a in args):
      args.append("--direct_running_mode=multi_processing")
  from apache_beam.options.pipeline_options import PipelineOptions  # pylint: disable=import-outside-toplevel
  return PipelineOptions(args, runner=runner)


def create_pretraining_data_beam(input_files, output_files, tokenizer,
                                 options=pretraining.InstanceOptions(), *, beam_options,
                                 shard_size_mb=16.0, gzip=False, skip_invalid_utf8=False,
                                 vocab_file="vocab"):
  """Sharded mode's records (``create_pretraining_data(num_workers=N)``'s bytes) made by a
  Beam pipeline; returns a ``Summary`` built from the pipeline's metrics.

  Args:
    input_files, output_files, tokenizer, options, shard_size_mb, gzip, skip_invalid_utf8,
      vocab_file: as ``pretraining.create_pretraining_data``. The tokenizer is pickled to the
      workers.
    beam_options: ``apache_beam`` ``PipelineOptions`` (``pipeline_options``): the runner and
      its settings.
  Raises:
    BertTfError: as ``create_pretraining_data``; a worker's BertTfError (invalid UTF-8...)
      comes back with its message. No output file is written then.
  """
  runner = beam_options.get_all_options().get("runner") or "DirectRunner"
  require_beam(runner)
  from apache_beam.options.pipeline_options import GoogleCloudOptions  # pylint: disable=import-outside-toplevel
  t0 = time.time()
  options.validate()
  if shard_size_mb <= 0:
    raise BertTfError(f"--shard_size_mb={shard_size_mb}: must be positive")
  if isinstance(output_files, str):
    output_files = [f for f in output_files.split(",") if f]
  if not output_files:
    raise BertTfError("--output_file: no output file given")
  pretraining.special_token_ids(tokenizer.vocab, vocab_file)
  files = pretraining.expand_input_files(input_files)
  warning = options.mask_cap_warning()
  if warning:
    logger.warning("%s", warning)
  shards = pretraining.plan_shards(files, max(1, int(shard_size_mb * (1 << 20))))
  base, names = _common_dir(output_files)
  for path in output_files:
    fileio.make_parent(path)  # Beam's rename into place does not make directories.
  spill_dir = _spill_dir(output_files[0],
                         beam_options.view_as(GoogleCloudOptions).temp_location)
  beam_filesystems.FileSystems.mkdirs(spill_dir)
  try:
    result = _run(beam_options, shards, names, base, spill_dir,
                  (tokenizer, options, skip_invalid_utf8, shards, vocab_file, spill_dir,
                   len(output_files), gzip))
  finally:
    try:
      beam_filesystems.FileSystems.delete([spill_dir])
    except Exception as e:  # pylint: disable=broad-except  # Never hide the run's own error.
      logger.warning("could not remove the temporary directory %s: %s", spill_dir, e)
  summary = _summary(result)
  summary.files = len(files)
  summary.output_files = tuple(output_files)
  if summary.instances == 0:
    raise BertTfError(f"--input_file: no text in {len(files)} input files (expected one "
                      "sentence per line, blank lines between documents)")
  missing = [p for p in output_files if not fileio.exists(p)]
  if missing:
    raise BertTfError(f"--output_file: the pipeline did not write {missing[0]!r}")
  if summary.one_document_corpora:
    logger.warning("%d corpus/shard(s) hold a single document: its random next sentences "
                   "come from the same document", summary.one_document_corpora)
  summary.seconds = time.time() - t0
  summary.peak_rss_mb = pretraining._peak_rss_mb()  # pylint: disable=protected-access
  return summary


def _is_user_error(record):
  """Whether a log record carries a ``BertTfError`` (in its exception or the chain behind)."""
  error = record.exc_info[1] if record.exc_info else None
  seen = set()
  while error is not None and id(error) not in seen:
    if isinstance(error, BertTfError):
      return True
    seen.add(id(error))
    error = error.__cause__ or error.__context__
  return False


@contextlib.contextmanager
def _user_errors_unlogged():
  """Beam logs a worker's exception with its traceback at ERROR before the pipeline fails; for
  a user's mistake (a ``BertTfError``: invalid UTF-8, ...) the driver's one line says it all,
  so those records are dropped by the handlers they would reach (the root logger's)."""
  def keep(record):
    return not _is_user_error(record)
  handlers = list(logging.getLogger().handlers)
  for handler in handlers:
    handler.addFilter(keep)
  try:
    yield
  finally:
    for handler in handlers:
      handler.removeFilter(keep)


def _run(beam_options, shards, names, base, spill_dir, worker_config):
  """Builds and runs the pipeline; returns its result (finished)."""
  from apache_beam.options.value_provider import StaticValueProvider  # pylint: disable=import-outside-toplevel
  try:
    p = beam.Pipeline(options=beam_options)
  except ValueError as e:  # The runner's required options (DataflowRunner: project, ...).
    problems = [line.strip().rstrip(".") for line in str(e).splitlines()[1:] if line.strip()]
    if not str(e).startswith("Pipeline has validations errors") or not problems:
      raise
    raise BertTfError(f"--runner: {'; '.join(problems)} (Beam's options go after '--', e.g. "
                      "-- --project=P --region=R --temp_location=gs://bucket/tmp)") from None
  shares = (p
            | "Shards" >> beam.Create(list(range(len(shards))))
            | "Spread" >> beam.Reshuffle()
            | "MakeShard" >> beam.ParDo(_MakeShard(*worker_config)))
  total = (shares
           | "Counts" >> beam.Map(lambda share: share[1][2])
           | "Total" >> beam.CombineGlobally(sum))
  _ = (shares
       | "ByOutput" >> beam.GroupByKey()
       | "InShardOrder" >> beam.MapTuple(lambda k, parts: (k, sorted(parts)))
       # No text: no output file (the driver then fails with the message).
       | "IfAny" >> beam.Filter(lambda _, n: n > 0, n=beam.pvalue.AsSingleton(total))
       | "Write" >> beam_fileio.WriteToFiles(
           path=base,
           destination=lambda output: str(output[0]),
           sink=lambda _: _ConcatSink(),
           file_naming=lambda *args: names[int(args[-1])],
           temp_directory=StaticValueProvider(
               str, beam_filesystems.FileSystems.join(spill_dir, "write"))))
  try:
    # DirectRunner's worker processes' logging set-up; a worker's BertTfError without Beam's
    # traceback of it.
    with quiet.child_processes_quiet(), _user_errors_unlogged():
      result = p.run()
      result.wait_until_finish()
  except Exception as e:  # pylint: disable=broad-except
    # A worker's BertTfError reaches us wrapped (with remote tracebacks): its line is the news.
    # In one process, the worker's own BertTfError, its message ending "[while running
    # 'Step']": Beam's words, not the user's.
    suffix = r" \[while running '[^']*'\].*$"
    if isinstance(e, BertTfError):
      raise BertTfError(re.sub(suffix, "", str(e))) from None
    found = re.findall(r"BertTfError: ([^\n]+)", str(e))
    if found:
      raise BertTfError(re.sub(suffix, "", found[-1]).strip().rstrip("'\"]")) from None
    raise
  state = str(result.state)
  if "DONE" not in state:
    raise BertTfError(f"--runner: the pipeline ended in state {state}")
  return result


def _summary(result):
  """The shards' ``Summary`` from the pipeline's metrics (committed where the runner has them)."""
  from apache_beam.metrics.metric import MetricsFilter  # pylint: disable=import-outside-toplevel
  query = result.metrics().query(MetricsFilter().with_namespace(METRICS_NAMESPACE))
  summary = pretraining.Summary()

  def value(metric):
    return metric.committed if metric.committed is not None else metric.attempted

  for metric in query["counters"]:
    name = metric.key.metric.name
    if name in _COUNTERS:
      setattr(summary, name, getattr(summary, name) + value(metric))
  for metric in query["distributions"]:
    if metric.key.metric.name == "worker_peak_rss_mb" and value(metric) is not None:
      summary.worker_peak_rss_mb = max(summary.worker_peak_rss_mb, float(value(metric).max))
  return summary
