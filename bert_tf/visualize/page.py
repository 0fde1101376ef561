"""What every HTML picture shares: the view object a notebook displays, whole pages, ids, colours,
and bertviz's ``html_action`` (display in Jupyter, or return the view)."""

import html
import json
import uuid

from bert_tf import fileio
from bert_tf.errors import BertTfError

HEAD_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
               "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39",
               "#7b4173", "#3182bd")

HTML_ACTIONS = ("view", "return")


def json_in_script(data):
  # "</" would end the <script> element early; "<\/" reads the same to JSON.parse.
  return json.dumps(data, separators=(",", ":")).replace("</", "<\\/")


def whole_page(title, fragments):
  """A whole HTML document holding ``fragments`` (views' ``_repr_html_``)."""
  return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
          f"<title>{html.escape(title)}</title></head>\n<body>\n" + "\n".join(fragments) +
          "\n</body></html>\n")


def new_view_id():
  # Random, so that two views in one notebook (even of the same text) never share an id.
  return "btv-" + uuid.uuid4().hex[:12]


class AttentionView:
  """An HTML picture for a notebook or a file: ``display(view)`` in Jupyter shows it
  (``_repr_html_``: one self-contained ``<div>`` with its own style, data and script, under an
  id of its own, so several views on one page work side by side); ``view.html`` is a whole
  page; ``view.save(path)`` writes that page atomically; ``view.data`` is the fragment (as
  the ``IPython.display.HTML`` that bertviz's ``html_action="return"`` gives has)."""

  def __init__(self, fragment, title):
    self.fragment = fragment
    self.title = title

  def _repr_html_(self):
    return self.fragment

  def __repr__(self):
    return (f"<{type(self).__name__} {self.title!r}: display() it in Jupyter, or .save(path) "
            "a whole HTML page>")

  @property
  def data(self):
    return self.fragment

  @property
  def html(self):
    return whole_page(self.title, [self.fragment])

  def save(self, path):
    with fileio.atomic_write(path, "w") as f:
      f.write(self.html)
    return path


def page_html(views, title="BERT attention", path=None):
  """Several ``AttentionView``s (or scatter views) in one HTML page; written to ``path`` if
  given. Returns the HTML."""
  page = whole_page(title, [v._repr_html_() for v in views])  # pylint: disable=protected-access
  if path:
    with fileio.atomic_write(path, "w") as f:
      f.write(page)
  return page


def _in_jupyter_kernel():
  try:
    from IPython import get_ipython  # pylint: disable=import-outside-toplevel
  except ImportError:
    return False
  shell = get_ipython()
  return shell is not None and getattr(shell, "kernel", None) is not None


def act(view, html_action):
  """bertviz's ``html_action``: ``"view"`` displays ``view`` in a Jupyter kernel and returns
  None (as bertviz does); outside a kernel (a script, a terminal) there is nothing to display
  in, so the view is returned (``.save(path)`` it). ``"return"`` returns the view."""
  if html_action not in HTML_ACTIONS:
    raise BertTfError(f"html_action must be 'view' or 'return', got {html_action!r}")
  if html_action == "view" and _in_jupyter_kernel():
    from IPython.display import display  # pylint: disable=import-outside-toplevel
    display(view)
    return None
  return view
