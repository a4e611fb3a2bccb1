-- A latency report whose every probe was lost is kept too (0 answered, p50/p99 0): the service says the peer is
-- unreachable and refuses multi-node jobs across the pair (src/jobs/reachability.rs).
ALTER TABLE lease_latency
    DROP CONSTRAINT lease_latency_counts,
    ADD CONSTRAINT lease_latency_counts CHECK (probes >= 0 AND lost >= 0 AND (probes > 0 OR lost > 0));
