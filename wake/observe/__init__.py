"""Observing a running wake: its logs read back (`wake logs`), its Prometheus metrics, and a
refreshing status view (`wake status --watch`)."""

from __future__ import annotations
