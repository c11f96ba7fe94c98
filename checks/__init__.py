"""`check`: what Karpenter does with a platform team's own NodePools and workloads (issue 14)."""

# The modes check runs in (docs/check.md): local and kind map an EC2NodeClass to a
# KWOKNodeClass (the same KWOK provider; kind runs it in the cluster, by its chart), aws-sim
# applies it as written. The runners that run check offer the same.
MODES = ("local", "aws-sim", "kind")
