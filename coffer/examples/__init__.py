"""Example upstream servers shipped with Coffer (run as separate processes, e.g. by `coffer demo`)."""
