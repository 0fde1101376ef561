"""Google's released BERT checkpoints by name: downloaded once into a cache, then a folder.

  >>> bert = bert_tf.load("bert-base-uncased")        # doctest: +SKIP
  >>> pretrained.folder("uncased_L-2_H-128_A-2")      # doctest: +SKIP
  '/home/me/.cache/bert_tf/2020_02_20/uncased_L-2_H-128_A-2'

This module is the one place for the table of names. A name is Google's own
(``uncased_L-12_H-768_A-12``, the zip's name in google-research/bert's README) or a familiar
alias (``bert-base-uncased``, ``google/bert_uncased_L-2_H-128_A-2``, ``bert-tiny``); case does
not matter. ``resolve`` turns a name into the cached folder (Google's layout:
``bert_config.json``, ``vocab.txt``, ``bert_model.ckpt.*``) and leaves anything else (a folder,
a file) alone: an existing path always wins over a name.

Where things go:
  - the zip: ``$BERT_TF_MIRROR/<date>/<name>.zip``; ``$BERT_TF_MIRROR`` replaces Google's public
    storage, ``https://storage.googleapis.com/bert_models`` (any URL ``urllib`` opens, ``file://``
    included);
  - the folder: ``$BERT_TF_CACHE/<date>/<name>/`` (default ``$XDG_CACHE_HOME/bert_tf``, else
    ``~/.cache/bert_tf``). The folder's name is Google's, so the scripts' casing check
    (``validate_case_matches_checkpoint``) recognises it.

A download is atomic: the zip goes to a temporary name, is checked (its length against the
server's, every member's CRC), extracted into a temporary folder that is renamed to the cache
folder only when whole. A download that fails or is killed leaves only temporary names, which
the next call removes (those of stopped processes) before it tries again. Progress (bytes of
total, rate) goes to stderr.
"""

import dataclasses
import difflib
import glob
import http.client
import os
import shutil
import sys
import time
import urllib.error
import urllib.request
import zipfile

from bert_tf import fileio
from bert_tf.errors import BertTfError

STORAGE = "https://storage.googleapis.com/bert_models"
MIRROR_ENV = "BERT_TF_MIRROR"
CACHE_ENV = "BERT_TF_CACHE"
# What a whole model folder holds (and bert_model.ckpt.data-*: a shard suffix).
_FILES = ("bert_config.json", "vocab.txt", "bert_model.ckpt.index")
_CHUNK = 1 << 20  # bytes per read
_TIMEOUT_S = 60  # per socket operation


@dataclasses.dataclass(frozen=True)
class Pretrained:
  """One released checkpoint: ``<STORAGE>/<date>/<name>.zip``."""
  name: str  # Google's name: uncased_L-12_H-768_A-12
  date: str  # the release folder: 2018_10_18
  do_lower_case: bool
  description: str


def _small(layers, hidden):
  heads = hidden // 64
  size = {(2, 128): " (BERT-Tiny)", (4, 256): " (BERT-Mini)", (4, 512): " (BERT-Small)",
          (8, 512): " (BERT-Medium)"}.get((layers, hidden), "")
  return Pretrained(f"uncased_L-{layers}_H-{hidden}_A-{heads}", "2020_02_20", True,
                    f"BERT {layers}/{hidden}{size}: English, uncased, {layers}-layer, "
                    f"{hidden}-hidden, {heads}-heads (2020 small BERTs)")


