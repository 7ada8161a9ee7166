# Builds every fencestream binary (debouncer, occupancy, visits, fenceview,
# fencectl, fencestream) into one small image; docker-compose.yml runs them against Kafka.
#
#   docker build -t fencestream:local .

FROM golang:1.27 AS build
ENV GOTOOLCHAIN=go1.27.3
WORKDIR /src
# Modules first, so source edits do not re-download them.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/...

FROM debian:bookworm-slim
# curl serves the compose healthchecks; ca-certificates lets --tls verify brokers.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /var/lib/fencestream --create-home fencestream \
 && mkdir -p /var/lib/fencestream/state \
 && chown -R fencestream /var/lib/fencestream
COPY --from=build /out/ /usr/local/bin/
USER fencestream
WORKDIR /var/lib/fencestream
# The processors' local state (Pebble by default) lives here; give each processor replica its own volume.
VOLUME /var/lib/fencestream/state
CMD ["fencectl", "--help"]
