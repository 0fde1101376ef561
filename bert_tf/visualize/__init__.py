"""Pictures of a BERT.

- ``attention_html``: the head view and model view (HTML), with bertviz's calls:
  ``from bert_tf.visualize import head_view, model_view`` runs a notebook written for bertviz;
  ``attention_view`` is both, linked (what the CLI's ``attention --output_html`` writes).
- ``heatmaps``: attention heatmaps as a PNG (matplotlib).
- ``scatter``: 2-D PCA of embeddings, as a PNG or an interactive HTML scatter.
- ``page``: what the HTML pictures share (``AttentionView``, ``page_html``, bertviz's
  ``html_action``); ``png``: matplotlib off-screen, saved atomically.

Every HTML view is one self-contained fragment (inline data, script and scoped style; nothing
fetched from the network) under an id of its own; matplotlib is an optional extra
(``pip install 'bert_tf[plots]'``).
"""

from bert_tf.visualize.attention_html import (LINE_THRESHOLD, SENTENCE_FILTERS,  # noqa: F401
                                              as_attention, attention_view, head_view,
                                              head_view_html, model_view)
from bert_tf.visualize.heatmaps import (MIN_LABEL_POINTS,  # noqa: F401
                                        attention_heatmaps_figure, attention_heatmaps_png,
                                        heatmap_pages)
from bert_tf.visualize.page import AttentionView, page_html  # noqa: F401
from bert_tf.visualize.png import require_matplotlib  # noqa: F401
from bert_tf.visualize.png import save_png as _save_png  # noqa: F401
from bert_tf.visualize.scatter import (LABEL_MODES, LONG_CHARS, SHORT_CHARS,  # noqa: F401
                                       SHORT_LABELS, pca_2d, pca_scatter, pca_scatter_figure,
                                       pca_scatter_html, pca_scatter_png, shorten_around,
                                       spread_out)
