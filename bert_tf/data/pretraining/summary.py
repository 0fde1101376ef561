"""What a run read and wrote: the counters of every stage, and the end-of-run log lines.

The original logs only the first 20 instances; this summary (counted by ``corpus``,
``instances`` and ``run``, added up over the shards of sharded mode) is bert_tf's own.
"""

import dataclasses


@dataclasses.dataclass
class Summary:
  """What a run read and wrote. ``tokens`` counts real tokens in the instances ([CLS], [SEP]
  included); ``masked`` the masked ones; ``capped`` the instances whose masks were limited by
  max_predictions_per_seq."""
  files: int = 0
  shards: int = 0
  lines: int = 0
  invalid_lines: int = 0
  empty_files: int = 0
  documents: int = 0
  empty_documents: int = 0
  one_sentence_documents: int = 0
  one_document_corpora: int = 0
  sentences: int = 0
  corpus_tokens: int = 0
  instances: int = 0
  random_next: int = 0
  tokens: int = 0
  masked: int = 0
  capped: int = 0
  seconds: float = 0.0
  peak_rss_mb: float = 0.0
  worker_peak_rss_mb: float = 0.0
  output_files: tuple = ()

  _ADDITIVE = ("files", "shards", "lines", "invalid_lines", "empty_files", "documents",
               "empty_documents", "one_sentence_documents", "one_document_corpora", "sentences",
               "corpus_tokens", "instances", "random_next", "tokens", "masked", "capped")

  def add(self, other):
    for name in self._ADDITIVE:
      setattr(self, name, getattr(self, name) + getattr(other, name))
    self.worker_peak_rss_mb = max(self.worker_peak_rss_mb, other.peak_rss_mb)

  @property
  def masked_fraction(self):
    return self.masked / self.tokens if self.tokens else 0.0

  def lines_of_text(self):
    """The end-of-run summary, a few lines for the log."""
    rate = self.instances / self.seconds if self.seconds else 0.0
    out = [
        f"read {self.files} files ({self.shards} shards), {self.lines} lines, "
        f"{self.documents} documents, {self.sentences} sentences, {self.corpus_tokens} tokens",
        f"wrote {self.instances} instances to {len(self.output_files)} files: "
        f"{self.tokens} tokens, {self.masked} masked ({self.masked_fraction:.2%}), "
        f"{self.random_next} random next sentences",
        f"time {self.seconds:.1f} s ({rate:.0f} instances/s), peak memory "
        f"{self.peak_rss_mb:.0f} MB" +
        (f" (largest worker {self.worker_peak_rss_mb:.0f} MB)" if self.worker_peak_rss_mb else ""),
    ]
    skips = []
    if self.empty_documents:
      skips.append(f"{self.empty_documents} empty documents dropped")
    if self.invalid_lines:
      skips.append(f"{self.invalid_lines} lines of invalid UTF-8 skipped")
    if self.empty_files:
      skips.append(f"{self.empty_files} input files without text")
    if self.one_sentence_documents:
      skips.append(f"{self.one_sentence_documents} one-sentence documents (random next only)")
    if self.one_document_corpora:
      skips.append(f"{self.one_document_corpora} corpora/shards of one document (random next "
                   "sentences from the same document)")
    if self.capped:
      skips.append(f"{self.capped} instances with masks capped at max_predictions_per_seq")
    if skips:
      out.append("; ".join(skips))
    return out
