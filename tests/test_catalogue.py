"""The fake catalogue: AWS-shaped labels on every offering, both arches, GPUs, spot and on-demand."""

import json

import pytest

from karpenter_e2e.clusters.infra import catalogue
from karpenter_e2e.clusters.infra.catalogue_table import TYPES, ZONES
from karpenter_e2e.clusters.karpenter.requirements import satisfies
from karpenter_e2e.fixtures.nodepools import load_spec

offering_labels = catalogue.offering_labels


def test_every_offering_carries_the_aws_labels_and_a_zone_and_capacity_type():
    for it in catalogue.render():
        assert len(it["offerings"]) == len(ZONES) * 2
        for off in it["offerings"]:
            labels = offering_labels(off)
            for key in ("instance-category", "instance-generation", "instance-family",
                        "instance-size", "instance-cpu", "instance-memory", "instance-hypervisor"):
                assert f"karpenter.k8s.aws/{key}" in labels, (it["name"], key)
            assert labels["topology.kubernetes.io/zone"] in ZONES
            assert labels["karpenter.sh/capacity-type"] in ("spot", "on-demand")
            labels_or_absent = [r for r in off["Requirements"]
                                if not (r["operator"] == "In" and len(r["values"]) == 1)]
            assert labels_or_absent == ([] if it.get("resources", {}).get("nvidia.com/gpu") else
                                        [{"key": k, "operator": "DoesNotExist"}
                                         for k in catalogue.GPU_KEYS]), it["name"]


def test_a_type_without_gpus_excludes_the_gpu_keys_as_the_aws_provider_does():
    """An Exists requirement on a GPU key must leave plain types out: they say DoesNotExist,
    not nothing (an undefined key is compatible with any requirement in Karpenter)."""
    plain = next(it for it in catalogue.render() if it["name"] == "m5.large")
    gpu = next(it for it in catalogue.render() if it["name"] == "g4dn.xlarge")
    for off in plain["offerings"]:
        assert {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "DoesNotExist"} \
            in off["Requirements"]
    for off in gpu["offerings"]:
        assert offering_labels(off)["karpenter.k8s.aws/instance-gpu-count"] == "1"
        assert all(r["operator"] == "In" for r in off["Requirements"])


def test_labels_are_derived_from_the_type_name():
    labels = catalogue.aws_labels(next(t for t in TYPES if t.name == "m6g.xlarge"))
    assert labels["karpenter.k8s.aws/instance-category"] == "m"
    assert labels["karpenter.k8s.aws/instance-generation"] == "6"
    assert labels["karpenter.k8s.aws/instance-family"] == "m6g"
    assert labels["karpenter.k8s.aws/instance-size"] == "xlarge"
    assert labels["karpenter.k8s.aws/instance-memory"] == "16384"


def test_spot_is_cheaper_than_on_demand_and_deterministic():
    for t in TYPES:
        for z in ZONES:
            assert 0.29 * t.od <= catalogue.spot_price(t, z) < 0.46 * t.od
            assert catalogue.spot_price(t, z) == catalogue.spot_price(t, z)


def test_catalogue_has_what_the_scenarios_need():
    arches = {t.arch for t in TYPES}
    assert arches == {"amd64", "arm64"}
    gpu = [it for it in catalogue.render() if "nvidia.com/gpu" in it["resources"]]
    assert gpu and all(offering_labels(o).get("karpenter.k8s.aws/instance-gpu-manufacturer")
                       == "nvidia" for it in gpu for o in it["offerings"])
    assert any(t.name.startswith("t3a.") for t in TYPES)
    assert len([t for t in TYPES if t.name.startswith("c6i.")]) >= 4  # sizes for rightsizing


def test_workshop_default_pool_matches_some_types_and_excludes_old_and_wrong_category():
    reqs = load_spec("default")["spec"]["template"]["spec"]["requirements"]
    fits = set()
    for it in catalogue.render():
        for off in it["offerings"]:
            labels = offering_labels(off) | {"kubernetes.io/arch": it["architecture"],
                                             "kubernetes.io/os": "linux"}
            if all(satisfies(labels, r) for r in reqs):
                fits.add(it["name"])
    assert "c5.large" in fits and "m6i.xlarge" in fits
    assert not any(n.startswith(("t2.", "t3.", "g5.", "c6g.")) for n in fits)


def test_without_filters_and_rejects_bad_specs(tmp_path):
    no_arm = catalogue.select(catalogue.without("arch=arm64"))
    assert no_arm and all(t.arch == "amd64" for t in no_arm)
    assert all(not t.name.startswith("g5.") for t in catalogue.select(catalogue.without("family=g5")))
    with pytest.raises(ValueError, match="expected one of"):
        catalogue.without("colour=blue")
    path = catalogue.write(tmp_path / "it.json", no_arm)
    assert len(json.loads(path.read_text())) == len(no_arm)
