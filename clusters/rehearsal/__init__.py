"""The EKS night rehearsed on this machine: kind as the control plane, the AWS provider installed
by its own chart, a fake AWS (aws-sim's moto server) reachable from the kind network, and eks
mode run against it unchanged (docs/modes-eks-kind.md)."""
