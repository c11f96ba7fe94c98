import sys

from karpenter_e2e.clusters.cli import main

sys.exit(main())
