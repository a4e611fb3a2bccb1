-- gpuplane schema, part 14: packed raw telemetry (issue #20, second round).
--
-- 0011's raw rows held a node's GPUs in two 2-D arrays (two ~30-byte array headers, 2-4 bytes a value) keyed
-- by the node's 16-byte uuid: 56 bytes per stored GPU sample. Now each row is
--   node_key  the node's 4-byte `nodes.telemetry_key` (an identity: a node keeps it for life)
--   at        the sampling instant
--   ingested_at  when it arrived (BRIN-indexed: the rollup fold finds late rows by it)
--   samples   one fixed-width little-endian record of 25 bytes per GPU, ordered by GPU index; the layout, its
--             units and clamping are documented and written in `src/agents/codec.rs`; SQL reads it only
--             through `telemetry_decode` below (a test checks that both read alike)
--   xids      (gpu index, XID code) pairs, NULL when none
-- about 32 bytes per GPU sample in the heap and 5 in the primary key at 8 GPUs a node.
-- Daily partitions of `at`, created ahead and dropped whole by the sweeper, as before.

ALTER TABLE nodes ADD COLUMN telemetry_key integer GENERATED ALWAYS AS IDENTITY;
ALTER TABLE nodes ADD CONSTRAINT nodes_telemetry_key_key UNIQUE (telemetry_key);

-- One GPU record per output row, in the protocol's units (the `gpu_samples` view's columns).
CREATE FUNCTION telemetry_decode(b bytea)
RETURNS TABLE (idx integer, gpu_util real, mem_copy_util real, fb_used_mib integer, fb_free_mib integer,
               power_w real, energy_j bigint, gpu_temp_c real, mem_temp_c real, sm_clock_mhz integer,
               nvlink_bandwidth_gbps real, xid_count integer)
-- IMMUTABLE and not STRICT: the planner inlines it into the calling query. The offsets come from a series
-- with constant bounds (64 GPUs at most) cut at the row's length, not from generate_series(0, length(b) - 25,
-- 25): the planner can estimate the former (~21 rows a raw row) but guesses 1,000 rows for the latter, and
-- that guess put a node's last hour (360 rows) at 344,000 estimated rows, over `jit_above_cost`: 40-75 ms of
-- JIT compilation per call for a query that runs in 2 ms. (`|` and `<<` bind alike in PostgreSQL, left to
-- right: the shifts need their parentheses.)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT get_byte(b, o),
           get_byte(b, o + 1)::real / 2::real,
           get_byte(b, o + 2)::real / 2::real,
           get_byte(b, o + 3) | (get_byte(b, o + 4) << 8) | (get_byte(b, o + 5) << 16) | (get_byte(b, o + 6) << 24),
           get_byte(b, o + 7) | (get_byte(b, o + 8) << 8) | (get_byte(b, o + 9) << 16) | (get_byte(b, o + 10) << 24),
           (get_byte(b, o + 11) | (get_byte(b, o + 12) << 8))::real / 10::real,
           get_byte(b, o + 13)::bigint | (get_byte(b, o + 14)::bigint << 8) | (get_byte(b, o + 15)::bigint << 16)
               | (get_byte(b, o + 16)::bigint << 24),
           get_byte(b, o + 17)::real - 40::real,
           CASE WHEN get_byte(b, o + 18) <> 255 THEN get_byte(b, o + 18)::real - 40::real END,
           get_byte(b, o + 19) | (get_byte(b, o + 20) << 8),
           CASE WHEN (get_byte(b, o + 21) | (get_byte(b, o + 22) << 8)) <> 65535
                THEN (get_byte(b, o + 21) | (get_byte(b, o + 22) << 8))::real / 10::real END,
           get_byte(b, o + 23) | (get_byte(b, o + 24) << 8)
    FROM generate_series(0, 1575, 25) AS o
    WHERE o < length(b)
$$;

DROP VIEW gpu_samples;
ALTER TABLE telemetry_raw RENAME TO telemetry_raw_0011;
ALTER TABLE telemetry_raw_0011 RENAME CONSTRAINT telemetry_raw_pkey TO telemetry_raw_0011_pkey;
ALTER INDEX telemetry_raw_ingested_idx RENAME TO telemetry_raw_0011_ingested_idx;
DO $$
DECLARE
    p text;
BEGIN
    FOR p IN SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
             WHERE i.inhparent = 'telemetry_raw_0011'::regclass
    LOOP
        EXECUTE format('ALTER TABLE %I RENAME TO %I', p, p || '_0011');
    END LOOP;
END $$;

