"""Google's BERT modules of TF-Hub, read without tensorflow_hub: what the original
run_classifier_with_tfhub.py fine-tunes (``--bert_hub_module_handle``).

Google published each released BERT as a module in the TF1 Hub format
(``https://tfhub.dev/google/bert_uncased_L-12_H-768_A-12/1`` and the like). A module folder
holds ``saved_model.pb`` (a graph per tag set, ``{"train"}`` and the default, each with the
signatures ``tokens`` and ``tokenization_info``), ``variables/`` (a TF checkpoint with the
variable names of Google's checkpoints, ``bert/...``) and ``assets/`` (the vocab).

``load(handle)`` gives what a bert_tf run needs from one: the checkpoint, the vocab file,
``do_lower_case`` (the value its ``tokenization_info`` signature returns, as the original asked
the module: read from the graph's constant, else computed by TensorFlow from the graph, else,
for a graph TensorFlow 2.21 cannot run, from the handle's name, uncased / cased, as the
original's checkpoint check did) and a ``BertConfig``. A module holds no bert_config.json:
the sizes come from the variables' shapes, the dropout and activation are BERT's (0.1, gelu),
and the number of heads, which no shape holds, comes from a config file if one is given, else
from the module's name (``..._A-12``), else from Google's 64-wide heads (every released BERT
has them).

A handle is a module folder, a ``.tar.gz`` of one (a path or a URL), or a module's URL, which
is fetched as TF-Hub serves modules, ``<url>?tf-hub-format=compressed``. What is fetched is
unpacked once into ``<bert_tf cache>/tfhub/`` (``bert_tf.pretrained.cache_dir``), atomically:
a temporary folder renamed when whole.
"""

import dataclasses
import hashlib
import os
import re
import shutil
import sys
import tarfile
import urllib.parse
import urllib.request

from bert_tf import fileio
from bert_tf import pretrained
from bert_tf.errors import BertTfError

_CHECKPOINT = os.path.join("variables", "variables")
_HEAD_SIZE = 64  # Every released BERT's attention heads are 64 wide.
_GIVE_CONFIG = "give its bert_config.json (--bert_config_file, or bert_tf.load's config_file=)"


@dataclasses.dataclass(frozen=True)
class HubModule:
  """A BERT module's parts, as bert_tf's scripts take them."""
  folder: str
  checkpoint: str  # the variables' checkpoint prefix (Google's variable names)
  vocab_file: str
  do_lower_case: bool
  config: object  # bert_tf.modeling.BertConfig
  heads_from: str  # where num_attention_heads came from (said in the script's log)
  casing_from: str  # where do_lower_case came from


def _is_module(folder):
  return (os.path.isfile(os.path.join(folder, "saved_model.pb")) and
          os.path.isfile(os.path.join(folder, _CHECKPOINT + ".index")))


def _is_url(handle):
  return urllib.parse.urlparse(handle).scheme in ("http", "https", "file")


def _is_archive(handle):
  return urllib.parse.urlparse(handle).path.endswith((".tar.gz", ".tgz"))


def _local(handle):
  """The local path of a file:// URL; anything else unchanged."""
  if urllib.parse.urlparse(handle).scheme == "file":
    return urllib.request.url2pathname(urllib.parse.urlparse(handle).path)
  return handle


def is_handle(path):
  """Whether ``path`` names a TF-Hub module: a module folder, a ``.tar.gz`` file, or an http(s)
  URL, or a file:// URL of one of the first two (none of them a checkpoint or model folder
  that ``bert_tf.load`` reads otherwise)."""
  if not isinstance(path, (str, os.PathLike)):
    return False
  path = os.fspath(path)
  scheme = urllib.parse.urlparse(path).scheme
  if scheme in ("http", "https"):
    return not urllib.parse.urlparse(path).path.endswith(".zip")  # Google's checkpoint zips
  path = _local(path)
  if os.path.isdir(path):
    return _is_module(path)
  return _is_archive(path) and os.path.isfile(path)


