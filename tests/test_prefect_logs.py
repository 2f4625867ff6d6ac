"""The run's own log lines (stage progress, warnings) reach the flow run's logs on a real Prefect server, where the
Prefect UI reads them."""

import asyncio

from perceptforge.flows.run import run as run_flow


def flow_run_logs(name: str) -> list[tuple[int, str]]:
    """(level, message) of every log of the latest flow run named ``name``, through the server's API."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName, LogFilter, LogFilterFlowRunId
    from prefect.client.schemas.sorting import FlowRunSort
    from prefect.logging.handlers import APILogHandler

    APILogHandler().flush()  # the handler sends in batches

    async def read() -> list[tuple[int, str]]:
        async with get_client() as client:
            (latest,) = await client.read_flow_runs(
                flow_filter=FlowFilter(name=FlowFilterName(any_=[name])), sort=FlowRunSort.START_TIME_DESC, limit=1
            )
            logs = await client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[latest.id])))
            return [(log.level, log.message) for log in logs]

    return asyncio.run(read())


def test_warnings_and_stage_lines_are_in_the_flow_runs_logs(prefect_api, sample_dir, tmp_path):
    out = tmp_path / "run"
    run_flow("mvp", source=str(sample_dir), profile="local", out=str(out), seed=0, limit=1, categories=["S1"])
    run_flow(
        "mvp", source=str(sample_dir), profile="local", out=str(out), seed=0, limit=1, categories=["S1"], fresh=True
    )
    logs = flow_run_logs("mvp")
    warnings = [m for level, m in logs if level == 30]
    stages = [m for level, m in logs if level == 20 and m.endswith(" units")]
    assert any(m.startswith("--fresh: removed the earlier run's") for m in warnings), logs
    assert {m.split(":")[0] for m in stages} >= {"ingest", "ground", "questions", "items"}, logs
