"""Karpenter's refusal messages: each pattern matches every served release's wording (the
messages below are from Karpenter's logs: v1.1.5 on 2026-12-04, and the v1.5+ format), and
not a message about another taint or quantity."""

import re

import pytest

from karpenter_e2e.clusters.karpenter.words import no_type_fits, untolerated

OLD_TAINT = ('incompatible with nodepool "batch-2fddb8", daemonset overhead={"pods":"0"}, '
             'did not tolerate dedicated=batch:NoExecute')
NEW_TAINT = ('incompatible with nodepool "batch-x", daemonset overhead={"pods":"0"}, '
             'did not tolerate taint (taint=dedicated=batch:NoExecute)')
OLD_FIT = ('incompatible with nodepool "default-eb9f27", daemonset overhead={"pods":"0"}, no '
           'instance type satisfied resources {"cpu":"100m","ephemeral-storage":"24Gi",'
           '"pods":"1"} and requirements karpenter.sh/nodepool In [default-eb9f27], '
           'kubernetes.io/os In [linux] (no instance type has enough resources); all available '
           'instance types exceed limits for nodepool: "default-8e16c5"')
NEW_FIT = ('incompatible with nodepool "default-x", daemonset overhead={"pods":"0"}, no instance '
           'type has enough resources, requirements=karpenter.sh/nodepool In [default-x], '
           'resources={"cpu":"100m","ephemeral-storage":"24Gi","pods":"1"}')


@pytest.mark.parametrize("message", [OLD_TAINT, NEW_TAINT])
def test_untolerated_matches_both_wordings(message):
    assert re.search(untolerated("dedicated=batch:NoExecute"), message)
    assert not re.search(untolerated("dedicated=gpu:NoExecute"), message)


@pytest.mark.parametrize("message", [OLD_FIT, NEW_FIT])
def test_no_type_fits_matches_both_wordings(message):
    assert re.search(no_type_fits("ephemeral-storage", "24Gi"), message)
    assert not re.search(no_type_fits("ephemeral-storage", "2Gi"), message)
    assert not re.search(no_type_fits("ephemeral-storage", "240Gi"), message)
    assert not re.search(no_type_fits("memory", "24Gi"), message)


def test_no_type_fits_needs_the_reason():
    fits_elsewhere = OLD_FIT.replace("(no instance type has enough resources)",
                                     "(no instance type met all requirements)")
    assert not re.search(no_type_fits("ephemeral-storage", "24Gi"), fits_elsewhere)
