"""Adapters to external model services (LLMs, embedders). Each is optional but the built-in one."""
