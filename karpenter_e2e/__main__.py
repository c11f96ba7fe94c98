"""The package run as a module is the karpenter-e2e command (runners/cli.py): the Makefile
calls it so, and the runners start their child commands so (this Python, no script on PATH)."""

import sys

from karpenter_e2e.runners.cli import main

sys.exit(main())
