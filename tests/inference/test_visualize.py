"""The HTML head view and PNG pictures opened and checked: every token, every layer and head,
the embedded weights, the PNG's pixel size from its header; PCA against an eigendecomposition."""

import json
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
  match = re.search(r'<script type="application/json" id="attention-data">(.*?)</script>',
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
  # One layer option per layer, one toggle per head, one grid cell per (layer, head).
  assert len(re.findall(r'<option value="\d+" data-layer="\d+">', page)) == 6
  assert len(re.findall(r'class="head-toggle" data-head="\d+"', page)) == 12
  cells = re.findall(r'<canvas data-layer="(\d+)" data-head="(\d+)"', page)
  assert sorted((int(l), int(h)) for l, h in cells) == [(l, h) for l in range(6)
                                                         for h in range(12)]
  assert "<title>bank &amp; river</title>" in page
  # Self-contained: nothing loaded from elsewhere.
  assert not re.search(r"<(script|link|img|iframe)[^>]*(src|href)=", page)
  assert "https://" not in page.replace("http://www.w3.org/2000/svg", "")


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


def test_attention_heatmaps_png(minilm_attention, tmp_path):
  tokens, attentions = minilm_attention
  path = tmp_path / "grid.png"
  visualize.attention_heatmaps_png(tokens, attentions, str(path), layers=[0, -1],
                                   heads=[0, 1, 2, 3], cell_inches=1.5, dpi=40)
  assert png_size(path) == (4 * 60, 2 * 60)  # heads x layers cells of 1.5 in at 40 dpi.
  pixels = png_pixels(path)
  assert pixels.shape[:2] == (120, 240) and pixels[..., :3].std() > 0.05
  single = tmp_path / "one.png"
  visualize.attention_heatmaps_png(tokens, attentions, str(single), layers=5, heads=11,
                                   cell_inches=4, dpi=50)
  assert png_size(single) == (200, 200)
  with pytest.raises(bert_tf.BertTfError, match="head 12 is out of range"):
    visualize.attention_heatmaps_png(tokens, attentions, str(single), heads=[12])


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


def test_pca_scatter_png(tmp_path):
  rng = np.random.RandomState(1)
  path = tmp_path / "pca.png"
  visualize.pca_scatter_png(rng.randn(5, 8), [f"point {i}" for i in range(5)], str(path),
                            size_inches=(5, 4), dpi=50, groups=["a", "a", "b", "b", "b"])
  assert png_size(path) == (250, 200)
  with pytest.raises(bert_tf.BertTfError, match="3 labels for 5 embeddings"):
    visualize.pca_scatter_png(rng.randn(5, 8), ["x"] * 3, str(path))
  with pytest.raises(bert_tf.BertTfError, match="PCA needs at least 2 embeddings"):
    visualize.pca_2d(np.zeros((1, 4)))


def test_png_without_matplotlib_is_a_one_line_error(tmp_path, monkeypatch):
  monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
  with pytest.raises(bert_tf.BertTfError, match=r"^PNG pictures need matplotlib: pip install "
                     r"'bert_tf\[plots\]'"):
    visualize.pca_scatter_png(np.eye(3), ["a", "b", "c"], str(tmp_path / "x.png"))
