"""agtos: a self-hostable memory system for AI agents."""

import os

# Exact vector search over small shards is one small matrix product per query: OpenBLAS's thread
# pool costs more than it saves there (7-8 ms instead of 0.2 ms for 3.6k x 384 on a loaded 2-core
# box; search p50 at 94k texts 46.7 -> 20.2 ms). Set before numpy loads; an operator's value wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

__version__ = "0.1.0"