# google-research/bert's README, in its order. The 2020 release re-trained BERT-Base under the
# same name as the 2018 one: the name means the 2018 model (the one every tutorial uses).
MODELS = [
    Pretrained("uncased_L-12_H-768_A-12", "2018_10_18", True,
               "BERT-Base, Uncased: 12-layer, 768-hidden, 12-heads, 110M parameters"),
    Pretrained("uncased_L-24_H-1024_A-16", "2018_10_18", True,
               "BERT-Large, Uncased: 24-layer, 1024-hidden, 16-heads, 340M parameters"),
    Pretrained("cased_L-12_H-768_A-12", "2018_10_18", False,
               "BERT-Base, Cased: 12-layer, 768-hidden, 12-heads, 110M parameters"),
    Pretrained("cased_L-24_H-1024_A-16", "2018_10_18", False,
               "BERT-Large, Cased: 24-layer, 1024-hidden, 16-heads, 340M parameters"),
    Pretrained("wwm_uncased_L-24_H-1024_A-16", "2019_05_30", True,
               "BERT-Large, Uncased (Whole Word Masking): 24-layer, 1024-hidden, 16-heads"),
    Pretrained("wwm_cased_L-24_H-1024_A-16", "2019_05_30", False,
               "BERT-Large, Cased (Whole Word Masking): 24-layer, 1024-hidden, 16-heads"),
    Pretrained("multi_cased_L-12_H-768_A-12", "2018_11_23", False,
               "BERT-Base, Multilingual Cased: 104 languages, 12-layer, 768-hidden, 12-heads"),
    Pretrained("multilingual_L-12_H-768_A-12", "2018_11_03", True,
               "BERT-Base, Multilingual Uncased (not recommended, use Multilingual Cased): "
               "102 languages, 12-layer, 768-hidden, 12-heads"),
    Pretrained("chinese_L-12_H-768_A-12", "2018_11_03", True,
               "BERT-Base, Chinese: Simplified and Traditional, 12-layer, 768-hidden, "
               "12-heads"),
] + [_small(layers, hidden) for layers in (2, 4, 6, 8, 10, 12)
     for hidden in (128, 256, 512, 768)]

_BY_KEY = {}
for _model in MODELS:
  _BY_KEY.setdefault(_model.name, _model)

# Familiar names (Hugging Face's hub names of the same checkpoints) -> table keys.
ALIASES = {
    "bert-base-uncased": "uncased_L-12_H-768_A-12",
    "bert-large-uncased": "uncased_L-24_H-1024_A-16",
    "bert-base-cased": "cased_L-12_H-768_A-12",
    "bert-large-cased": "cased_L-24_H-1024_A-16",
    "bert-large-uncased-whole-word-masking": "wwm_uncased_L-24_H-1024_A-16",
    "bert-large-cased-whole-word-masking": "wwm_cased_L-24_H-1024_A-16",
    "bert-base-multilingual-cased": "multi_cased_L-12_H-768_A-12",
    "bert-base-multilingual-uncased": "multilingual_L-12_H-768_A-12",
    "bert-base-chinese": "chinese_L-12_H-768_A-12",
    # The names of google-research/bert's small-BERT table.
    "bert-tiny": "uncased_L-2_H-128_A-2",
    "bert-mini": "uncased_L-4_H-256_A-4",
    "bert-small": "uncased_L-4_H-512_A-8",
    "bert-medium": "uncased_L-8_H-512_A-8",
}
for _model in MODELS:
  if _model.date == "2020_02_20":
    _key = _model.name if _BY_KEY[_model.name] is _model else f"2020_02_20/{_model.name}"
    _BY_KEY[_key] = _model
    ALIASES[f"google/bert_{_model.name}"] = _key
# The hub moved the original names under google-bert/.
ALIASES.update({f"google-bert/{alias}": key for alias, key in list(ALIASES.items())
                if alias.startswith("bert-")})
_LOOKUP = {k.lower(): m for k, m in _BY_KEY.items()}
_LOOKUP.update({alias.lower(): _BY_KEY[key] for alias, key in ALIASES.items()})


def names():
  """Every accepted name (table keys and aliases), sorted."""
  return sorted(set(_BY_KEY) | set(ALIASES))


def find(name):
  """The ``Pretrained`` of a name (any case), or None."""
  if not isinstance(name, (str, os.PathLike)):
    return None
  return _LOOKUP.get(os.fspath(name).strip().lower())


def mirror():
  """The base URL zips are downloaded from (``$BERT_TF_MIRROR`` or Google's storage)."""
  return (os.environ.get(MIRROR_ENV) or STORAGE).rstrip("/")


def url(model):
  return f"{mirror()}/{model.date}/{model.name}.zip"


def cache_dir():
  """``$BERT_TF_CACHE``, else ``$XDG_CACHE_HOME/bert_tf``, else ``~/.cache/bert_tf``."""
  if os.environ.get(CACHE_ENV):
    return os.path.expanduser(os.environ[CACHE_ENV])
  base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
  return os.path.join(base, "bert_tf")


def cached_folder(model):
  """Where ``model`` is (or will be) in the cache."""
  return os.path.join(cache_dir(), model.date, model.name)


def _whole(folder):
  return all(os.path.isfile(os.path.join(folder, f)) for f in _FILES) and bool(
      glob.glob(os.path.join(glob.escape(folder), "bert_model.ckpt.data-*")))


