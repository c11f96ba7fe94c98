"""eks mode: an existing EKS cluster (cluster.py), the AWS facts fixtures check (aws.py),
and the sweeper for leftovers of earlier runs (sweep.py)."""
