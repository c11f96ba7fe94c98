"""Runners: commands above the cluster backends that run the suites (lanes, shards, merge)."""
