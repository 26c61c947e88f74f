"""fleet console: a read-only web UI of the GPU fleet."""