def cached_folder(handle):
  """Where a fetched module goes: ``<cache>/tfhub/<hash>_<its last names>``, the hash of the
  handle, or of a local archive's real path, size and time of change (an archive of the same
  name in another folder, or replaced in place, was silently given the first one's module)."""
  identity = handle
  local = _local(handle)
  if urllib.parse.urlparse(handle).scheme in ("", "file") and os.path.isfile(local):
    stat = os.stat(local)
    identity = f"{os.path.realpath(local)}|{stat.st_size}|{stat.st_mtime_ns}"
  digest = hashlib.sha1(identity.encode("utf-8")).hexdigest()[:12]
  path = urllib.parse.urlparse(handle).path
  tail = re.sub(r"[^A-Za-z0-9._-]+", "_", "_".join(path.strip("/").split("/")[-2:]))
  tail = re.sub(r"(\.tar\.gz|\.tgz)$", "", tail)[:80]
  return os.path.join(pretrained.cache_dir(), "tfhub", f"{digest}_{tail}" if tail else digest)


def resolve(handle, *, stream=None):
  """The local folder of a module handle (fetched and unpacked once).

  Raises:
    BertTfError: the handle is no module folder, archive or URL; a download or an archive
      that fails; an archive without a module.
  """
  if not handle:
    raise BertTfError("--bert_hub_module_handle is required")
  handle = os.fspath(handle)
  if os.path.isdir(_local(handle)):  # A file:// URL of a module folder is that folder.
    handle = _local(handle)
  if os.path.isdir(handle):
    if not _is_module(handle):
      raise BertTfError(f"--bert_hub_module_handle={handle}: not a TF-Hub module folder (no "
                        f"saved_model.pb and {_CHECKPOINT}.index)")
    return handle
  if not (_is_url(handle) or (_is_archive(handle) and os.path.isfile(handle))):
    raise BertTfError(f"--bert_hub_module_handle={handle}: no such folder or .tar.gz, and not "
                      "a URL (e.g. https://tfhub.dev/google/bert_uncased_L-12_H-768_A-12/1)")
  target = cached_folder(handle)
  if _is_module(target):
    return target
  stream = stream if stream is not None else sys.stderr
  parent = os.path.dirname(target)
  try:
    os.makedirs(parent, exist_ok=True)
    pretrained.remove_stale(parent, os.path.basename(target), archive=".tar.gz")
    if os.path.isdir(target):  # Not whole (a file removed by hand): replaced.
      shutil.rmtree(target)
    _fetch_and_unpack(handle, target, stream)
  except OSError as e:
    raise BertTfError(f"cannot write the module {handle} into the cache {parent}: "
                      f"{e.strerror or e} ({e.filename or target}; set "
                      f"{pretrained.CACHE_ENV} to another folder)") from None
  return target


def _fetch_and_unpack(handle, target, stream):
  archive_tmp = fileio.temp_name(target + ".tar.gz")
  folder_tmp = fileio.temp_name(target)
  unpacked = fileio.temp_name(target)
  try:
    if os.path.isfile(handle):
      source = handle
    else:
      address = handle if _is_archive(handle) or handle.startswith("file:") else (
          handle + ("&" if "?" in handle else "?") + "tf-hub-format=compressed")

      def fail(why):
        raise BertTfError(f"cannot download the module {handle} from {address}: {why} (or "
                          "unpack it yourself and pass its folder)")

      pretrained.fetch(address, archive_tmp, os.path.basename(target), stream, fail)
      source = archive_tmp
    try:
      with tarfile.open(source, "r:*") as archive:
        _extract_safely(archive, unpacked)
    except (tarfile.TarError, EOFError, OSError) as e:
      if isinstance(e, OSError) and not isinstance(e, tarfile.TarError) and e.errno is not None:
        raise
      why = (str(e).strip().splitlines() or ["truncated"])[0]  # tarfile's lists every method
      raise BertTfError(f"{handle}: cannot unpack it as a .tar.gz ({type(e).__name__}: "
                        f"{why})") from None
    home = next((root for root, _, files in os.walk(unpacked)
                 if "saved_model.pb" in files and _is_module(root)), None)
    if home is None:
      raise BertTfError(f"--bert_hub_module_handle={handle}: the archive holds no TF-Hub "
                        f"module (saved_model.pb and {_CHECKPOINT}.index)")
    os.rename(home, folder_tmp)
    pretrained.place(folder_tmp, target, _is_module)
  finally:
    fileio.discard(archive_tmp)
    shutil.rmtree(folder_tmp, ignore_errors=True)
    shutil.rmtree(unpacked, ignore_errors=True)


