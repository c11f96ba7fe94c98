"""The oracles' excuses (fixtures/oracles/excuses.py): each is where it says, and each is
proven by a mutant it must not swallow, or says which shipped mutant serves and why."""

from karpenter_e2e.clusters.karpenter import noise
from karpenter_e2e.clusters.karpenter.mutants import load
from karpenter_e2e.fixtures.oracles import NAMES
from karpenter_e2e.fixtures.oracles.excuses import BY_ID, EXCUSES
from karpenter_e2e.rendering.oracles_page import proofs_of


def test_every_excuse_names_a_known_oracle_and_a_line_that_applies_it():
    assert len(BY_ID) == len(EXCUSES)
    for e in EXCUSES:
        assert e.oracle in NAMES and e.catcher in NAMES, e.id
        assert e.location().split(":")[1].isdigit(), e.id


def test_every_noise_pattern_is_an_excuse():
    for n in noise.NOISE:
        assert f"karpenter-log-clean/noise:{n.name}" in BY_ID, n.pattern


def test_every_excuse_has_a_mutant_it_must_not_swallow_or_says_why_not():
    mutants = load()
    names = {m.name for m in mutants}
    for e in EXCUSES:
        proofs = proofs_of(e, mutants)
        assert proofs or e.served_by, f"{e.id}: no mutant names it and no served_by"
        for m in proofs:
            # the mutant's oracle is the one the excuse leaves the failure to
            assert e.catcher in (m.generic, m.oracle), (e.id, m.name)
        served = e.served_by.split(":")[0].split(" ")[0]
        if e.served_by and served in names:
            assert served in names


def test_every_excuse_a_mutant_names_is_known():
    for m in load():
        for x in m.excuses:
            assert x in BY_ID, f"mutant {m.name} names unknown excuse {x}"
