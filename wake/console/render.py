"""How the console shows stored text (`untrusted.spotlight`): the templates' `data` and `rendered` filters.

Jinja's autoescape keeps stored text from being HTML; these keep it from posing as the harness on
the page. `data` shows one stored string (a fact's value, a finding's rule, path or excerpt, a
commitment's title, a memory path, an answer, the model's words) as a marked span, `<span
class="data">`, with its line breaks, controls, invisible and bidi characters shown as visible
escapes; `data_lines` does it a line at a time (an excerpt). `rendered` shows a text the harness
already rendered for the model (an arrival block, a message as sent): its lines and marks kept,
every other control, invisible and bidi character escaped.
"""

from __future__ import annotations

import markupsafe

from untrusted import spotlight

CLASS = "data"


def data(value: object, limit: int | None = None) -> markupsafe.Markup:
    """One stored string, marked: a span of the `data` class whose text is neutralised."""
    if value is None:
        return markupsafe.Markup("-")
    shown = spotlight.neutral(spotlight.clipped(str(value), limit))
    return markupsafe.Markup('<span class="{}" title="stored text">{}</span>').format(CLASS, shown)


def data_lines(value: object, max_lines: int | None = None, limit: int | None = None) -> markupsafe.Markup:
    """A stored text of many lines, each line its own marked span (for a `<pre>`)."""
    lines = str(value or "").split("\n")
    shown = lines if max_lines is None else lines[:max_lines]
    out = markupsafe.Markup("\n").join(data(line, limit) for line in shown)
    if len(lines) > len(shown):
        out += markupsafe.Markup("\n") + markupsafe.escape(spotlight.mark(f"{len(lines) - len(shown)} more lines not shown"))
    return out


def rendered(value: object) -> str:
    """A text the harness rendered (its marks kept), for the page: controls and invisible characters escaped."""
    return spotlight.terminal(str(value)) if value is not None else ""


FILTERS = {"data": data, "data_lines": data_lines, "rendered": rendered}
