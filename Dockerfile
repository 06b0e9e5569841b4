# The web app, the CLI and the migrations in one image.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1

# PyTorch first and pinned: a loose pin lets other packages pull a newer (CUDA) build.
# Pass --build-arg TORCH_INDEX_URL=<a CPU wheel index> to get the small CPU build.
ARG TORCH_INDEX_URL=""
RUN if [ -n "$TORCH_INDEX_URL" ]; then \
      pip install "torch==2.13.0" --index-url "$TORCH_INDEX_URL"; \
    else pip install "torch==2.13.0"; fi

# Noto CJK: the Chinese study's pages render in the image's own browser tests and screenshots
# (scripts/test.sh installs the same package next to chromium).
RUN apt-get update && apt-get install -y --no-install-recommends fonts-noto-cjk \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY pyproject.toml README.md ./
COPY vsr_core ./vsr_core
COPY collection ./collection
COPY webapp ./webapp
COPY matching ./matching
COPY vsr_dataset ./vsr_dataset
COPY vsr_cli ./vsr_cli
COPY migrations ./migrations
COPY demo ./demo
COPY studies ./studies
RUN pip install ".[match]"

RUN useradd --create-home --uid 1000 vsr && mkdir -p /data && chown vsr /data
USER vsr
EXPOSE 8000
# Bound to every interface, so `vsr serve` refuses to start without a SECRET_KEY of 32 or more
# characters (docker run -e SECRET_KEY=$(openssl rand -hex 32) ...; docker-compose.yml asks).
CMD ["vsr", "serve", "--host", "0.0.0.0", "--port", "8000", "--workers", "2"]
