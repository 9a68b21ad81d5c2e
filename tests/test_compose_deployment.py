"""docker-compose.yaml is a valid Compose file whose worker talks to its server.

There is no Docker engine where tests run, so the file is validated offline against the
Compose Specification's JSON schema (tests/data/compose-spec.json)."""

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


def test_compose_file_validates_against_the_compose_spec_schema() -> None:
    schema = json.loads((ROOT / "tests/data/compose-spec.json").read_text())
    jsonschema.Draft201909Validator.check_schema(schema)
    errors = list(jsonschema.Draft201909Validator(schema).iter_errors(load_compose()))
    assert errors == [], [e.message for e in errors]


def test_the_schema_check_rejects_a_broken_file() -> None:
    schema = json.loads((ROOT / "tests/data/compose-spec.json").read_text())
    broken = load_compose()
    broken["services"]["lw-worker"]["depends_on"] = {"temporal": {"condition": "whenever"}}
    assert list(jsonschema.Draft201909Validator(schema).iter_errors(broken))


def test_images_are_official_and_pinned() -> None:
    services = load_compose()["services"]
    assert services["temporal"]["image"].startswith("temporalio/auto-setup:")
    assert services["temporal-ui"]["image"].startswith("temporalio/ui:")
    assert services["postgresql"]["image"].startswith("postgres:")
    for name in ("temporal", "temporal-ui", "postgresql"):
        tag = services[name]["image"].rsplit(":", 1)[1]
        assert re.fullmatch(r"\d+\.\d+(\.\d+)?(-[a-z0-9]+)?", tag), (name, tag)


def test_worker_is_built_here_and_points_at_the_server_service() -> None:
    compose = load_compose()
    services = compose["services"]
    worker = services["lw-worker"]
    assert worker["build"]["context"] == "."
    assert (ROOT / worker["build"]["dockerfile"]).is_file()
    assert "temporal" in worker["depends_on"]
    command = worker["command"]
    address = command[command.index("--address") + 1]
    host, port = address.split(":")
    assert host in services and host == "temporal"
    assert f"{port}:{port}" in services["temporal"]["ports"]
    assert services["temporal"]["depends_on"]["postgresql"]["condition"] == "service_healthy"
    assert services["temporal-ui"]["environment"]["TEMPORAL_ADDRESS"] == address


def test_worker_command_is_a_real_cli_invocation() -> None:
    from lw_temporal._cli import build_parser

    command = load_compose()["services"]["lw-worker"]["command"]
    assert command[0] == "lw-temporal"
    args = build_parser().parse_args(command[1:])
    assert args.command == "worker"
