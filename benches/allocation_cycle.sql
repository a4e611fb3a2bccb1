-- One allocation cycle as the service sends it to PostgreSQL: create a lease of 1 to :gpus GPUs (pack, one hour)
-- and release it, one statement each. A pgbench script (run with -M prepared); the caller defines key_id,
-- tenant_id, pool_id and gpus with -D. Used by `cargo bench --bench allocation` (the database alone) and by
-- scripts/allocation-cost-breakdown.sh.
\set n random(1, :gpus)
SELECT COALESCE(lease->>'id', '00000000-0000-0000-0000-000000000000') AS lid FROM allocate_lease_fast(gen_random_uuid(), gen_random_uuid(), :key_id, :tenant_id, :pool_id, :n, 'pack', 'hourly', 1, NULL) \gset
SELECT outcome FROM release_lease_fast(:lid, gen_random_uuid(), :key_id, :tenant_id);
