"""The snapshot's allow-list: what Karpenter's decisions read stays, nothing else is written
(no image, command, argument, environment value, secret or config volume, address, or
annotation outside Karpenter's and the scheduler's)."""

import yaml

from karpenter_e2e.checks import snapshot

SECRET = "s3cr3t-value"
POD = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "web-1", "namespace": "shop", "labels": {"app": "web"},
                 "annotations": {"karpenter.sh/do-not-disrupt": "true",
                                 "kubectl.kubernetes.io/last-applied-configuration": SECRET,
                                 "vault.hashicorp.com/agent-inject-secret": SECRET},
                 "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                      "name": "web-7d9f", "uid": "u1", "controller": True}]},
    "spec": {"nodeName": "n1", "nodeSelector": {"team": "shop"}, "priority": 10,
             "tolerations": [{"key": "team", "operator": "Exists"}],
             "containers": [{"name": "app", "image": f"registry/{SECRET}:1",
                             "command": ["/bin/run", SECRET], "args": [SECRET],
                             "env": [{"name": "TOKEN", "value": SECRET}],
                             "envFrom": [{"secretRef": {"name": SECRET}}],
                             "volumeMounts": [{"name": "creds", "mountPath": "/x"}],
                             "ports": [{"containerPort": 80}, {"containerPort": 9100,
                                                                "hostPort": 9100}],
                             "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
             "initContainers": [{"name": "proxy", "image": SECRET, "restartPolicy": "Always",
                                 "resources": {"requests": {"cpu": "100m"}}}],
             "volumes": [{"name": "creds", "secret": {"secretName": SECRET}},
                         {"name": "conf", "configMap": {"name": SECRET}},
                         {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-1"}}]},
    "status": {"phase": "Running", "podIP": "10.0.0.1", "hostIP": "10.0.0.2",
               "conditions": [{"type": "Ready", "status": "True"}]}}


def test_a_pod_keeps_what_scheduling_reads_and_nothing_secret():
    kept = snapshot.keep("Pod", POD)
    text = yaml.safe_dump(kept)
    assert SECRET not in text and "10.0.0" not in text
    for word in ("image", "command", "args", "env", "volumeMounts", "secret", "configMap",
                 "last-applied"):
        assert word not in text, word
    spec = kept["spec"]
    assert spec["nodeName"] == "n1" and spec["priority"] == 10
    assert spec["containers"] == [{"name": "app", "ports": [
        {"containerPort": 9100, "hostPort": 9100}],
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]
    assert spec["initContainers"][0]["restartPolicy"] == "Always"  # a sidecar counts
    assert spec["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "data-web-1"}}]
    assert kept["metadata"]["annotations"] == {"karpenter.sh/do-not-disrupt": "true"}
    assert kept["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"


def test_an_owner_keeps_its_template_redacted_the_same_way():
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment",
              "metadata": {"name": "web", "namespace": "shop"},
              "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                       "template": {"metadata": POD["metadata"], "spec": POD["spec"]}}}
    kept = snapshot.keep("Deployment", deploy)
    assert kept["spec"]["replicas"] == 3 and SECRET not in yaml.safe_dump(kept)


def test_a_nodeclass_loses_its_user_data_and_role():
    ec2 = {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "d"},
           "spec": {"userData": SECRET, "role": SECRET, "amiSelectorTerms": [{"alias": "al2023@latest"}]}}
    assert snapshot.keep("NodeClass", ec2)["spec"] == {"amiSelectorTerms": [{"alias": "al2023@latest"}]}


def test_karpenters_version_and_only_its_known_settings_are_read():
    d = {"metadata": {"name": "karpenter", "namespace": "kube-system"}, "spec": {"template": {"spec": {
        "containers": [{"name": "controller", "image": "public.ecr.aws/karpenter/controller:1.15.0@sha256:x",
                        "env": [{"name": "BATCH_MAX_DURATION", "value": "10s"},
                                {"name": "AWS_SECRET", "value": SECRET},
                                {"name": "CLUSTER_ENDPOINT", "valueFrom": {"x": 1}}]}]}}}}
    got = snapshot.karpenter([d])
    assert got == {"version": "1.15.0", "settings": {"BATCH_MAX_DURATION": "10s"},
                   "namespace": "kube-system"}
    assert snapshot.karpenter([])["version"] == "unknown"


def test_a_snapshot_reads_back_as_written(tmp_path):
    objects = {"Pod": [snapshot.keep("Pod", POD)], "Node": []}
    snapshot.write(objects, {"taken": "now", "karpenter": {"version": "unknown"}}, tmp_path)
    about, back = snapshot.load(tmp_path)
    assert back == objects and about["counts"] == {"Pod": 1, "Node": 0}
