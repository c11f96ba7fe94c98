"""The one exception type cluster backends raise for conditions a person must fix."""


class ClusterError(RuntimeError):
    """A cluster could not be built, started, reached or stopped; the message says why."""


class CommandTimeout(ClusterError):
    """A command against the cluster did not answer in time: waits retry it (transient)."""

    transient = True
