import sys

from clusters.cli import main

sys.exit(main())
