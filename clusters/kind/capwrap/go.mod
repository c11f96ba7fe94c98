module karpenter-e2e/clusters/kind/capwrap

go 1.21
