"""kind mode: a kind cluster in Docker, with kwok and karpenter-kwok as local processes."""
