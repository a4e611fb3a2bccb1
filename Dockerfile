# Build and run gpuplane. `docker compose up` starts it with PostgreSQL (see docker-compose.yml).
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin gpuplane

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/gpuplane /usr/local/bin/gpuplane
EXPOSE 8080
ENTRYPOINT ["gpuplane"]
CMD ["serve"]
