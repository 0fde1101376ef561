"""The HTML head view and PNG pictures opened and checked: every token, every layer and head,
the embedded weights, the PNG's pixel size from its header; PCA against an eigendecomposition."""

import json
import os
import re
import struct
import sys

import numpy as np
import pytest

import bert_tf
from bert_tf import visualize


def png_size(path):
  """(width, height) from the PNG signature and IHDR chunk (PNG spec, section 11.2.2)."""
  data = open(path, "rb").read(24)
  assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
  return struct.unpack(">II", data[16:24])


def png_pixels(path):
  from matplotlib import image  # pylint: disable=import-outside-toplevel
  return image.imread(path)


def _embedded_data(page):
  match = re.search(r'<script type="application/json" class="btv-data">(.*?)</script>',
                    page, re.S)
  return json.loads(match.group(1))


@pytest.fixture(scope="module")
def minilm_attention(minilm_bert):
  out = minilm_bert(("The bank by the river.", "It closed <early> & late."),
                    output_attentions=True)
  tokens = out.tokens[0]
  return tokens, np.stack(out.attentions)[:, 0]  # [L,N,S,S]


def test_head_view_html(minilm_attention, tmp_path):
  tokens, attentions = minilm_attention
  path = tmp_path / "heads.html"
  returned = visualize.head_view_html(tokens, attentions, str(path), title="bank & river")
  page = path.read_text(encoding="utf-8")
  assert page == returned
  data = _embedded_data(page)
  assert data["tokens"] == tokens and "<" in tokens and "&" in tokens
  assert (data["layers"], data["heads"]) == (6, 12)
  weights = np.array(data["attention"])
  assert weights.shape == (6, 12, len(tokens), len(tokens))
  np.testing.assert_allclose(weights, attentions, atol=6e-6)
  # Every token is shown (HTML-escaped) in the page's token list.
  listed = re.search(r'tokens: (.*?)</p>', page, re.S).group(1)
  assert re.findall(r"<code>(.*?)</code>", listed) == [
      t.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") for t in tokens]
  # One layer option per layer, one toggle per head, one model-view cell per (layer, head).
  assert len(re.findall(r'<option value="\d+">layer', page)) == 6
  assert len(re.findall(r'class="btv-toggle" data-head="\d+"', page)) == 12
  cells = re.findall(r'<canvas data-layer="(\d+)" data-head="(\d+)"', page)
  assert sorted((int(l), int(h)) for l, h in cells) == [(l, h) for l in range(6)
                                                         for h in range(12)]
  assert "<title>bank &amp; river</title>" in page
  # Self-contained: nothing loaded from elsewhere.
  assert not re.search(r"<(script|link|img|iframe)[^>]*(src|href)=", page)
  assert "https://" not in page.replace("http://www.w3.org/2000/svg", "")


def test_views_are_notebook_fragments_with_ids_of_their_own(minilm_attention):
  tokens, attentions = minilm_attention
  first, second = (visualize.attention_view(tokens, attentions) for _ in range(2))
  ids = []
  for view in (first, second):
    fragment = view._repr_html_()  # What Jupyter's display() shows.
    assert fragment.startswith('<div class="btv-root" id="btv-') and fragment.endswith("</div>")
    assert "<html" not in fragment and "<body" not in fragment
    # Styles only apply under the view's root class, so they leave a notebook alone.
    style = re.search(r"<style>(.*?)</style>", fragment, re.S).group(1)
    assert all(rule.strip().startswith(".btv-root") for rule in style.split("}") if rule.strip())
    ids.append(re.match(r'<div class="btv-root" id="([^"]+)"', fragment).group(1))
    assert view.html.startswith("<!DOCTYPE html>") and fragment in view.html
  assert ids[0] != ids[1]
  # Inside a view, elements are found through its root, never by a page-wide id.
  assert re.findall(r'\bid="', first.fragment) == ['id="']


def test_head_view_survives_script_like_tokens():
  tokens = ["[CLS]", "</script>", "<!--", "[SEP]"]
  attentions = np.full((1, 2, 4, 4), 0.25, np.float32)
  page = visualize.head_view_html(tokens, attentions)
  assert page.count("</script>") == 2  # Only the two script elements close.
  assert _embedded_data(page)["tokens"] == tokens


def test_head_view_shape_errors():
  with pytest.raises(bert_tf.BertTfError, match=r"attentions cover 3 tokens but 2 tokens"):
    visualize.head_view_html(["a", "b"], np.zeros((1, 1, 3, 3)))
  with pytest.raises(bert_tf.BertTfError, match=r"must be \[layers, heads, tokens, tokens\]"):
    visualize.head_view_html(["a"], np.zeros((1, 1, 1)))


def _inside(box, outer):
  return (box.x0 >= outer.x0 - 0.5 and box.y0 >= outer.y0 - 0.5 and box.x1 <= outer.x1 + 0.5
          and box.y1 <= outer.y1 + 0.5)


def _overlap(a, b):
  return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def _pixel(pixels, figure, ax, x, y):
  """RGB of the saved PNG at data point (x, y) of ``ax`` (display y grows upwards)."""
  px, py = ax.transData.transform((x, y))
  return pixels[int(round(pixels.shape[0] - py)), int(round(px)), :3]


def test_attention_grid_shows_tokens_colour_bar_and_titles(minilm_attention, tmp_path):
  from matplotlib import colormaps  # pylint: disable=import-outside-toplevel
  tokens, attentions = minilm_attention
  figure = visualize.attention_heatmaps_figure(tokens, attentions, layers=[0, -1],
                                               heads=[0, 1, 2], dpi=60)
  figure.canvas.draw()
  renderer = figure.canvas.get_renderer()
  frame = figure.bbox
  colorbars = [ax for ax in figure.axes if ax.get_ylabel() == "attention weight"]
  assert len(colorbars) == 1 and colorbars[0].get_ylim() == (0.0, 1.0)
  heatmaps = [ax for ax in figure.axes if ax.get_title()]
  assert sorted(ax.get_title() for ax in heatmaps) == sorted(
      f"layer {l} head {h}" for l in (0, 5) for h in (0, 1, 2))
  grid = {ax.get_title(): ax for ax in heatmaps}
  for title, ax in grid.items():
    # The tokens label the first column (from, y) and the bottom row (to, x), a tick per
    # token; inner heatmaps (same tokens) have no ticks.
    first_column, bottom_row = title.endswith("head 0"), title.startswith("layer 5")
    shown = lambda labels: [t.get_text() for t in labels if t.get_visible()]  # noqa: E731
    assert shown(ax.get_yticklabels()) == (tokens if first_column else [])
    assert shown(ax.get_xticklabels()) == (tokens if bottom_row else [])
    assert list(ax.get_yticks()) == (list(range(len(tokens))) if first_column else [])
    assert list(ax.get_xticks()) == (list(range(len(tokens))) if bottom_row else [])
    # The title is whole inside the picture and covers no other heatmap.
    box = ax.title.get_window_extent(renderer)
    assert _inside(box, frame), title
    assert not any(_overlap(box, other.get_window_extent(renderer))
                   for other in figure.axes if other is not ax), title
    for label in ax.get_xticklabels() + ax.get_yticklabels():
      if label.get_visible():
        assert _inside(label.get_window_extent(renderer), frame), label.get_text()
  assert _inside(colorbars[0].get_tightbbox(renderer), frame)
  # The saved pixels: each heatmap cell has the colour of its weight, the colour bar runs
  # from light (0) to dark (1).
  path = tmp_path / "grid.png"
  visualize._save_png(figure, str(path))  # pylint: disable=protected-access
  assert png_size(path) == (round(figure.get_figwidth() * 60), round(figure.get_figheight() * 60))
  pixels = png_pixels(path)
  blues = colormaps["Blues"]
  ax = grid["layer 5 head 2"]
  for i, j in [(0, 0), (3, 1), (len(tokens) - 1, 2), (5, len(tokens) - 1)]:
    np.testing.assert_allclose(_pixel(pixels, figure, ax, j, i),
                               blues(float(attentions[5, 2, i, j]))[:3], atol=2.5 / 255)
  bar = colorbars[0]
  for value in (0.1, 0.5, 0.9):
    np.testing.assert_allclose(_pixel(pixels, figure, bar, 0.5, value), blues(value)[:3],
                               atol=2.5 / 255)


def test_single_heatmap_is_big_enough_to_read(minilm_attention, tmp_path):
  tokens, attentions = minilm_attention
  path = tmp_path / "one.png"
  visualize.attention_heatmaps_png(tokens, attentions, str(path), layers=5, heads=11)
  width, height = png_size(path)
  assert width >= 600 and height >= 600
  figure = visualize.attention_heatmaps_figure(tokens, attentions, layers=5, heads=11)
  figure.canvas.draw()
  renderer = figure.canvas.get_renderer()
  ax = next(ax for ax in figure.axes if ax.get_title() == "layer 5 head 11")
  box = ax.get_window_extent(renderer)
  assert box.width >= 450 and box.height >= 450  # The heatmap itself, in pixels.
  assert [t.get_text() for t in ax.get_xticklabels() if t.get_visible()] == tokens
  assert [t.get_text() for t in ax.get_yticklabels() if t.get_visible()] == tokens
  # Token labels do not run into each other.
  labels = [t.get_window_extent(renderer) for t in ax.get_yticklabels()]
  assert not any(_overlap(a, b) for a, b in zip(labels, labels[1:]))
  with pytest.raises(bert_tf.BertTfError, match="head 12 is out of range"):
    visualize.attention_heatmaps_png(tokens, attentions, str(path), heads=[12])


def test_pca_2d_equals_eigendecomposition():
  rng = np.random.RandomState(0)
  points = rng.randn(30, 6) @ np.diag([5.0, 3.0, 1.0, 0.5, 0.2, 0.1]) + 7.0
  coords, ratios = visualize.pca_2d(points)
  centred = points - points.mean(axis=0)
  eigenvalues, eigenvectors = np.linalg.eigh(np.cov(centred, rowvar=False))
  top = eigenvectors[:, ::-1][:, :2]
  expected = centred @ top
  for k in range(2):  # Each axis is defined up to its sign.
    sign = np.sign(coords[:, k] @ expected[:, k])
    np.testing.assert_allclose(coords[:, k], sign * expected[:, k], atol=1e-9)
  np.testing.assert_allclose(ratios, eigenvalues[::-1][:2] / eigenvalues.sum(), atol=1e-12)
  # Points on the line y = 2x: one component, at +-t*sqrt(5) from the mean.
  t = np.array([-1.0, 0.0, 2.0])
  line, ratios = visualize.pca_2d(np.stack([t, 2 * t], axis=1))
  np.testing.assert_allclose(np.abs(line[:, 0]), np.abs(t - t.mean()) * np.sqrt(5))
  np.testing.assert_allclose(line[:, 1], 0, atol=1e-12)
  np.testing.assert_allclose(ratios, [1.0, 0.0], atol=1e-12)


def test_spread_out_hand_worked():
  line = np.stack([np.arange(11.0), np.zeros(11)], axis=1)
  # Farthest from the mean first (0 and 10 tie: the first), then the farthest from those.
  assert visualize.spread_out(line, 3) == [0, 5, 10]
  assert visualize.spread_out(line, 20) == list(range(11))


def _sentences(count=100):
  rng = np.random.RandomState(1)
  points = np.concatenate([rng.randn(count // 2, 16) + 2, rng.randn(count - count // 2, 16) - 2])
  labels = [f"sentence {i}: he sat on the bank of the river and watched" for i in range(count)]
  return points, labels, ["river"] * (count // 2) + ["money"] * (count - count // 2)


@pytest.mark.parametrize("mode,count", [("short", 12), ("all", 100), ("none", 0)])
def test_pca_labels(tmp_path, mode, count):
  points, labels, groups = _sentences()
  figure = visualize.pca_scatter_figure(points, labels, groups=groups, label_mode=mode)
  figure.canvas.draw()
  renderer = figure.canvas.get_renderer()
  ax = figure.axes[0]
  texts = [t for t in ax.texts]
  assert len(texts) == count
  limit = {"short": 24, "all": 60}.get(mode, 0)
  for t in texts:
    index = int(re.match(r"sentence (\d+):", t.get_text()).group(1))
    full = labels[index]
    assert t.get_text() == (full if len(full) <= limit else full[:limit - 3] + "...")
  if mode == "short":
    boxes = [t.get_window_extent(renderer) for t in texts]
    assert all(_inside(b, figure.bbox) for b in boxes)
    assert not any(_overlap(a, b) for k, a in enumerate(boxes) for b in boxes[k + 1:])
  assert [t.get_text() for t in ax.get_legend().get_texts()] == ["river", "money"]
  path = tmp_path / "pca.png"
  visualize.pca_scatter_png(points, labels, str(path), size_inches=(5, 4), dpi=50,
                            groups=groups, label_mode=mode)
  assert png_size(path) == (250, 200)


def test_pca_errors(tmp_path):
  rng = np.random.RandomState(1)
  path = tmp_path / "pca.png"
  with pytest.raises(bert_tf.BertTfError, match="3 labels for 5 embeddings"):
    visualize.pca_scatter_png(rng.randn(5, 8), ["x"] * 3, str(path))
  with pytest.raises(bert_tf.BertTfError, match="PCA needs at least 2 embeddings"):
    visualize.pca_2d(np.zeros((1, 4)))
  with pytest.raises(bert_tf.BertTfError,
                     match="labels must be one of none, short, all, got 'some'"):
    visualize.pca_scatter_png(rng.randn(5, 8), ["x"] * 5, str(path), label_mode="some")


def test_png_without_matplotlib_is_a_one_line_error(tmp_path, monkeypatch):
  monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
  with pytest.raises(bert_tf.BertTfError, match=r"^PNG pictures need matplotlib: pip install "
                     r"'bert_tf\[plots\]'"):
    visualize.pca_scatter_png(np.eye(3), ["a", "b", "c"], str(tmp_path / "x.png"))


# ---------------------------------------------------------------------------------------------
# bertviz's calls: head_view / model_view with its arguments and tensor forms.
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm_pair(minilm_bert):
  out = minilm_bert([("The cat sat on the mat.", "It slept.")], output_attentions=True)
  return out.tokens[0], out.attentions, int(np.argmax(out.input_type_ids[0]))


def _forms(attentions):
  """One text's attention in the forms bertviz users and bert_tf users hand over."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  forms = {"bert_tf out.attentions": attentions,
           "list of tf tensors": [tf.constant(a) for a in attentions],
           "numpy [L,N,S,S]": np.concatenate(attentions),
           "np.stack(out.attentions)": np.stack(attentions),
           "list of [N,S,S]": [a[0] for a in attentions]}
  try:
    import torch  # pylint: disable=import-outside-toplevel
  except ImportError:
    return forms
  # As transformers gives them: a tuple of [1,N,S,S] torch tensors (one needing grad).
  forms["tuple of torch tensors"] = tuple(torch.tensor(a, requires_grad=(k == 0))
                                         for k, a in enumerate(attentions))
  return forms


def test_bertviz_head_view_call(minilm_pair):
  tokens, attentions, b = minilm_pair
  expected = np.concatenate(attentions)  # [L,N,S,S]
  for name, attention in _forms(attentions).items():
    # bertviz's positional order (attention, tokens, sentence_b_start) and its keywords.
    view = visualize.head_view(attention, tokens, b, html_action="return")
    data = _embedded_data(view.data)
    np.testing.assert_allclose(data["attention"], expected, atol=6e-6, err_msg=name)
    assert data["tokens"] == tokens and data["sentence_b_start"] == b, name
  view = visualize.head_view(attention=attentions, tokens=tokens, layer=3, heads=[1, 4],
                             include_layers=[1, 3, 5], html_action="return")
  data = _embedded_data(view.data)
  np.testing.assert_allclose(data["attention"], expected[[1, 3, 5]], atol=6e-6)
  assert (data["layer_labels"], data["layer"], data["shown_heads"]) == ([1, 3, 5], 1, [1, 4])
  assert data["sentence_b_start"] is None and '<select class="btv-filter">' not in view.data
  assert re.findall(r'<option value="(\d)">layer (\d)</option>', view.data) == [
      ("0", "1"), ("1", "3"), ("2", "5")]
  # A head view alone: no model-view grid.
  assert "<svg" in view.data and "<canvas" not in view.data
  # bert_tf's earlier order (tokens, attention) is the same view.
  older = _embedded_data(visualize.head_view(tokens, attentions, html_action="return").data)
  assert older["tokens"] == tokens and older["attention"] == _embedded_data(
      visualize.head_view(attentions, tokens, html_action="return").data)["attention"]


def test_bertviz_model_view_call(minilm_pair):
  tokens, attentions, b = minilm_pair
  expected = np.concatenate(attentions)
  view = visualize.model_view(attentions, tokens, sentence_b_start=b, include_layers=[0, 5],
                              include_heads=[2, 7, 11], html_action="return")
  data = _embedded_data(view.data)
  np.testing.assert_allclose(data["attention"], expected[[0, 5]][:, [2, 7, 11]], atol=6e-6)
  assert (data["layer_labels"], data["head_labels"]) == ([0, 5], [2, 7, 11])
  assert data["dark"] is True and 'class="btv-root btv-dark"' in view.data  # bertviz's default
  cells = re.findall(r'<canvas data-layer="(\d)" data-head="(\d)"[^>]*title="([^"]*)"',
                     view.data)
  assert [t for _, _, t in cells] == [f"layer {l}, head {h}" for l in (0, 5) for h in (2, 7, 11)]
  assert '<select class="btv-filter">' in view.data and '<svg class="btv-lines"' not in view.data
  light = visualize.model_view(attentions, tokens, display_mode="light", html_action="return")
  assert _embedded_data(light.data)["dark"] is False


def test_bertviz_calls_outside_a_notebook_return_the_view(minilm_pair, tmp_path):
  tokens, attentions, _ = minilm_pair
  view = visualize.head_view(attentions, tokens)  # html_action="view", but no kernel here.
  assert isinstance(view, visualize.AttentionView)
  assert "display() it in Jupyter" in repr(view)
  assert view.save(str(tmp_path / "h.html")) and (tmp_path / "h.html").read_text() == view.html


@pytest.mark.parametrize("call,message", [
    (lambda t, a: visualize.head_view(a, t, layer=4, include_layers=[0, 1]),
     r"^layer 4 is not in include_layers: \[0, 1\]$"),
    (lambda t, a: visualize.head_view([np.concatenate([x, x]) for x in a], t),
     r"^attention\[0\] has a batch of 2 texts: give one text's attention"),
    (lambda t, a: visualize.head_view(a, t, html_action="show"),
     r"^html_action must be 'view' or 'return', got 'show'$"),
    (lambda t, a: visualize.head_view(a, t, sentence_b_start=0),
     r"^sentence_b_start 0 must be inside the \d+ tokens"),
    # One past the last token is no token: sentence B would be empty (went through).
    (lambda t, a: visualize.model_view(a, t, sentence_b_start=len(t)),
     r"^sentence_b_start (\d+) must be inside the \1 tokens"),
    (lambda t, a: visualize.head_view(encoder_attention=a, encoder_tokens=t),
     r"^bert_tf's views show a BERT's self-attention"),
    (lambda t, a: visualize.model_view(a, t, display_mode="grey"),
     r"^display_mode must be 'dark' or 'light', got 'grey'$"),
    (lambda t, a: visualize.model_view(a, t[:-1]),
     r"^attentions cover \d+ tokens but \d+ tokens were given$"),
    (lambda t, a: visualize.model_view(a, None), r"^tokens is required"),
])
def test_bertviz_call_errors(minilm_pair, call, message):
  tokens, attentions, _ = minilm_pair
  with pytest.raises(bert_tf.BertTfError, match=message):
    call(tokens, attentions)


def test_padded_batch_output_is_trimmed_to_the_text(minilm_bert):
  # A batch pads the short text; its attention without the batch axis and with the padding
  # (zeros, as bert_tf writes them) is the same view as the text run alone.
  out = minilm_bert(["A short one.", "A much longer text than the first one is."],
                    output_attentions=True)
  alone = minilm_bert("A short one.", output_attentions=True)
  padded = [a[0:1] for a in out.attentions]
  assert padded[0].shape[-1] > len(out.tokens[0])
  data = _embedded_data(visualize.head_view(padded, out.tokens[0], html_action="return").data)
  np.testing.assert_allclose(data["attention"], np.concatenate(alone.attentions), atol=2e-5)


# ---------------------------------------------------------------------------------------------
# Readable pictures: token labels of a big grid, a focal word in cut labels.
# ---------------------------------------------------------------------------------------------


def _random_attention(layers, heads, count, seed=0):
  rng = np.random.RandomState(seed)
  return rng.dirichlet(np.ones(count) * 0.3, size=(layers, heads, count)).astype(np.float32)


def test_big_grid_is_split_to_keep_labels_readable(tmp_path):
  # 56 tokens, 1 layer x 12 heads: one 40-inch figure would need 3.4-pt labels
  # (0.8 * 72 pt * 40 / 12 in / 56 rows); at 6 pt or more, two figures of 1 x 6 heatmaps.
  count = 56
  tokens = [f"tok{i}" for i in range(count)]
  attentions = _random_attention(1, 12, count)
  pages = visualize.heatmap_pages(count, [0], list(range(12)))
  assert pages == [([0], [0, 1, 2, 3, 4, 5]), ([0], [6, 7, 8, 9, 10, 11])]
  paths = visualize.attention_heatmaps_png(tokens, attentions, str(tmp_path / "grid.png"),
                                           dpi=10)
  assert [p.rsplit("/", 1)[-1] for p in paths] == ["grid-layers0-0-heads0-5.png",
                                                   "grid-layers0-0-heads6-11.png"]
  assert not (tmp_path / "grid.png").exists()
  figure = visualize.attention_heatmaps_figure(tokens, attentions, heads=pages[1][1], dpi=10)
  for path in paths:  # Both blocks are the same size.
    width, height = png_size(path)
    assert abs(width - figure.get_figwidth() * 10) <= 1
    assert abs(height - figure.get_figheight() * 10) <= 1
  assert max(figure.get_figwidth(), figure.get_figheight()) <= 40 + 3  # + labels, colour bar
  labels = [t for ax in figure.axes if ax.get_title()  # The heatmaps, not the colour bar.
            for t in ax.get_yticklabels() + ax.get_xticklabels() if t.get_visible()]
  # The first heatmap's y axis (from) and every heatmap's x axis (to, the bottom row).
  assert [t.get_text() for t in labels] == tokens * (1 + 6)
  assert min(t.get_fontsize() for t in labels) >= visualize.MIN_LABEL_POINTS == 6
  assert sorted(ax.get_title() for ax in figure.axes if ax.get_title()) == sorted(
      f"layer 0 head {h}" for h in range(6, 12))


def test_grid_that_fits_stays_one_figure(tmp_path, monkeypatch):
  tokens = [f"t{i}" for i in range(12)]
  paths = visualize.attention_heatmaps_png(tokens, _random_attention(2, 3, 12),
                                           str(tmp_path / "g.png"), dpi=10)
  assert paths == [str(tmp_path / "g.png")]
  # A split picture of that name replaces it, and the other way round: the earlier files,
  # left beside the new ones, were taken for the new text's (and another name's stay).
  (tmp_path / "other-layers0-0-heads0-5.png").write_bytes(b"x")
  (tmp_path / "g-notes.png").write_bytes(b"x")
  monkeypatch.chdir(tmp_path)  # a name without a folder
  long_text = [f"tok{i}" for i in range(56)]
  split = visualize.attention_heatmaps_png(long_text, _random_attention(1, 12, 56), "g.png",
                                           dpi=10)
  assert split == ["g-layers0-0-heads0-5.png", "g-layers0-0-heads6-11.png"]
  assert sorted(os.listdir(tmp_path)) == ["g-layers0-0-heads0-5.png",
                                          "g-layers0-0-heads6-11.png", "g-notes.png",
                                          "other-layers0-0-heads0-5.png"]
  assert visualize.attention_heatmaps_png(tokens, _random_attention(2, 3, 12), "g.png",
                                          dpi=10) == ["g.png"]
  assert sorted(os.listdir(tmp_path)) == ["g-notes.png", "g.png",
                                          "other-layers0-0-heads0-5.png"]


@pytest.mark.parametrize("label,word,expected", [
    # Hand-worked: the word whole, as central as the label allows, "..." where cut.
    ("In the morning we walked a long way down to the river bank", "bank",
     "...own to the river bank"),
    ("sentence 7: he sat on the long and muddy bank of the river", "bank",
     "...muddy bank of the..."),
    ("Banking on the bank holiday we went to the bank of the river", "bank",
     "Banking on the bank h..."),  # The first whole "bank" is inside the plain cut.
    ("he sat on the bank of the river and watched the boats", None,
     "he sat on the bank of..."),
    ("a b c d e f g h i j k l supercalifragilisticexpialidocious m", "supercalifragilistic"
     "expialidocious", "...supercalifragilisticexpialidocious..."),
    ("short", "bank", "short"),
])
def test_shorten_around(label, word, expected):
  assert visualize.shorten_around(label, word, 24) == expected


def test_pca_labels_show_the_focal_word(tmp_path):
  rng = np.random.RandomState(2)
  labels = [f"Sentence number {i} says that they sat by the bank" for i in range(10)]
  figure = visualize.pca_scatter_figure(rng.randn(10, 8), labels, focus="bank")
  texts = [t.get_text() for t in figure.axes[0].texts]
  assert len(texts) == 10
  for text in texts:
    assert re.fullmatch(r"\.\.\..* bank", text) and len(text) <= visualize.SHORT_CHARS, text
  # Without a focus the plain cut hides it.
  plain = visualize.pca_scatter_figure(rng.randn(10, 8), labels)
  assert not any("bank" in t.get_text() for t in plain.axes[0].texts)
