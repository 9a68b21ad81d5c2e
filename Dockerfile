# The lw-temporal worker image used by docker-compose.yaml.
FROM python:3.11-slim-bookworm

# bubblewrap: the primary sandbox backend, used where the container may create user
# namespaces (elsewhere `--sandbox auto` falls back to Landlock).
RUN apt-get update \
    && apt-get install -y --no-install-recommends bubblewrap \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY pyproject.toml README.md ./
COPY lw_temporal ./lw_temporal
COPY workflows ./workflows
# otel: the worker's --tracing (OpenTelemetry SDK and OTLP exporter).
RUN pip install --no-cache-dir '.[otel]'

VOLUME ["/var/lib/lw"]
CMD ["lw-temporal", "worker", "--address", "temporal:7233", "--data-dir", "/var/lib/lw", \
     "--definitions", "workflows.pipeline:DEFINITIONS", "--model", "workflows.pipeline:sample_model"]
