# memory-graph for Claude Desktop and other stdio clients:
#   docker build -t memory-graph .
#   docker run -i --rm -v claude-memory:/data memory-graph
# Extras: the PostgreSQL engine (MEMORY_DATABASE_URL) needs postgres, recall by meaning semantic (comma list):
#   docker build --build-arg EXTRAS=postgres -t memory-graph:postgres .   (examples/compose.yaml does this)
# Offline builds (no package index reachable): make wheels for the image's Python (3.12) first, then build:
#   pip wheel --no-deps -w wheelhouse . && pip download --python-version 3.12 --only-binary=:all: -d wheelhouse .
#   docker build --build-arg PIP_NO_INDEX=1 --build-arg PIP_FIND_LINKS=/wheelhouse -t memory-graph .
FROM docker.io/library/python:3.12-slim AS build
ARG PIP_NO_INDEX=""
ARG PIP_FIND_LINKS=""
ARG EXTRAS=""
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
COPY . /src
# The code lives in /opt/memory-graph, never in the data volume: an old volume cannot shadow a new image.
RUN set -eu; \
    if [ -z "$PIP_NO_INDEX" ]; then unset PIP_NO_INDEX; fi; \
    if [ -z "$PIP_FIND_LINKS" ]; then unset PIP_FIND_LINKS; fi; \
    if [ -d /src/wheelhouse ]; then cp -r /src/wheelhouse /wheelhouse; fi; \
    python -m venv /opt/memory-graph; \
    extras="${EXTRAS:+[$EXTRAS]}"; \
    if ls /wheelhouse/memory_graph-*.whl >/dev/null 2>&1; then \
        /opt/memory-graph/bin/pip install "$(ls /wheelhouse/memory_graph-*.whl)$extras"; \
    else \
        /opt/memory-graph/bin/pip install "/src$extras"; \
    fi

FROM docker.io/library/python:3.12-slim
COPY --from=build /opt/memory-graph /opt/memory-graph
RUN groupadd --gid 10001 memory \
    && useradd --create-home --uid 10001 --gid 10001 --shell /usr/sbin/nologin memory \
    && mkdir /data \
    && chown 10001:10001 /data
ENV PATH=/opt/memory-graph/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    MEMORY_FILE_PATH=/data/memory.json
USER 10001:10001
VOLUME /data
ENTRYPOINT ["memory-graph"]
