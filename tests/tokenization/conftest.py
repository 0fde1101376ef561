"""Shared inputs for the tokenization tests: a real corpus, hand-made hard lines, references."""

import inspect
import pathlib
import random
import re

import pytest

from tests.reference.google_bert import google

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures"
# A cased WordPiece vocab learned by bert_tf.vocab from the State of the Union addresses (no
# cased Google vocab ships offline); tests/fixtures/make_cased_vocab.py made it.
CASED_VOCAB = FIXTURES / "cased_vocab.txt"
# (vocab, do_lower_case) settings every differential test runs under: the real uncased vocab
# as meant and with lowercasing off (many [UNK]s, accents kept), and the cased vocab.
SETTINGS = [("uncased", True), ("uncased", False), ("cased", False)]
SETTING_IDS = ["uncased-lower", "uncased-nolower", "cased-nolower"]


def corpus_lines():
  """Every line of Python's own pydoc_data.topics (~11k lines of real English prose and code)."""
  from pydoc_data import topics
  return [line for key in sorted(topics.topics) for line in topics.topics[key].split("\n")]


# Lines chosen to hit every branch of the original's normalisation.
HARD_LINES = [
    "", " ", "\t\n\r ", "\x00", "\ufffd", "\x00\x01\x7f\x1f", "a\x00b", "a\u200bb", "a\ufeffb",
    "a\x0bb\x0cc\x1cd\x85e", "a\u2028b\u2029c", "a\u00a0b\u3000c\u2003d\u1680e",
    "Héllo Wörld, déjà vu! Ça va? Ångström naïve façade coöperate résumé",
    "ÀÁÂÃÄÅàáâãäå ÇçÑñ ŒœÆæ ß ẞ Ø ø Ł ł İstanbul ıi Σίσυφος ΟΔΟΣ ΣΑΣ σς",
    "Привет, мир! Ёжик в тумане. ПРИВЕТ",
    "北京欢迎你。我爱自然语言处理！ 日本語のテキストです。 한국어 문장입니다.",
    "𠀀𠀁 𪜀 丽 豈 々〆〤 ㈠ ㍿",
    "emoji 😀😃👍🏽 👨‍👩‍👧 🇯🇵 ❤️ ✨ 🤖",
    "ﬁnance ﬂow ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３ ² ½ ℌ ℡ ™ Ⅻ",
    "≠ ≮ a≠b ⩴ ≤≥ ¬ ° ± × ÷ € £ ¥ $ ^ ` ~ | \\ \" ' « » „ “ ” ‘ ’ ‹ › — – … · • ¶ § † ‡",
    "e\u0301 a\u0308 \u0301 \u0301\u0301 x\u0327\u0301 \u0344 \u1e9b\u0323 \u0958",
    "नमस्ते दुनिया क्षत्रिय ि ु", "مرحبا بالعالم، كيف حالك؟", "שלום עולם", "สวัสดีชาวโลก",
    "Ǆǅǆ ǈ ǋ Ǳǲǳ ΐ ΰ ﬀ ﬃ", "ᾼ ᾈ ῼ ǰ ẖ ẗ ẘ ẙ ẚ",
    "[MASK] [CLS] [SEP] [UNK] [PAD] a[MASK]b [mask] [MASK]. ##ing ## #",
    "x" * 199, "x" * 200, "x" * 201, "é" * 201, "ab" * 150 + " short",
    "supercalifragilisticexpialidocious antidisestablishmentarianism pneumonoultramicroscopic",
    "unaffable unwanted running jumped https://example.com/a?b=c&d=e#f user@example.org",
    "C++ and C# and F# 3.14159 1,000,000 -5 +6 e=mc^2 i++ a->b x::y <tag attr=\"v\"/>",
    "ＡＢＣ\u3000ｄｅｆ", "\U0001d400\U0001d41a \U0001d7d8", "\U0010fffd \U000e0001 \U000f0000",
    "tab\tseparated\tvalues\r\nwindows line", "   leading and trailing   ",
]


def random_lines(count, seed=0):
  """Seeded lines of random code points from every plane, mixed with ASCII and spaces."""
  rng = random.Random(seed)
  pools = [(0x20, 0x7E)] * 4 + [(0x80, 0x2FF), (0x300, 0x36F), (0x370, 0x52F), (0x0, 0x1F),
                                (0x2000, 0x206F), (0x3000, 0x9FFF), (0xAC00, 0xD7A3),
                                (0xE000, 0xFFFF), (0x10000, 0x1FFFF), (0x20000, 0x10FFFF)]
  lines = []
  for _ in range(count):
    chars = []
    for _ in range(rng.randint(0, 40)):
      lo, hi = rng.choice(pools)
      cp = rng.randint(lo, hi)
      if 0xD800 <= cp <= 0xDFFF:
        cp = 0x20
      chars.append(chr(cp))
    lines.append("".join(chars))
  return lines


def random_ascii_lines(count, seed=0):
  """Seeded lines of random ASCII (all 128 code points: the tokenizer's pure-ASCII path)."""
  rng = random.Random(seed)
  alphabet = [chr(c) for c in range(128)] + list("aeiouAEIOU  ") * 4
  return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60))) for _ in range(count)]


def _original_cjk_bounds():
  """The bounds of the original's CJK ranges, read from its ``_is_chinese_char``."""
  source = inspect.getsource(google("tokenization").BasicTokenizer._is_chinese_char)
  return [int(number, 16) for number in re.findall(r"0x[0-9A-Fa-f]+", source)]


def code_point_lines():
  """Every BMP code point and every 13th above it, and above it every code point within 2 of
  a bound of the original's CJK ranges (the 13th ones miss those: an astral range cut one
  short went unnoticed), 256 to a line, space-separated."""
  cps = [cp for cp in range(0x10000) if not 0xD800 <= cp <= 0xDFFF]
  cps += range(0x10000, 0x110000, 13)
  cps += sorted({bound + d for bound in _original_cjk_bounds() for d in range(-2, 3)
                 if bound + d >= 0x10000} - set(cps))
  return [" ".join(chr(cp) for cp in cps[i:i + 256]) for i in range(0, len(cps), 256)]


@pytest.fixture(scope="session")
def google_tokenization():
  """Google's original tokenization.py (bert-tensorflow 1.0.4)."""
  return google("tokenization")


@pytest.fixture(scope="session")
def lines():
  return corpus_lines()


def vocab_path(name, uncased_vocab):
  return str(uncased_vocab if name == "uncased" else CASED_VOCAB)
