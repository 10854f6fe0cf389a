"""Every Redis key wake uses, in one place. Formats take the named fields; all start `wake:`."""

from __future__ import annotations

# The agent's lease (a random token with a TTL) and its fence counter (only grows): wake.stores.lease.
LEASE = "wake:lease:{agent}"
FENCE = "wake:fence:{agent}"
# A daemon replica's heartbeat (its state as JSON, with a TTL): wake.daemon.control.
REPLICA = "wake:replica:{replica_id}"
REPLICA_MATCH = "wake:replica:*"
# `wake trigger` requests (a list the daemons pop) and each request's events: wake.daemon.control.
TRIGGERS = "wake:triggers"
# The requests a replica has taken and not yet seen through (a list per replica), so that another
# replica can give a dead one's their rows: wake.daemon.control, wake.daemon.dead_claimers.
TRIGGERS_TAKEN = "wake:triggers:taken:{replica_id}"
TRIGGERS_TAKEN_MATCH = "wake:triggers:taken:*"
TRIGGER_EVENTS = "wake:trigger:{request_id}:events"
# USD spent per agent and local day (the daily cost cap): wake.think.budget.
COST = "wake:cost:{agent}:{date}"
# A replica that stopped on purpose leaves this mark a while (its agents' handover says `stopped`): wake.daemon.ownership.
REPLICA_LEFT = "wake:left:{replica_id}"
# The member that published the newest heartbeat (its id; expires an hour after): a replica that
# finds no other member at its first read, but this mark, takes its agents over rather than
# starting the cluster: wake.daemon.ownership.
CLUSTER = "wake:cluster"
