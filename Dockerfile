# The lw-temporal worker image used by docker-compose.yaml.
FROM python:3.11-slim-bookworm

# bubblewrap: the primary sandbox backend (docker-compose.yaml gives the container the
# seccomp profile it needs to create user namespaces; elsewhere `--sandbox auto` falls
# back to Landlock). libseccomp2: the library that compiles the sandbox's own filter.
# libnss-wrapper: the commands' account (whoami, id -un) when the backend is Landlock.
RUN apt-get update \
    && apt-get install -y --no-install-recommends bubblewrap libseccomp2 libnss-wrapper \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
# _lw_temporal_entry.py: the module the lw-temporal console script imports.
COPY pyproject.toml README.md _lw_temporal_entry.py ./
COPY lw_temporal ./lw_temporal
COPY workflows ./workflows
# otel: the worker's --tracing (OpenTelemetry SDK and OTLP exporter).
RUN pip install --no-cache-dir '.[otel]'

# The worker is not root in the container: commands run as this unprivileged user, and
# no file they leave can carry the container's root.
RUN useradd --system --uid 10001 --home-dir /var/lib/lw --create-home lw \
    && chmod 0700 /var/lib/lw
USER lw
VOLUME ["/var/lib/lw"]
CMD ["lw-temporal", "worker", "--address", "temporal:7233", "--data-dir", "/var/lib/lw", \
     "--definitions", "workflows.pipeline:DEFINITIONS", "--model", "workflows.pipeline:sample_model"]