def folder(name, *, stream=None):
  """The cached folder of a named checkpoint, downloaded first if needed.

  Raises:
    BertTfError: an unknown name (with the closest known ones), or a download that failed
      (one line with the URL and ``$BERT_TF_MIRROR``).
  """
  model = find(name)
  if model is None:
    raise BertTfError(f"unknown model name {name!r}{suggest(name)}")
  target = cached_folder(model)
  if not _whole(target):
    try:
      _download(model, target, stream if stream is not None else sys.stderr)
    except OSError as e:  # The cache's disk, not the network (those are BertTfErrors).
      raise BertTfError(f"cannot write {model.name} into the cache {cache_dir()}: "
                        f"{e.strerror or e} ({e.filename or target}; set {CACHE_ENV} to "
                        "another folder)") from None
  return target


def suggest(name):
  """`` (did you mean ...?)`` with the known names closest to ``name``, or an example."""
  close = difflib.get_close_matches(str(name).lower(), list(_LOOKUP), n=3, cutoff=0.75)
  spelled = {k.lower(): k for k in names()}
  if close:
    return f" (did you mean {', '.join(spelled[c] for c in close)}?)"
  return " (e.g. bert-base-uncased, uncased_L-12_H-768_A-12; see bert_tf.pretrained.names())"


def resolve(path):
  """A model name -> its cached folder (downloading it once); anything else unchanged.

  An existing file or folder of that name wins over the table (a user's own
  ``uncased_L-12_H-768_A-12/`` stays theirs).
  """
  if path is None or find(path) is None or os.path.exists(os.fspath(path)):
    return path
  return folder(path)


def resolve_file(path, filename):
  """For a ``--bert_config_file``/``--vocab_file`` value: a model name -> that file of its
  cached folder (``filename``: ``bert_config.json`` or ``vocab.txt``); else unchanged."""
  resolved = resolve(path)
  return os.path.join(resolved, filename) if resolved != path else path


def resolve_flags(init_checkpoint=None, bert_config_file=None, vocab_file=None,
                  do_lower_case=None):
  """The scripts' three model flags with names resolved: ``(init_checkpoint,
  bert_config_file, vocab_file)``.

  ``--init_checkpoint=NAME`` becomes the cached ``.../<name>/bert_model.ckpt``, and the two
  files default to the same folder's ``bert_config.json`` and ``vocab.txt``;
  ``--bert_config_file=NAME`` / ``--vocab_file=NAME`` give that model's file. A
  ``do_lower_case`` that contradicts the named model's casing is an error before anything is
  downloaded (the original's own check knows only some of the names).
  """
  model = find(init_checkpoint) if init_checkpoint is not None and not os.path.exists(
      os.fspath(init_checkpoint)) else None
  if model is not None and do_lower_case is not None and (
      bool(do_lower_case) != model.do_lower_case):
    raise BertTfError(
        f"--do_lower_case={bool(do_lower_case)} does not match --init_checkpoint="
        f"{init_checkpoint}: {model.name} is a {'lowercased' if model.do_lower_case else 'cased'}"
        f" model, so pass --do_lower_case={model.do_lower_case}")
  resolved = resolve(init_checkpoint)
  if resolved != init_checkpoint:
    init_checkpoint = os.path.join(resolved, "bert_model.ckpt")
    bert_config_file = bert_config_file or os.path.join(resolved, "bert_config.json")
    vocab_file = vocab_file or os.path.join(resolved, "vocab.txt")
  return (init_checkpoint, resolve_file(bert_config_file, "bert_config.json"),
          resolve_file(vocab_file, "vocab.txt"))


# ---------------------------------------------------------------------------------------------
# The download.
# ---------------------------------------------------------------------------------------------


def remove_stale(parent, base, archive=".zip"):
  """Removes the temporaries (files and folders) of ``base`` and of ``base + archive`` left by
  stopped processes."""
  try:
    entries = os.listdir(parent)
  except OSError:
    return
  for entry in entries:
    temp = fileio.temp_target(entry)
    if temp is None or temp[0] not in (base, base + archive) or fileio.process_running(temp[1]):
      continue
    path = os.path.join(parent, entry)
    if os.path.isdir(path):
      shutil.rmtree(path, ignore_errors=True)
    else:
      fileio.discard(path)


def _mb(size):
  return f"{size / 1e6:.1f} MB"