def _extract_safely(archive, folder):
  """Extracts a tar's files and folders under ``folder`` only (no links, devices, absolute
  names or ``..``)."""
  if hasattr(tarfile, "data_filter"):  # Python 3.11.4 and later.
    archive.extractall(folder, filter="data")
    return
  for member in archive.getmembers():
    parts = member.name.replace("\\", "/").split("/")
    if not (member.isfile() or member.isdir()) or member.name.startswith("/") or ".." in parts:
      raise tarfile.TarError(f"unsafe member {member.name!r}")
  archive.extractall(folder)  # pylint: disable=unsafe-tar-extraction  (checked above)


def _default_graph(folder):
  """The module's graph without tags (dropout off), else its first."""
  from tensorflow.core.protobuf import saved_model_pb2  # pylint: disable=import-outside-toplevel
  path = os.path.join(folder, "saved_model.pb")
  model = saved_model_pb2.SavedModel()
  try:
    with open(path, "rb") as f:
      model.ParseFromString(f.read())
  except Exception as e:  # pylint: disable=broad-except  (protobuf's DecodeError and others)
    raise BertTfError(f"{path}: not a SavedModel ({type(e).__name__})") from None
  if not model.meta_graphs:
    raise BertTfError(f"{path}: a SavedModel without graphs")
  return next((g for g in model.meta_graphs if not g.meta_info_def.tags), model.meta_graphs[0])


def tokenization_info(folder, name=""):
  """``(vocab_file, do_lower_case, how)``: what the module's ``tokenization_info`` signature
  returns, the vocab as the module's asset file in ``folder/assets``; ``how`` says where
  ``do_lower_case`` came from. ``name`` (the handle) is the last resort for the casing."""
  from tensorflow.core.protobuf import meta_graph_pb2  # pylint: disable=import-outside-toplevel
  graph = _default_graph(folder)
  signature = graph.signature_def.get("tokenization_info")
  if signature is None or not {"vocab_file", "do_lower_case"} <= set(signature.outputs):
    raise BertTfError(f"{folder}: not a BERT module of TF-Hub (no tokenization_info signature "
                      "with vocab_file and do_lower_case); a SavedModel bert_tf exported is "
                      "served with tf.saved_model.load, and loads as a model from the folder "
                      "it was exported from")
  vocab_tensor = signature.outputs["vocab_file"].name
  vocab_file = None
  for packed in graph.collection_def["saved_model_assets"].any_list.value:
    asset = meta_graph_pb2.AssetFileDef()
    packed.Unpack(asset)
    if asset.tensor_info.name == vocab_tensor:
      vocab_file = os.path.join(folder, "assets", asset.filename)
  if vocab_file is None or not os.path.isfile(vocab_file):
    raise BertTfError(f"{folder}: the vocab of its tokenization_info is not in its assets/")
  tensor = signature.outputs["do_lower_case"].name
  value = _constant(graph.graph_def, tensor)
  if value is not None:
    return vocab_file, value, "the module's tokenization_info"
  value = _evaluated(graph, tensor)
  if value is not None:
    return vocab_file, value, "the module's tokenization_info"
  # The original's own fallback for checkpoints (validate_case_matches_checkpoint): the name.
  cased = re.search(r"(?<![a-z])(un)?cased(?![a-z])", f"{name} {folder}", re.IGNORECASE)
  if cased:
    return vocab_file, bool(cased.group(1)), f"the module's name ({cased.group(0)})"
  raise BertTfError(f"{folder}: cannot evaluate its tokenization_info's do_lower_case, and its "
                    "name says no casing (uncased / cased)")


