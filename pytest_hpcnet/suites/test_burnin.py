"""Burn-in: every GPU of every node loaded for the whole duration, sampled on the nodes and
judged over time, and the network carrying traffic in rounds meanwhile (docs/checks.md,
"Burn-in"). Only when asked (`--hpcnet-burnin DURATION`,
`--hpcnet-burnin-resume RUN`, `-m burnin`): a plain handover run lists it as not applicable.
"""

import pytest

from pytest_hpcnet.requirements.burnin import judge_burnin
from pytest_hpcnet.requirements.burnin_network import judge_burnin_network
from pytest_hpcnet.requirements.registry import mark, not_applicable_when

NOT_APPLICABLE = "not applicable: the profile sets no GPUs (expect.gpu.count)"
pytestmark = [
    pytest.mark.burnin,
    not_applicable_when(lambda expect: not expect.gpu.count, NOT_APPLICABLE),
]


@mark("burnin")
def test_burnin(cluster, burnin, node, check):
    found = burnin.found()  # a node lost mid-run is judged on the samples it gave
    check.judge(judge_burnin(found[node.name], found, cluster.expect), node.name)


@mark("burnin_network")
def test_burnin_network(cluster, burnin, check):
    check.judge(judge_burnin_network(burnin.network(), cluster.expect))
