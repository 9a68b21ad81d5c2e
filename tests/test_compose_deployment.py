"""docker-compose.yaml is a valid Compose file for a current Temporal deployment: the
server image with its schema set up by an admin-tools job (Temporal's own layout; the
auto-setup image is deprecated), a pinned UI, the worker with its metrics port, and an
optional OpenTelemetry Collector and trace viewer in the ``otel`` profile.

There is no Docker engine where tests run, so the file is validated offline against the
Compose Specification's JSON schema (tests/data/compose-spec.json, the schema of the
compose-spec repository)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import yaml

ROOT = Path(__file__).resolve().parent.parent


def load_compose() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "docker-compose.yaml").read_text())
    assert isinstance(data, dict)
    return data


def _validator() -> jsonschema.Draft7Validator:
    schema = json.loads((ROOT / "tests/data/compose-spec.json").read_text())
    assert "draft-07" in schema["$schema"]
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def _command_value(command: list[str], flag: str) -> str:
    return command[command.index(flag) + 1]


def test_compose_file_validates_against_the_compose_spec_schema() -> None:
    errors = list(_validator().iter_errors(load_compose()))
    assert errors == [], [e.message for e in errors]


def test_the_schema_check_rejects_a_broken_file() -> None:
    broken = load_compose()
    broken["services"]["lw-worker"]["depends_on"] = {"temporal": {"condition": "whenever"}}
    assert list(_validator().iter_errors(broken))
    broken = load_compose()
    broken["services"]["jaeger"]["profiles"] = "otel"
    assert list(_validator().iter_errors(broken))


def test_images_are_official_current_and_pinned() -> None:
    services = load_compose()["services"]
    expected = {
        "postgresql": "postgres",
        "temporal-schema": "temporalio/admin-tools",
        "temporal": "temporalio/server",
        "temporal-namespace": "temporalio/admin-tools",
        "temporal-ui": "temporalio/ui",
        "otel-collector": "otel/opentelemetry-collector-contrib",
        "jaeger": "jaegertracing/jaeger",
    }
    for name, repository in expected.items():
        image, tag = services[name]["image"].rsplit(":", 1)
        assert image == repository, name
        assert re.fullmatch(r"\d+\.\d+(\.\d+)?(-[a-z0-9]+)?", tag), (name, tag)
    assert not any("auto-setup" in s.get("image", "") for s in services.values())
    server = services["temporal"]["image"].rsplit(":", 1)[1]
    assert services["temporal-schema"]["image"].endswith(f":{server}")
    ui = tuple(int(p) for p in services["temporal-ui"]["image"].rsplit(":", 1)[1].split("."))
    assert ui >= (2, 54)


def test_schema_and_namespace_are_set_up_by_one_shot_jobs_before_use() -> None:
    services = load_compose()["services"]
    schema = services["temporal-schema"]
    assert schema["depends_on"]["postgresql"]["condition"] == "service_healthy"
    assert services["temporal"]["depends_on"] == {
        "temporal-schema": {"condition": "service_completed_successfully"}
    }
    namespace = services["temporal-namespace"]
    assert namespace["depends_on"]["temporal"]["condition"] == "service_healthy"
    worker = services["lw-worker"]
    assert worker["depends_on"]["temporal-namespace"]["condition"] == (
        "service_completed_successfully"
    )
    for job in (schema, namespace):
        assert job["entrypoint"][0] == "/bin/sh"
        mount, target = job["volumes"][0].split(":")[:2]
        script = ROOT / mount / Path(job["entrypoint"][1]).relative_to(target)
        assert script.is_file(), script
    setup = (ROOT / "deploy/temporal/setup-schema.sh").read_text()
    assert "temporal-sql-tool" in setup and "update-schema" in setup
    names = (ROOT / "deploy/temporal/setup-namespace.sh").read_text()
    assert "LwRole" in names and "LwDefinition" in names
    assert "--search-attributes" in worker["command"]
    dynamic = services["temporal"]["environment"]["DYNAMIC_CONFIG_FILE_PATH"]
    mount = services["temporal"]["volumes"][0].split(":")[0]
    assert (ROOT / mount / Path(dynamic).name).is_file()


def test_worker_is_built_here_and_points_at_the_server_service() -> None:
    services = load_compose()["services"]
    worker = services["lw-worker"]
    assert worker["build"]["context"] == "."
    assert (ROOT / worker["build"]["dockerfile"]).is_file()
    assert "temporal" in worker["depends_on"]
    address = _command_value(worker["command"], "--address")
    host, port = address.split(":")
    assert host in services and host == "temporal"
    assert f"{port}:{port}" in services["temporal"]["ports"]
    assert services["temporal-ui"]["environment"]["TEMPORAL_ADDRESS"] == address
    assert services["temporal-namespace"]["environment"]["TEMPORAL_ADDRESS"] == address


def test_worker_publishes_its_metrics_port_and_traces_to_the_collector() -> None:
    services = load_compose()["services"]
    worker = services["lw-worker"]
    port = _command_value(worker["command"], "--metrics-port")
    assert f"{port}:{port}" in worker["ports"]
    assert "--tracing" in worker["command"]
    endpoint = worker["environment"]["OTEL_EXPORTER_OTLP_ENDPOINT"]
    host, otlp_port = endpoint.removeprefix("http://").split(":")
    assert host == "otel-collector" and f"{otlp_port}:{otlp_port}" in services[host]["ports"]
    assert "[otel]" in (ROOT / "Dockerfile").read_text()


def test_the_collector_and_trace_viewer_are_an_optional_profile() -> None:
    services = load_compose()["services"]
    optional = {name for name, s in services.items() if s.get("profiles")}
    assert optional == {"otel-collector", "jaeger"}
    assert all(s["profiles"] == ["otel"] for n, s in services.items() if n in optional)
    assert not any(
        set(s.get("depends_on", ())) & optional for n, s in services.items() if n not in optional
    )
    collector = services["otel-collector"]
    source, target = collector["volumes"][0].split(":")[:2]
    assert collector["command"] == [f"--config={target}"]
    config = yaml.safe_load((ROOT / source).read_text())
    exporters = config["service"]["pipelines"]["traces"]["exporters"]
    assert [config["exporters"][e]["endpoint"] for e in exporters] == ["jaeger:4317"]
    assert "16686:16686" in services["jaeger"]["ports"]


def test_worker_command_is_a_real_cli_invocation() -> None:
    from lw_temporal._cli import build_parser

    command = load_compose()["services"]["lw-worker"]["command"]
    assert command[0] == "lw-temporal"
    args = build_parser().parse_args(command[1:])
    assert args.command == "worker"
    assert args.metrics_port == 9464 and args.tracing
