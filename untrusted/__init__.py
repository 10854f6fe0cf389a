"""Text that the agent's world wrote (facts, memory, messages, tool results, anchors' names): how
the harness compares it and how it shows it. The bottom layer: it knows nothing of wake's stores.

`untrusted.folding` folds text for comparison: NFKC (UAX #15), invisible and format characters
removed, and each character mapped to its Unicode TS #39 confusable skeleton (ICU's SpoofChecker),
so that a look-alike compares equal to what it imitates.
"""
