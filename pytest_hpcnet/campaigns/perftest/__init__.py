"""perftest across the cluster: rounds of disjoint pairs, devices, the campaign."""
