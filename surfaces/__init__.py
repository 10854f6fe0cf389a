"""The tool registry: every tool the system knows, with the surfaces it declares."""
