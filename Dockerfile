# syntax=docker/dockerfile:1.7
# Production image of gpuplane. `docker compose up` runs it as two replicas behind a load balancer with
# PostgreSQL (see docker-compose.yml and docs/operations.md).
#
# Build caching: dependencies are compiled in their own layer from Cargo.toml/Cargo.lock and stub sources, so a
# change to src/ rebuilds only gpuplane itself. The registry is a BuildKit cache mount besides.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY .cargo .cargo
RUN mkdir -p src benches \
    && echo 'fn main() {}' > src/main.rs && touch src/lib.rs \
    && for b in planner allocation heartbeat export; do echo 'fn main() {}' > benches/$b.rs; done
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    cargo build --release --locked --bin gpuplane
COPY src src
COPY migrations migrations
COPY benches benches
# The stubs' build outputs are older than the real sources only by mtime; touch so cargo rebuilds gpuplane.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    touch src/main.rs src/lib.rs && cargo build --release --locked --bin gpuplane \
    && install -m 0755 target/release/gpuplane /gpuplane

FROM debian:bookworm-slim
# curl only for the HEALTHCHECK; ca-certificates for TLS to PostgreSQL (sslmode=verify-full uses the system roots
# unless sslrootcert names a file).
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin gpuplane
COPY --from=build /gpuplane /usr/local/bin/gpuplane
USER 10001:10001
ENV GPUPLANE_BIND=0.0.0.0:8080 GPUPLANE_LOG_FORMAT=json
EXPOSE 8080
# /readyz answers 200 only while the database is reachable.
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD curl -fsS http://127.0.0.1:8080/readyz >/dev/null || exit 1
ENTRYPOINT ["gpuplane"]
CMD ["serve"]
