"""karpenter-e2e: an end-to-end test harness for Karpenter.

The layers live at the repository's top level (clusters/, fixtures/, reports/, checks/,
runners/); this package names them karpenter_e2e.* through relative symlinks, so that an
import resolves by path in a clone with nothing installed, and the wheel holds them as
real folders.
"""
