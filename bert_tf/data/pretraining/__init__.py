"""Pretraining instances: Google's create_pretraining_data.py, draw for draw, many times faster.

Reference mode (``num_workers=0``) gives the original's records exactly: the same input files,
vocab, flags and seed produce the same instances in the same order in the same output files,
every feature of every record (tests/data/ checks this against bert-tensorflow 1.0.4). The
algorithm is the original's (REFERENCE.md "Pretraining data"), one module per stage, in order:

  corpus       read every line of every file (one sentence per line, blank line = new
               document; documents continue across files), tokenize; drop empty documents;
  instances    shuffle the documents; for each of ``dupe_factor`` passes, for each document,
               cut it into [CLS] A [SEP] B [SEP] instances (B random with probability 0.5) and
               mask them (80% [MASK], 10% kept, 10% random word); shuffle all instances;
  records      serialize them and write them round-robin over the output files.

One ``random.Random(random_seed)`` makes every draw, in the original's order;
``reference_random`` makes those draws fast without changing one: from the Mersenne Twister's
32-bit words made in bulk, with regular expressions (in C) finding where the words of a
candidate shuffle and of the mask decisions end, and numpy replaying thousands of them at once.
``summary`` counts what each stage did. ``run`` is the execution layer over the stages: the
whole job in this process (reference mode) or sharded over worker processes (sharded mode,
deterministic but not the original's records). Imports point one way: ``run`` -> ``instances``
-> ``corpus``, ``records``, ``reference_random``, and ``run`` -> ``summary``; no stage imports
``run``.

  from bert_tf.data.pretraining import InstanceOptions, create_pretraining_data
"""

from bert_tf.data.pretraining.corpus import (Corpus, LineTokenizer, expand_input_files,
                                             iter_lines, read_corpus)
from bert_tf.data.pretraining.instances import (CLS, MASK, SEP, UNK, InstanceMaker,
                                                InstanceOptions, records_from_corpus,
                                                records_from_text, special_token_ids)
from bert_tf.data.pretraining.records import RecordEncoder, RoundRobinWriter, write_joined
from bert_tf.data.pretraining.reference_random import (CHAR_BASE, ReferenceRandom, Walks,
                                                       shuffle_from_walk, threshold)
from bert_tf.data.pretraining.run import create_pretraining_data, plan_shards
from bert_tf.data.pretraining.summary import Summary

__all__ = [
    "CHAR_BASE", "CLS", "Corpus", "InstanceMaker", "InstanceOptions", "LineTokenizer", "MASK",
    "RecordEncoder", "ReferenceRandom", "RoundRobinWriter", "SEP", "Summary", "UNK", "Walks",
    "create_pretraining_data", "expand_input_files", "iter_lines", "plan_shards", "read_corpus",
    "records_from_corpus", "records_from_text", "shuffle_from_walk", "special_token_ids",
    "threshold", "write_joined",
]

# Private names that code outside this package uses (tests/data/test_tfrecord.py: _glob;
# data/pretraining_beam.py: the sharded-mode worker, run in Beam's workers).
from bert_tf.data.pretraining.corpus import _glob  # noqa: F401 pylint: disable=unused-import
from bert_tf.data.pretraining.run import (  # noqa: F401 pylint: disable=unused-import
    _init_worker, _peak_rss_mb, _set_worker_state, _shard_records)
