"""Reading a rendered block in a test: each data span (`untrusted.spotlight`) replaced by its text, so
that an assertion reads the harness's marks (`⟦did, 4 Dec 2026⟧`, `⟦verified @1a2b3c4d⟧`) beside
what was stored. That every stored string is a span is what tests/unit/test_untrusted_render.py checks."""

from __future__ import annotations

import re

_SPAN = re.compile(r"⟪(?:[0-9a-f]{6}|data):([^⟪⟫⟦⟧\n]*)⟫")


def plain(text: str) -> str:
    return _SPAN.sub(lambda m: m.group(1), text)