CREATE TABLE telemetry_raw (
    at          timestamptz NOT NULL,
    ingested_at timestamptz NOT NULL DEFAULT now(),
    node_key    integer NOT NULL,
    samples     bytea NOT NULL,
    xids        integer[],
    CONSTRAINT telemetry_raw_pkey PRIMARY KEY (node_key, at),
    -- Whole 25-byte records of 1 to 64 GPUs: what src/agents/codec.rs writes, and what telemetry_decode reads.
    CONSTRAINT telemetry_raw_whole_records CHECK (length(samples) BETWEEN 25 AND 1600 AND length(samples) % 25 = 0)
) PARTITION BY RANGE (at);
CREATE INDEX telemetry_raw_ingested_idx ON telemetry_raw USING brin (ingested_at);

-- Raw samples one row per GPU, original units, for ad-hoc SQL and short-range reads.
CREATE VIEW gpu_samples AS
SELECT g.id AS gpu_id, r.at, n.id AS node_id, d.gpu_util, d.mem_copy_util, d.fb_used_mib, d.fb_free_mib, d.power_w,
       d.energy_j, d.gpu_temp_c, d.mem_temp_c, d.sm_clock_mhz, d.nvlink_bandwidth_gbps, d.xid_count
FROM telemetry_raw r
JOIN nodes n ON n.telemetry_key = r.node_key
CROSS JOIN LATERAL telemetry_decode(r.samples) d
JOIN gpus g ON g.node_id = n.id AND g.idx = d.idx;

-- The same days as before (the sweeper keeps creating them ahead).
DO $$
DECLARE
    d date;
BEGIN
    FOR d IN SELECT generate_series(current_date - 1, current_date + 2, interval '1 day')::date
        UNION SELECT DISTINCT (at AT TIME ZONE 'UTC')::date FROM telemetry_raw_0011
    LOOP
        EXECUTE format('CREATE TABLE IF NOT EXISTS %I PARTITION OF telemetry_raw FOR VALUES FROM (%L) TO (%L)',
            'telemetry_raw_p' || to_char(d, 'YYYYMMDD'), d::timestamp AT TIME ZONE 'UTC', (d + 1)::timestamp AT TIME ZONE 'UTC');
    END LOOP;
END $$;

-- Moving the rows: 0011's units into the packed records (a one-off; the writer is `src/agents/codec.rs`).
CREATE FUNCTION pg_temp.le(v bigint, n integer) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$
    SELECT string_agg(set_byte('\x00'::bytea, 0, ((v >> (8 * i)) & 255)::integer), ''::bytea ORDER BY i)
    FROM generate_series(0, n - 1) AS i
$$;
INSERT INTO telemetry_raw (at, ingested_at, node_key, samples, xids)
SELECT r.at, r.ingested_at, n.telemetry_key,
       (SELECT string_agg(
            pg_temp.le(r.small[i][1], 1)
            || pg_temp.le(LEAST(GREATEST(round(r.small[i][2] / 50.0), 0), 200)::bigint, 1)
            || pg_temp.le(LEAST(GREATEST(round(r.small[i][3] / 50.0), 0), 200)::bigint, 1)
            || pg_temp.le(GREATEST(r.big[i][1], 0), 4)
            || pg_temp.le(GREATEST(r.big[i][2], 0), 4)
            || pg_temp.le(LEAST(GREATEST(round(r.big[i][3] / 10.0), 0), 65535)::bigint, 2)
            || pg_temp.le(r.big[i][4]::bigint & 4294967295, 4)
            || pg_temp.le(LEAST(GREATEST(round(r.small[i][4] / 10.0) + 40, 0), 254)::bigint, 1)
            -- GREATEST and LEAST skip NULLs: "not reported" is tested first.
            || pg_temp.le(CASE WHEN r.small[i][5] IS NULL THEN 255
                          ELSE LEAST(GREATEST(round(r.small[i][5] / 10.0) + 40, 0), 254)::bigint END, 1)
            || pg_temp.le(GREATEST(r.small[i][6], 0), 2)
            || pg_temp.le(CASE WHEN r.small[i][7] IS NULL THEN 65535 ELSE GREATEST(r.small[i][7], 0)::bigint END, 2)
            || pg_temp.le(GREATEST(r.small[i][8], 0), 2),
            ''::bytea ORDER BY r.small[i][1])
        FROM generate_subscripts(r.small, 1) AS i),
       r.xids
FROM telemetry_raw_0011 r JOIN nodes n ON n.id = r.node_id;

DROP TABLE telemetry_raw_0011;
