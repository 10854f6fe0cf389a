"""wake: wakes long-lived LLM agents on a schedule, with a witness record of each wake."""

from __future__ import annotations

__version__ = "0.1.0"
