"""Reading a node's Prometheus endpoint in the cluster tests: `scrape` one URL into samples
keyed by name and labels, `get` one sample (0 when absent: a counter never incremented)."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(url: str, timeout_s: float = 3.0) -> Samples:
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        text = response.read().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def get(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)
