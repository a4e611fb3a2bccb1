-- gpuplane schema, part 11: telemetry at fleet scale (issue #20).
--
-- Raw samples: one row per node per sampling instant (an agent stamps all its GPUs with the same time), the
-- GPUs' values in two 2-D arrays of narrow integers, in daily range partitions of `at`. Retention drops whole
-- partitions (the sweeper: DETACH ... CONCURRENTLY, then DROP): no DELETE, no dead tuples, no vacuum debt.
-- The primary key (node_id, at) makes a resent heartbeat (an agent retrying, or replaying its buffer after
-- an outage) a no-op, as the old (gpu_id, at) key did.
--
--   small smallint[gpu][8]: gpu index, gpu_util and mem_copy_util in 1/100 percent, gpu_temp_c and
--                           mem_temp_c in 1/10 Celsius (NULL: not reported), sm_clock_mhz,
--                           nvlink_bandwidth_gbps in 1/10 GB/s (NULL: no NVLink; capped at 3276.7),
--                           xid_count (capped at 32767)
--   big   integer[gpu][4]:  fb_used_mib, fb_free_mib, power in 1/100 W, energy in joules modulo 2^32 (a counter:
--                           differences modulo 2^32 stay exact through one wrap, ~70 days at 700 W)
--   xids  integer[]:        (gpu index, XID code) pairs, NULL when none (the common case costs nothing)
--
-- `ingested_at` (BRIN-indexed: rows are appended in arrival order) lets the rollup fold find what arrived
-- since its watermark, late resends included.
--
-- The view `gpu_samples` shows raw samples as before (one row per GPU, original units), for ad-hoc SQL and
-- short-range reads.
--
-- Rollups, maintained by the sweeper (`src/agents/rollups.rs`), each recomputed from its source for every
-- (node, minute) / (node, hour) that received samples, so a rollup always equals the aggregate of its source:
--   gpu_minutes: per GPU per minute (daily partitions)
--   node_hours:  per node per hour, with the node's pool (monthly partitions); a pool's hours are its nodes'.
--
-- Existing data: samples of the last 24 hours move into the new raw table; all samples are folded into
-- gpu_minutes (last 30 days) and node_hours (everything), then the old table is dropped.

ALTER TABLE gpu_samples RENAME TO gpu_samples_0003;
ALTER TABLE gpu_samples_0003 RENAME CONSTRAINT gpu_samples_pkey TO gpu_samples_0003_pkey;

CREATE TABLE telemetry_raw (
    node_id     uuid NOT NULL,
    at          timestamptz NOT NULL,
    ingested_at timestamptz NOT NULL DEFAULT now(),
    small       smallint[] NOT NULL,
    big         integer[] NOT NULL,
    xids        integer[],
    CONSTRAINT telemetry_raw_pkey PRIMARY KEY (node_id, at)
) PARTITION BY RANGE (at);
CREATE INDEX telemetry_raw_ingested_idx ON telemetry_raw USING brin (ingested_at);

CREATE TABLE gpu_minutes (
    gpu_id        uuid NOT NULL,
    minute        timestamptz NOT NULL,
    node_id       uuid NOT NULL,
    samples       integer NOT NULL,
    gpu_util_sum  double precision NOT NULL,
    gpu_util_max  real NOT NULL,
    mem_copy_sum  double precision NOT NULL,
    fb_used_max   integer NOT NULL,
    power_sum     double precision NOT NULL,
    power_max     real NOT NULL,
    temp_max      real NOT NULL,
    clock_sum     double precision NOT NULL,
    xid_count     integer NOT NULL,
    -- Energy counter difference from the minute's first to its last sample (joules).
    energy_j      bigint NOT NULL,
    CONSTRAINT gpu_minutes_pkey PRIMARY KEY (gpu_id, minute)
) PARTITION BY RANGE (minute);

CREATE TABLE node_hours (
    node_id       uuid NOT NULL,
    hour          timestamptz NOT NULL,
    pool_id       uuid NOT NULL,
    samples       integer NOT NULL,
    gpu_util_sum  double precision NOT NULL,
    gpu_util_max  real NOT NULL,
    mem_copy_sum  double precision NOT NULL,
    fb_used_max   integer NOT NULL,
    power_sum     double precision NOT NULL,
    power_max     real NOT NULL,
    xid_count     integer NOT NULL,
    energy_j      bigint NOT NULL,
    CONSTRAINT node_hours_pkey PRIMARY KEY (node_id, hour)
) PARTITION BY RANGE (hour);
-- Covering, so a pool's utilization over a month is an index-only scan once autovacuum has marked closed hours
-- all-visible.
CREATE INDEX node_hours_pool_idx ON node_hours (pool_id, hour) INCLUDE (node_id, samples, gpu_util_sum, power_sum);

-- Where the fold stands: rows ingested before `folded_until` are in the rollups.
CREATE TABLE telemetry_rollup_state (
    id            boolean PRIMARY KEY DEFAULT true CHECK (id),
    folded_until  timestamptz NOT NULL
);
INSERT INTO telemetry_rollup_state (folded_until) VALUES ('-infinity');

CREATE VIEW gpu_samples AS
SELECT g.id AS gpu_id, r.at, r.node_id,
       r.small[i][2]::real / 100::real AS gpu_util,
       r.small[i][3]::real / 100::real AS mem_copy_util,
       r.big[i][1] AS fb_used_mib,
       r.big[i][2] AS fb_free_mib,
       r.big[i][3]::real / 100::real AS power_w,
       r.big[i][4]::bigint & 4294967295 AS energy_j,
       r.small[i][4]::real / 10::real AS gpu_temp_c,
       r.small[i][5]::real / 10::real AS mem_temp_c,
       r.small[i][6]::integer AS sm_clock_mhz,
       r.small[i][7]::real / 10::real AS nvlink_bandwidth_gbps,
       r.small[i][8]::integer AS xid_count
FROM telemetry_raw r
CROSS JOIN LATERAL generate_subscripts(r.small, 1) AS i
JOIN gpus g ON g.node_id = r.node_id AND g.idx = r.small[i][1];

-- Partitions around now (the sweeper keeps creating them ahead), and for the days and months of the data
-- moved below. Names: <table>_pYYYYMMDD (daily), node_hours_pYYYYMM (monthly).
DO $$
DECLARE
    d date;
BEGIN
    FOR d IN SELECT generate_series(current_date - 1, current_date + 2, interval '1 day')::date
        UNION SELECT DISTINCT (at AT TIME ZONE 'UTC')::date FROM gpu_samples_0003 WHERE at >= now() - interval '30 days'
    LOOP
        EXECUTE format('CREATE TABLE IF NOT EXISTS %I PARTITION OF telemetry_raw FOR VALUES FROM (%L) TO (%L)',
            'telemetry_raw_p' || to_char(d, 'YYYYMMDD'), d::timestamp AT TIME ZONE 'UTC', (d + 1)::timestamp AT TIME ZONE 'UTC');
        EXECUTE format('CREATE TABLE IF NOT EXISTS %I PARTITION OF gpu_minutes FOR VALUES FROM (%L) TO (%L)',
            'gpu_minutes_p' || to_char(d, 'YYYYMMDD'), d::timestamp AT TIME ZONE 'UTC', (d + 1)::timestamp AT TIME ZONE 'UTC');
    END LOOP;
    FOR d IN SELECT generate_series(date_trunc('month', current_date - 1), date_trunc('month', current_date + 2), interval '1 month')::date
        UNION SELECT DISTINCT date_trunc('month', at AT TIME ZONE 'UTC')::date FROM gpu_samples_0003
    LOOP
        EXECUTE format('CREATE TABLE IF NOT EXISTS %I PARTITION OF node_hours FOR VALUES FROM (%L) TO (%L)',
            'node_hours_p' || to_char(d, 'YYYYMM'), d::timestamp AT TIME ZONE 'UTC',
            (d + interval '1 month')::timestamp AT TIME ZONE 'UTC');
    END LOOP;
END $$;

INSERT INTO telemetry_raw (node_id, at, small, big, xids)
SELECT s.node_id, s.at,
       array_agg(ARRAY[g.idx, round(s.gpu_util * 100), round(s.mem_copy_util * 100), round(s.gpu_temp_c * 10),
                       round(s.mem_temp_c * 10), LEAST(s.sm_clock_mhz, 32767),
                       CASE WHEN s.nvlink_bandwidth_gbps IS NOT NULL THEN round(LEAST(s.nvlink_bandwidth_gbps, 3276.7) * 10) END, LEAST(s.xid_count, 32767)]::smallint[]
                 ORDER BY g.idx),
       array_agg(ARRAY[s.fb_used_mib, s.fb_free_mib, round(s.power_w * 100),
                       ((s.energy_mj / 1000) % 4294967296 - CASE WHEN (s.energy_mj / 1000) % 4294967296 >= 2147483648
                                                                THEN 4294967296 ELSE 0 END)]::integer[]
                 ORDER BY g.idx),
       NULL
FROM gpu_samples_0003 s JOIN gpus g ON g.id = s.gpu_id
WHERE s.at >= now() - interval '24 hours'
GROUP BY s.node_id, s.at
ON CONFLICT DO NOTHING;

-- Older samples: straight into the rollups, as the fold would have made them.
INSERT INTO gpu_minutes
SELECT gpu_id, date_trunc('minute', at), min(node_id::text)::uuid, count(*), sum(gpu_util::float8), max(gpu_util),
       sum(mem_copy_util::float8), max(fb_used_mib), sum(power_w::float8), max(power_w), max(gpu_temp_c), sum(sm_clock_mhz),
       sum(xid_count), (max(energy_mj) - min(energy_mj)) / 1000
FROM gpu_samples_0003 WHERE at >= now() - interval '30 days' AND at < now() - interval '24 hours'
GROUP BY 1, 2;
INSERT INTO node_hours
SELECT s.node_id, date_trunc('hour', s.at), n.pool_id, count(*), sum(gpu_util::float8), max(gpu_util),
       sum(mem_copy_util::float8), max(fb_used_mib), sum(power_w::float8), max(power_w), sum(xid_count), sum(energy_j)
FROM (SELECT s.*, (max(energy_mj) OVER w - min(energy_mj) OVER w) / 1000 / count(*) OVER w AS energy_j
      FROM gpu_samples_0003 s WHERE at < now() - interval '24 hours'
      WINDOW w AS (PARTITION BY gpu_id, date_trunc('hour', at))) s
JOIN nodes n ON n.id = s.node_id
GROUP BY 1, 2, 3;

DROP TABLE gpu_samples_0003;
