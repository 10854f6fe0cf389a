"""What the test servers (Neo4j, llama.cpp, Jaeger) and the daemon tests share: a free loopback
port, and a child process that dies with the test process. One definition of each, the one the
embedded model's server uses (`wake.model.child`)."""

from __future__ import annotations

from wake.model.child import die_with_parent, free_port

__all__ = ["die_with_parent", "free_port"]
