"""The catalogue selection: the full catalogue built from moto's EC2 types and the AWS
provider's generated on-demand prices (parsed from small excerpts here), and the syntax."""

import json
from pathlib import Path

import pytest

from karpenter_e2e.checks import report
from karpenter_e2e.checks.expectations import ExpectError, load
from karpenter_e2e.clusters import backends
from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.infra import catalogue, catalogue_full
from karpenter_e2e.clusters.infra.catalogue_table import TYPES

DATA = Path(__file__).parent / "data" / "catalogue"


@pytest.fixture
def full() -> catalogue_full.Full:
    prices = catalogue_full.parse_pricing((DATA / "pricing-excerpt.go").read_text())
    moto = json.loads((DATA / "moto-instance-types.json").read_text())
    return catalogue_full.build_full(moto, prices["us-east-1"], "us-east-1", "v1.15.0")


def test_the_generated_go_map_parses_per_region():
    prices = catalogue_full.parse_pricing((DATA / "pricing-excerpt.go").read_text())
    assert sorted(prices) == ["eu-test-1", "us-east-1"]
    assert prices["us-east-1"]["c6gd.large"] == 0.0768
    assert prices["us-east-1"]["u-6tb1.56xlarge"] == 46.40391
    assert len(prices["us-east-1"]) == 9 + 9 + 8 + 9 + 2
    assert prices["eu-test-1"] == {"c5.large": 0.101}


def test_moto_types_become_ec2_types_with_the_aws_labels(full):
    by = {t.name: t for t in full.types}
    assert sorted(by) == ["c5.large", "c6gd.large", "c6gd.xlarge", "g5.xlarge", "m5.metal"]
    c6gd = by["c6gd.large"]
    assert (c6gd.vcpu, c6gd.memory_gib, c6gd.arch, c6gd.od, c6gd.cpu_manufacturer,
            c6gd.hypervisor, c6gd.gpus) == (2, 4.0, "arm64", 0.0768, "aws", "nitro", 0)
    labels = catalogue.aws_labels(c6gd)
    assert labels["karpenter.k8s.aws/instance-family"] == "c6gd"
    assert labels["karpenter.k8s.aws/instance-category"] == "c"
    assert labels["karpenter.k8s.aws/instance-generation"] == "6"
    assert labels["karpenter.k8s.aws/instance-memory"] == "4096"
    g5 = by["g5.xlarge"]
    assert (g5.gpus, g5.gpu_name, g5.gpu_manufacturer, g5.cpu_manufacturer) == \
        (1, "a10g", "nvidia", "amd")
    assert catalogue.instance_type(g5)["resources"]["nvidia.com/gpu"] == "1"
    # Bare metal has no hypervisor: no label (the provider's would be empty), not "".
    assert "karpenter.k8s.aws/instance-hypervisor" not in catalogue.aws_labels(by["m5.metal"])


def test_unpriced_and_unlabelled_types_are_left_out_and_counted(full):
    assert full.unpriced == 2  # t2.micro and mac1.metal: not in the price excerpt
    assert full.unlabelled == 1  # u-6tb1.56xlarge: no category/generation in its name
    assert "2 unpriced and 1 unlabelled types left out" in full.source()
    mac = {"InstanceType": "mac1.metal", "VCpuInfo": {"DefaultVCpus": 12},
           "MemoryInfo": {"SizeInMiB": 32768},
           "ProcessorInfo": {"SupportedArchitectures": ["x86_64_mac"]}}
    assert catalogue_full.from_moto(mac, 1.0) is None


def test_selection_syntax():
    parse = catalogue_full.parse_selection
    assert str(parse(None)) == str(parse("curated")) == "curated"
    assert str(parse("full")) == "full"
    assert parse("families=c6gd,m5").families == ("c6gd", "m5")
    assert parse("full:max-vcpu=16").max_vcpu == 16
    assert str(parse("families=c6gd:max-vcpu=8")) == "families=c6gd:max-vcpu=8"
    for bad in ("everything", "families=", "full:max-vcpu=0", "full:vcpu=4", "curated:max"):
        with pytest.raises(ValueError, match="curated, full or families="):
            parse(bad)


