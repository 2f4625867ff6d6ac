from pathlib import Path

import yaml
from prefect.flows import load_flow_from_entrypoint

from perceptforge.flows.family import RunRequest

REPO = Path(__file__).resolve().parents[1]


def test_every_entrypoint_in_prefect_yaml_loads():
    doc = yaml.safe_load((REPO / "prefect.yaml").read_text())
    assert doc["deployments"], "prefect.yaml declares no deployment"
    for dep in doc["deployments"]:
        path, _, name = dep["entrypoint"].partition(":")
        flow = load_flow_from_entrypoint(str(REPO / path) + ":" + name)
        assert flow.name, dep["name"]
        assert set(dep.get("parameters", {})) <= set(flow.parameters.properties), dep["name"]
        if "request" in dep.get("parameters", {}):  # the command line's options, whole, and nothing else
            RunRequest(**dep["parameters"]["request"])
        assert dep["work_pool"]["name"]
