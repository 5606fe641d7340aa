"""Strategies and oracles for the transport tests: strings as JavaScript sees them.

The oracle ``reference_payload_bytes`` is a plain per-code-point scanner written from the
``JSON.stringify`` rules, independent of the C-speed implementation under test.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from typing import Any

from hypothesis import strategies as st

SPECIAL = [
    '"',
    "\\",
    "/",
    "\x00",
    "\x01",
    "\x08",
    "\t",
    "\n",
    "\x0b",
    "\x0c",
    "\r",
    "\x1f",
    "\x7f",
    "\x80",
    "\xe9",
    "\u07ff",
    "\u0800",
    "\u2028",
    "\u2029",
    "\ufeff",
    "\uffff",
    "漢",
    "😀",
    "\U0010ffff",
    "</script>",
]
HIGH = [chr(c) for c in (0xD800, 0xD83D, 0xDBFF)]
LOW = [chr(c) for c in (0xDC00, 0xDC80, 0xDCFF, 0xDE00, 0xDFFF)]

_PAIR_PLACEHOLDER = "\ue000"
_alphabet = st.one_of(
    st.characters(codec="utf-8", exclude_characters=[_PAIR_PLACEHOLDER]),
    st.sampled_from([*SPECIAL[:-1], *HIGH, *LOW, _PAIR_PLACEHOLDER]),
)


def _with_pairs(text: str) -> str:
    # st.text() drops surrogates from its alphabet, hence lists of characters joined here.
    return text.replace(_PAIR_PLACEHOLDER, "\ud83d\ude00")


js_text = st.lists(_alphabet, max_size=120).map("".join).map(_with_pairs)
"""Strings with escapes, multi-byte characters, lone surrogates and high+low halves."""

long_js_text = st.lists(_alphabet, min_size=40, max_size=300).map("".join).map(_with_pairs)
"""The same, long enough that small budgets force a preview."""

markers = st.one_of(
    st.just("\n[... truncated for Headless transport ...]\n"),
    st.just(""),
    st.just("…"),
    js_text.filter(lambda s: len(s) < 12),
)


def is_high(ch: str) -> bool:
    return "\ud800" <= ch <= "\udbff"


def is_low(ch: str) -> bool:
    return "\udc00" <= ch <= "\udfff"


def splits_pair(s: str, index: int) -> bool:
    """Whether a cut before ``index`` separates a high surrogate from the low one after it."""
    return 0 < index < len(s) and is_high(s[index - 1]) and is_low(s[index])


def unit_costs(s: str) -> list[tuple[int, int]]:
    """``(width in code points, JSON payload bytes)`` of each unit JavaScript sees."""
    units = []
    i = 0
    while i < len(s):
        code = ord(s[i])
        if is_high(s[i]) and i + 1 < len(s) and is_low(s[i + 1]):
            units.append((2, 4))
            i += 2
            continue
        if 0xD800 <= code <= 0xDFFF:
            cost = 6
        elif code in (0x22, 0x5C):
            cost = 2
        elif code < 0x20:
            cost = 2 if code in (0x08, 0x09, 0x0A, 0x0C, 0x0D) else 6
        elif code < 0x80:
            cost = 1
        elif code < 0x800:
            cost = 2
        elif code < 0x10000:
            cost = 3
        else:
            cost = 4
        units.append((1, cost))
        i += 1
    return units


def reference_payload_bytes(s: str) -> int:
    """UTF-8 bytes of ``JSON.stringify(s)`` without the quotes, one unit at a time."""
    return sum(cost for _, cost in unit_costs(s))


def random_js_strings(count: int, *, seed: int, max_units: int = 60) -> list[str]:
    """``count`` reproducible strings over every class of character JSON treats apart.

    One third have no surrogates at all, so the C fast path is exercised as much as the
    surrogate path.
    """
    rng = random.Random(seed)
    pools = [
        [chr(c) for c in range(0x20, 0x7F)],
        [chr(c) for c in range(0x20)],
        ['"', "\\", "/", "\x7f"],
        [chr(c) for c in range(0x80, 0x100)],
        ["\u0800", "\u4e2d", "\ufeff", "\uffff", "\u2028", "\u2029"],
        ["😀", "🎉", "\U0001f600", "\U0010ffff"],
        [chr(c) for c in range(0xDC80, 0xDD00)],
        [chr(c) for c in range(0xD800, 0xDC00, 37)],
        ["\ud83d\ude00", "\udbff\udfff"],
        ["\ude00\ud83d"],
        ["</script>"],
    ]
    strings = []
    for index in range(count):
        usable = [*pools[:6], pools[10]] if index % 3 == 0 else pools
        units = rng.randint(0, max_units)
        strings.append("".join(rng.choice(rng.choice(usable)) for _ in range(units)))
    return strings


NODE = shutil.which("node")

_NODE_SCRIPT = r"""
const chunks = [];
process.stdin.on('data', (c) => chunks.push(c));
process.stdin.on('end', () => {
  const items = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  const out = items.map((s) => [Buffer.byteLength(JSON.stringify(s), 'utf8'), JSON.stringify(s)]);
  process.stdout.write(JSON.stringify(out));
});
"""


def node_stringify(strings: list[str]) -> list[tuple[int, str]]:
    """``[Buffer.byteLength(JSON.stringify(s)), JSON.stringify(s)]`` for each string, from ONE node.

    The strings travel ASCII-escaped (``json.dumps``), which carries lone surrogates
    exactly and lets ``JSON.parse`` join adjacent halves as JavaScript would.
    """
    assert NODE is not None
    done = subprocess.run(
        [NODE, "-e", _NODE_SCRIPT],
        input=json.dumps(strings).encode("ascii"),
        capture_output=True,
        timeout=60,
        check=True,
    )
    answer: list[Any] = json.loads(done.stdout)
    return [(int(length), str(text)) for length, text in answer]