def _constant(graph_def, tensor):
  """The value of ``tensor`` (``node:0``) when it is a constant (through Identity nodes)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  nodes = {node.name: node for node in graph_def.node}
  node = nodes.get(tensor.split(":")[0])
  for _ in range(len(nodes)):
    if node is None or node.op != "Identity" or not node.input:
      break
    node = nodes.get(node.input[0].lstrip("^").split(":")[0])
  if node is None or node.op != "Const":
    return None
  value = tf.make_ndarray(node.attr["value"].tensor)
  return bool(value) if value.dtype == bool and value.size == 1 else None


def _evaluated(graph, tensor):
  """``tensor`` of the meta graph ``graph`` evaluated in a session, or None if it cannot be."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  with tf.Graph().as_default() as g:
    try:
      tf.compat.v1.train.import_meta_graph(graph, clear_devices=True)
      with tf.compat.v1.Session(graph=g) as session:
        return bool(session.run(tensor))
    except (tf.errors.OpError, ValueError, KeyError, TypeError):
      return None


def module_config(shapes, name, bert_config_file=None, folder_name=""):
  """``(BertConfig, heads_from)`` of a module's variable shapes (``{name: shape}``); ``name``
  (its handle) and ``folder_name`` may say its heads (``..._A-12``)."""
  from bert_tf.modeling import checkpoints  # pylint: disable=import-outside-toplevel
  from bert_tf.modeling.config import BertConfig  # pylint: disable=import-outside-toplevel
  if bert_config_file:
    return checkpoints.load_config(bert_config_file), f"--bert_config_file={bert_config_file}"
  needed = ("bert/embeddings/word_embeddings", "bert/embeddings/position_embeddings",
            "bert/embeddings/token_type_embeddings",
            "bert/encoder/layer_0/intermediate/dense/kernel")
  missing = [n for n in needed if n not in shapes]
  if missing:
    raise BertTfError(f"{name}: not a BERT module (no variable {missing[0]})")
  vocab_size, hidden = shapes[needed[0]]
  layers = len({int(m.group(1)) for m in
                (re.match(r"bert/encoder/layer_(\d+)/", n) for n in shapes) if m})
  # tfhub.dev's bert_uncased_L-12_H-768_A-12, Kaggle's uncased-l-12-h-768-a-12.
  named = re.search(r"[_-]A-(\d+)(?![0-9])", f"{name} {folder_name}", re.IGNORECASE)
  if named:
    heads, heads_from = int(named.group(1)), f"the module's name ({named.group(0)[1:]})"
  elif hidden % _HEAD_SIZE == 0:
    heads, heads_from = hidden // _HEAD_SIZE, f"hidden size {hidden} / 64 (Google's head size)"
  else:
    raise BertTfError(f"{name}: cannot tell its number of attention heads (hidden size "
                      f"{hidden}); {_GIVE_CONFIG}")
  if heads < 1 or hidden % heads:
    raise BertTfError(f"{name}: {heads} attention heads do not divide its hidden size "
                      f"{hidden}; {_GIVE_CONFIG}")
  config = BertConfig(
      vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers,
      num_attention_heads=heads, intermediate_size=shapes[needed[3]][1], hidden_act="gelu",
      hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
      max_position_embeddings=shapes[needed[1]][0], type_vocab_size=shapes[needed[2]][0],
      initializer_range=0.02)
  return config, heads_from


def load(handle, bert_config_file=None, *, stream=None):
  """The ``HubModule`` of a handle (see the module docstring)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  folder = resolve(handle, stream=stream)
  checkpoint = os.path.join(folder, _CHECKPOINT)
  try:
    shapes = dict(tf.train.list_variables(checkpoint))
  except (tf.errors.OpError, ValueError) as e:
    raise BertTfError(f"{checkpoint}: unreadable checkpoint ({type(e).__name__})") from None
  vocab_file, do_lower_case, casing_from = tokenization_info(folder, os.fspath(handle))
  config, heads_from = module_config(shapes, os.fspath(handle), bert_config_file,
                                     os.path.basename(os.path.normpath(folder)))
  return HubModule(folder=folder, checkpoint=checkpoint, vocab_file=vocab_file,
                   do_lower_case=do_lower_case, config=config, heads_from=heads_from,
                   casing_from=casing_from)
