"""`check`: what Karpenter does with a platform team's own NodePools and workloads (issue 14)."""

# The modes check runs in (docs/check.md): local maps an EC2NodeClass to a KWOKNodeClass,
# aws-sim applies it as written. The runners that run check offer the same.
MODES = ("local", "aws-sim")
