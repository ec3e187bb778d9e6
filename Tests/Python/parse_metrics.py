"""Parses Prometheus text exposition on stdin with prometheus_client's own parser (the reference
implementation's), for Tests/TuttiHouseHTTPTests. Prints one JSON object per sample:
{"name": …, "labels": {…}, "value": …, "type": …}. Exits non-zero on text it cannot parse.
"""
import json
import sys

from prometheus_client.parser import text_string_to_metric_families

for family in text_string_to_metric_families(sys.stdin.read()):
    for sample in family.samples:
        print(json.dumps({"name": sample.name, "labels": sample.labels, "value": sample.value, "type": family.type}))
