-- Services' request counts per minute are kept `--telemetry-minute-retention-days` (docs/serving.md): the sweep
-- that deletes the older ones finds them by minute, across services.

CREATE INDEX service_request_minutes_by_minute ON service_request_minutes (minute);
