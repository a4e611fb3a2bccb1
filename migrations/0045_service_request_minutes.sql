-- A service's requests per minute as the gateways count them (each gateway process adds its own counts every
-- few seconds): requests, errors (5xx), refusals (401, 429), output tokens, and a latency histogram whose bucket
-- edges the service states (`services::stats::LATENCY_EDGES_MS`, 16 buckets).
CREATE TABLE service_request_minutes (
    service_id uuid NOT NULL REFERENCES services(id),
    minute timestamptz NOT NULL CONSTRAINT service_request_minutes_whole CHECK (date_trunc('minute', minute) = minute),
    requests bigint NOT NULL CHECK (requests >= 0),
    errors bigint NOT NULL CHECK (errors >= 0),
    refused bigint NOT NULL CHECK (refused >= 0),
    output_tokens bigint NOT NULL CHECK (output_tokens >= 0),
    latency bigint[] NOT NULL CONSTRAINT service_request_minutes_buckets CHECK (cardinality(latency) = 16),
    PRIMARY KEY (service_id, minute)
);
