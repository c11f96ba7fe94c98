"""Talking to a cluster, whatever its mode: the kube client, the waits, the informer and the
poller, object views and label keys. Nothing else of clusters/ is imported here."""
