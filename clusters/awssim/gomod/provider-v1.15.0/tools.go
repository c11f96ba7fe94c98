//go:build tools

// Package tools pins the upstream command this wrapper module builds.
package tools

import (
	_ "github.com/aws/karpenter-provider-aws/cmd/controller"
)
