import sys

from karpenter_e2e.checks.cli import main

sys.exit(main())
