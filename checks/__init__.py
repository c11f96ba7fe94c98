"""`check`: what Karpenter does with a platform team's own NodePools and workloads (issue 14)."""