def test_resolve_selects_families_and_caps_sizes(full):
    sel = catalogue_full.parse_selection
    types, source = catalogue_full.resolve(sel("families=c6gd"), full)
    assert [t.name for t in types] == ["c6gd.large", "c6gd.xlarge"] and "moto" in source
    types, _ = catalogue_full.resolve(sel("full:max-vcpu=2"), full)
    assert [t.name for t in types] == ["c5.large", "c6gd.large"]
    with pytest.raises(ClusterError, match="no family c7gd"):
        catalogue_full.resolve(sel("families=c6gd,c7gd"), full)
    types, source = catalogue_full.resolve(sel("curated"))
    assert types == list(TYPES) and "curated" in source
    assert all(t.vcpu <= 4 for t in catalogue_full.resolve(sel("curated:max-vcpu=4"))[0])


def test_the_curated_table_stays_the_default_and_renders_as_before():
    assert catalogue.select() == list(TYPES) == catalogue.select(selection="curated")
    assert catalogue.render_text().startswith("[\n {")  # indented, as builds embed it


def test_the_gap_warning_reads_the_selected_catalogue(full):
    """check's 'names a family the catalogue lacks' warning is given the cluster's own file,
    so with a full catalogue c6gd is no gap."""
    req = [{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["c6gd"]}]
    curated = {t.name for t in TYPES}
    assert catalogue.missing(req, curated, ec2={"c6gd.large"}) == [
        "instance-family c6gd: the local catalogue has no such family; EKS would offer it"]
    assert catalogue.missing(req, {t.name for t in full.types}, ec2={"c6gd.large"}) == []


def test_spot_stays_modelled_and_on_demand_names_its_source():
    full_prices = report.price_sources("local", "full")
    assert full_prices["spot"][0] == "modelled"
    assert "generated us-east-1 on-demand price table" in full_prices["on-demand"][1]
    assert "us-west-2 list prices" in report.price_sources("local")["on-demand"][1]
    assert "us-west-2 list prices" in report.price_sources("local", "curated")["on-demand"][1]


def test_expect_yaml_catalogue_key(tmp_path):
    f = tmp_path / "expect.yaml"
    f.write_text("catalogue: families=c6gd\nexpect:\n  - pending: 0\n")
    assert load(f).catalogue == "families=c6gd"
    f.write_text("expect:\n  - pending: 0\n")
    assert load(f).catalogue is None
    f.write_text("catalogue: all\n")
    with pytest.raises(ExpectError, match="catalogue: catalogue 'all'"):
        load(f)


def test_the_option_is_checked_and_refused_in_aws_sim():
    with pytest.raises(ClusterError, match="--catalogue: catalogue 'huge'"):
        backends._catalogue_selection(backends.ClusterOptions(catalogue="huge"),
                                      backends.cli_flag)
    with pytest.raises(ClusterError, match="--catalogue is for local and kind mode"):
        backends.create(backends.ClusterOptions(cluster="aws-sim", catalogue="full"))


def test_the_ran_line_names_the_selection(tmp_path, monkeypatch, full):
    from karpenter_e2e.checks import run
    path = tmp_path / "instance-types.json"
    path.write_text(catalogue.render_text(full.types))
    assert run._catalogue_summary(path, "curated") == f"selection curated, 5 instance types ({path})"
    monkeypatch.setattr(catalogue_full, "load_full", lambda: full)
    assert run._catalogue_summary(path, "full") == (
        f"selection full, 5 instance types ({path}); moto's EC2 types priced from AWS provider "
        "v1.15.0's us-east-1 table; 2 unpriced and 1 unlabelled types left out")
