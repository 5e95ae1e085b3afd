"""Everything that talks to Redis: connection, key naming and the record stores."""
