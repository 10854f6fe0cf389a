"""`wake verify --chain --anchor` and `wake verify --chain` as subprocesses, against a real RFC 3161
timestamp authority on loopback (`openssl ts -reply` with a CA the test makes: tests/support/tsa.py),
and a chain someone rewrote consistently in the database after it was anchored."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

from ledgers import introspection
from tests.support import tsa
from tests.support.daemon_proc import query
from wake.config import Config

CLI = Callable[..., subprocess.CompletedProcess[str]]


def _anchored(url: str, ca: Path) -> str:
    return f'[anchor]\ntsa_url = "{url}"\nca_file = "{ca}"\n'


def _rewrite_from(pg_dsn: str, seq: int) -> None:
    """Rewrite the demo agent's chain consistently from link `seq`: that row's manifest root changed,
    every link from it recomputed, and the head moved to match, as someone who can write the database could."""
    rows = query(pg_dsn, "SELECT wake_id, chain_seq, chain, manifest_root, transcript_root FROM wake_introspection_ledger"
                 " WHERE agent_id = 'demo' AND chain_seq IS NOT NULL ORDER BY chain_seq")
    previous = introspection.GENESIS if seq == 1 else rows[seq - 2]["chain"]
    for r in rows[seq - 1:]:
        root = "f" * 64 if r["chain_seq"] == seq else r["manifest_root"]
        link = introspection.chain_of(previous, root, r["transcript_root"])
        query(pg_dsn, "UPDATE wake_introspection_ledger SET manifest_root = $2, chain = $3 WHERE wake_id = $1", r["wake_id"], root, link)
        previous = link
    query(pg_dsn, "UPDATE agent_chain_heads SET chain = $1 WHERE agent_id = 'demo'", previous)


def test_anchors_verify_and_a_consistent_rewrite_is_named_at_its_first_row(
    wake_cli: CLI, store_config: Callable[..., Config], pg_dsn: str, tmp_path: Path,
) -> None:
    authority = tsa.make(tmp_path)
    with tsa.serving(authority) as served:
        config = store_config(_anchored(served.url, authority.ca))
        c = ("--config", str(config.path))
        ids = []
        for n in range(3):
            done = wake_cli(*c, "up", "--json")
            assert done.returncode == 0, done.stderr
            ids.append(json.loads(done.stdout)["wake_id"])
            anchored = wake_cli(*c, "verify", "--chain", "--anchor")
            assert anchored.returncode == 0, anchored.stdout + anchored.stderr
            assert f"demo: anchored head link {n + 1} " in anchored.stdout and f"demo: {n + 1} of {n + 1} anchor(s) verify" in anchored.stdout
        again = wake_cli(*c, "verify", "--chain", "--anchor")
        assert "(anchored before)" in again.stdout and served.requests == 3  # a link already anchored is not asked for again
    clean = wake_cli(*c, "verify", "--chain")  # the authority is not needed to verify its tokens
    assert clean.returncode == 0 and "demo: OK, 3 link(s)" in clean.stdout and "demo: 3 of 3 anchor(s) verify" in clean.stdout

    _rewrite_from(pg_dsn, 2)
    # the anchors' own copy of the head rewritten too: the token is checked against the chain, not against it
    query(pg_dsn, "UPDATE chain_anchors c SET chain = l.chain FROM wake_introspection_ledger l"
          " WHERE l.agent_id = c.agent_id AND l.chain_seq = c.chain_seq")
    broken = wake_cli(*c, "verify", "--chain")
    assert broken.returncode == 1
    lines = broken.stdout.splitlines()
    assert lines[0].startswith("demo: OK, 3 link(s)")  # the rewrite is consistent: the links alone cannot tell
    assert lines[1] == "demo: ANCHOR MISMATCH (1 of 3 anchor(s) verify before it)"
    assert lines[2].startswith(f"  the chain no longer matches an anchored head after link 1, the last anchored link that matches: "
                               f"first row after it: wake {ids[1]} (link 2, ")
    assert "the token of link 2" in lines[3] and "does not verify over the link the chain has now" in lines[3]


def test_anchor_without_an_authority_or_with_one_down_is_one_line(wake_cli: CLI, store_config: Callable[..., Config], tmp_path: Path) -> None:
    plain = store_config()
    c = ("--config", str(plain.path))
    assert wake_cli(*c, "up").returncode == 0
    unset = wake_cli(*c, "verify", "--chain", "--anchor")
    assert unset.returncode == 78 and "anchor.tsa_url" in unset.stderr and unset.stderr.count("\n") == 1
    usage = wake_cli(*c, "verify", "--anchor")
    assert usage.returncode == 2 and "--anchor goes with --chain" in usage.stderr
    authority = tsa.make(tmp_path)
    with tsa.serving(authority) as served:
        url = served.url
    down = store_config(_anchored(url, authority.ca))  # the server is gone: nothing listens there now
    unreachable = wake_cli("--config", str(down.path), "verify", "--chain", "--anchor")
    assert unreachable.returncode == 69 and "timestamp authority unreachable" in unreachable.stderr
    assert query_count(down) == 0


def query_count(config: Config) -> int:
    [row] = query(config.postgres.dsn or "", "SELECT count(*) AS n FROM chain_anchors")
    return int(row["n"])