def _download(model, target, stream):
  parent = os.path.dirname(target)
  os.makedirs(parent, exist_ok=True)
  remove_stale(parent, model.name)
  if _whole(target):  # Another process has just finished it.
    return
  if os.path.isdir(target):  # Not whole (e.g. a file removed by hand): replaced.
    shutil.rmtree(target)
  address = url(model)
  zip_tmp = fileio.temp_name(os.path.join(parent, model.name + ".zip"))
  folder_tmp = fileio.temp_name(target)
  try:
    fetch(address, zip_tmp, model.name, stream, lambda why: _fail(address, model, why))
    _extract(zip_tmp, folder_tmp, fileio.temp_name(target), address)
    place(folder_tmp, target, _whole)
  finally:
    fileio.discard(zip_tmp)
    shutil.rmtree(folder_tmp, ignore_errors=True)


def place(folder_tmp, target, whole):
  """Renames the whole temporary folder ``folder_tmp`` to ``target``; if another process has
  placed one there first (``whole(target)``), that one stays."""
  try:
    os.rename(folder_tmp, target)
  except OSError:
    if not whole(target):
      raise


def _fail(address, model, why):
  where = (f"{MIRROR_ENV}={os.environ[MIRROR_ENV]}" if os.environ.get(MIRROR_ENV) else
           f"set {MIRROR_ENV} to a mirror's base URL in place of {STORAGE}")
  raise BertTfError(f"cannot download {model.name} from {address}: {why} ({where}; or "
                    "unzip it yourself and pass its folder)")


def fetch(address, path, name, stream, fail):
  """Downloads ``address`` to ``path``, with a progress line (``downloading <name>``), checking
  the length; ``fail(why)`` raises the caller's one-line error."""
  try:
    response = urllib.request.urlopen(  # pylint: disable=consider-using-with
        address, timeout=_TIMEOUT_S)
  except urllib.error.HTTPError as e:
    fail(f"HTTP {e.code} {e.reason}")
  except (urllib.error.URLError, OSError, ValueError) as e:
    fail(str(getattr(e, "reason", e)).strip() or type(e).__name__)
  done, start, last = 0, time.monotonic(), 0.0
  with response:
    total = response.headers.get("Content-Length")
    total = int(total) if total and total.isdigit() else None
    tty = getattr(stream, "isatty", None) and stream.isatty()
    back = "\r" if tty else ""
    of = f" of {_mb(total)}" if total else ""
    stream.write(f"downloading {name}{of} from {address} to {cache_dir()}\n")
    stream.flush()

    def show(end=""):  # A terminal's line is rewritten in place; a log gets the last one.
      elapsed = max(time.monotonic() - start, 1e-9)
      part = f"{_mb(done)}/{_mb(total)}" if total else _mb(done)
      stream.write(f"{back}  {part}, {done / elapsed / 1e6:.1f} MB/s{end}")
      stream.flush()

    def lost(why):
      if last:  # End the progress line before the error.
        stream.write("\n")
      fail(why)

    with open(path, "wb", buffering=0) as f:
      while True:
        try:
          chunk = response.read1(_CHUNK)  # What has arrived (read() would wait for all).
        except (OSError, http.client.HTTPException) as e:
          lost(f"connection lost after {done} bytes ({type(e).__name__})")
        if not chunk:
          break
        f.write(chunk)
        done += len(chunk)
        if tty and time.monotonic() - last >= 0.5:
          last = time.monotonic()
          show()
    if total is not None and done != total:
      lost(f"connection lost after {done} of {total} bytes")
    show(end="\n")


def _extract(zip_path, folder_tmp, extracted, address):
  """Extracts a checked zip (via the temporary folder ``extracted``) into ``folder_tmp``: the
  folder in the zip that holds the model."""
  try:
    with zipfile.ZipFile(zip_path) as archive:
      bad = archive.testzip()
      if bad is not None:
        raise BertTfError(f"{address}: damaged zip (member {bad} fails its CRC)")
      try:
        archive.extractall(extracted)
        # Google's zips hold <name>/<files> (2018, 2019) or the files at the top (2020).
        home = next((root for root, _, files in os.walk(extracted)
                     if "bert_config.json" in files), None)
        if home is None or not _whole(home):
          raise BertTfError(f"{address}: the zip holds no bert_config.json, vocab.txt and "
                            "bert_model.ckpt.index/.data-*")
        os.rename(home, folder_tmp)
      finally:
        shutil.rmtree(extracted, ignore_errors=True)
  except zipfile.BadZipFile as e:
    raise BertTfError(f"{address}: not a whole zip file ({e})") from None
