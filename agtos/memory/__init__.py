"""The memory tiers and the MemoryCoordinator facade that the API and CLI talk to."""
