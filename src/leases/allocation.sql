-- gpuplane's allocation core: the decisions of creating, starting and ending a lease, as PL/pgSQL functions.
--
-- Not a migration. The service applies this file at start-up (`leases::allocation::install`), in one transaction under
-- an advisory lock, with CREATE OR REPLACE, so a changed rule is a changed line here and every replica runs the
-- newest file it was built with. Every path that creates, starts or ends a lease calls these functions
-- (src/leases/store.rs); none of them writes a lease, its GPUs or its nodes' counters any other way.
--
-- A name in double braces marks where `install` puts the one statement of a rule that Rust code uses too:
--   key_check       auth::key_check_cte: whether an API key may act now, and for which tenant
--   balance_covers  billing::balance_covers_sql: whether a balance covers an amount due
--   best_fit_lock   leases::store::best_fit_sql: the best-fit node with room, locked, held ones skipped
--   best_fit_any    the same rule: whether any node has room
--   end_jobs        jobs::store::end_jobs_of_leases_ctes: a lease's open jobs ended with it
--
-- Why functions: PostgreSQL runs the small statements of a function one after another and only those the case
-- needs, where one statement of CTEs initialises every part of itself (tables, indexes, CHECK constraints) on
-- every call. Each statement of a function also takes a new snapshot, so a statement after a lock sees
-- everything committed on the locked rows. The functions run with plan_cache_mode = force_generic_plan: their
-- statements are planned once per session, where the ones with array parameters would otherwise be planned anew
-- on every call (that planning made the first version of these functions slower than the statements they replace).
--
-- Locking order, the same for every caller: a lease row before its nodes; several nodes in id order (or one
-- node with SKIP LOCKED); nothing waits for a node while holding another.

-- A lease as the API returns it (`leases::Lease`), with the GPUs given as a jsonb array.
CREATE OR REPLACE FUNCTION gp_lease_json(l leases, gpus jsonb) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT (to_jsonb(l) - 'gpu_ids') || jsonb_build_object('gpus', COALESCE(gpus, '[]'::jsonb))
$$;

-- The GPUs `ids` as a lease shows them: with their node's hostname and address, by hostname and index.
-- (PL/pgSQL, which keeps its plans for the session, where an SQL function with an aggregate is planned per call.)
CREATE OR REPLACE FUNCTION gp_lease_gpus(ids uuid[]) RETURNS jsonb
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    RETURN (SELECT COALESCE(jsonb_agg(jsonb_build_object('gpu_id', g.id, 'node_id', n.id, 'hostname', n.hostname,
                   'address', n.address, 'index', g.idx, 'uuid', g.uuid) ORDER BY n.hostname, g.idx), '[]'::jsonb)
              FROM gpus g JOIN nodes n ON n.id = g.node_id
             WHERE g.id = ANY(ids));
END
$$;

-- Write a lease with the GPUs of a plan: `p_takes[i]` GPUs of node `p_nodes[i]`, nodes the caller's transaction
-- has locked. Inserts the lease (active with the plan's GPUs; queued, holding nothing, with an empty plan), or
-- with `p_activate` starts the queued lease `p_lease_id` on them. Records the event; returns the lease, or NULL
-- having written nothing when a planned node has fewer free healthy GPUs than its take (a counter out of step)
-- or the lease to start is no longer queued.
--
-- Inside each node it takes the window of `take` free healthy GPUs with the smallest index span, ties to the
-- lowest indices: adjacent indices share a PCIe switch or NVLink pair on common boards, so the smallest span is
-- the best guess when a node reports no finer topology, and taking the low end keeps the high end free in one
-- block. This is the one statement of that rule.
CREATE OR REPLACE FUNCTION gp_lease_write(
    p_lease_id uuid, p_nodes uuid[], p_takes integer[],
    p_event_id uuid, p_kind text, p_from text, p_to text, p_actor text, p_reason text, p_detail jsonb,
    p_tenant_id uuid, p_pool_id uuid, p_gpu_count integer, p_placement text, p_term text, p_hours integer,
    p_months integer, p_created_by uuid, p_activate boolean)
RETURNS jsonb LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
    v_ids uuid[] := '{}';
    v_lease leases;
    v_json jsonb;
BEGIN
    IF cardinality(p_nodes) > 0 THEN
        WITH plan AS (SELECT * FROM unnest(p_nodes, p_takes) AS p(node_id, take)),
        free AS (
            SELECT g.id, g.node_id, g.idx, p.take, row_number() OVER w AS rn,
                   lead(g.idx, p.take - 1) OVER w AS window_last
              FROM gpus g JOIN plan p ON p.node_id = g.node_id
             WHERE g.node_id = ANY(p_nodes) AND g.healthy AND g.held_by IS NULL
            WINDOW w AS (PARTITION BY g.node_id ORDER BY g.idx)),
        best AS (
            SELECT DISTINCT ON (node_id) node_id, rn AS first_rn, take FROM free WHERE window_last IS NOT NULL
             ORDER BY node_id, window_last - idx, idx)
        SELECT COALESCE(array_agg(f.id ORDER BY f.id), '{}') INTO v_ids
          FROM best b JOIN free f ON f.node_id = b.node_id AND f.rn >= b.first_rn AND f.rn < b.first_rn + b.take;
        IF cardinality(v_ids) <> (SELECT sum(t) FROM unnest(p_takes) AS t) THEN
            RAISE WARNING 'free_gpus counters disagree with the GPUs free on the planned nodes of lease %', p_lease_id;
            RETURN NULL;
        END IF;
    END IF;
    IF p_activate THEN
        UPDATE leases SET state = 'active', starts_at = now(), metered_until = now(),
               ends_at = now() + make_interval(months => COALESCE(months, 0), hours => COALESCE(duration_hours, 0)),
               gpu_ids = v_ids, generation = generation + 1, updated_at = now()
         WHERE id = p_lease_id AND state = 'queued'
        RETURNING * INTO v_lease;
        IF NOT FOUND THEN
            RETURN NULL;
        END IF;
    ELSE
        INSERT INTO leases (id, tenant_id, pool_id, gpu_count, placement, term, duration_hours, months, state,
                            starts_at, ends_at, created_by, metered_until, currency, gpu_ids)
        SELECT p_lease_id, p_tenant_id, p_pool_id, p_gpu_count, p_placement, p_term, p_hours, p_months, a.state,
               a.at, a.at + make_interval(months => COALESCE(p_months, 0), hours => COALESCE(p_hours, 0)),
               p_created_by, a.at, (SELECT currency FROM pools WHERE id = p_pool_id), v_ids
          FROM (SELECT CASE WHEN cardinality(v_ids) > 0 THEN 'active' ELSE 'queued' END AS state,
                       CASE WHEN cardinality(v_ids) > 0 THEN now() END AS at) a
        RETURNING * INTO v_lease;
    END IF;
    WITH held AS (UPDATE gpus SET held_by = p_lease_id WHERE id = ANY(v_ids) AND held_by IS NULL),
    counted AS (
        UPDATE nodes n SET free_gpus = n.free_gpus - p.take
          FROM unnest(p_nodes, p_takes) AS p(node_id, take)
         WHERE n.id = ANY(p_nodes) AND n.id = p.node_id),
    recorded AS (
        INSERT INTO lease_events (id, lease_id, kind, from_state, to_state, actor, reason, detail)
        VALUES (p_event_id, p_lease_id, p_kind, p_from, p_to, p_actor, p_reason, p_detail))
    SELECT gp_lease_json(v_lease, gp_lease_gpus(v_ids)) INTO v_json;
    RETURN v_json;
END
$$;

-- Admission of a new lease: everything the request needs checked (the caller's key and tenant, quotas or not,
-- the pool, the up-front amount against the balance, a queue in the pool) and, with `p_try_lock` when nothing in
-- that stops it, the best-fit node locked with SKIP LOCKED. When it locked a node and everything admits the
-- request (the key may act for `p_tenant_id`, the pool exists, the balance covers it), it also writes the lease
-- there, active (`gp_lease_write`), so that the common create is one call.
--
-- A SKIP LOCKED miss can keep a stray lock (a row updated under it that then failed the recheck); such a row
-- was a candidate in the statement's snapshot, so `node_fits` is true whenever one may be held, and the caller
-- then rolls back and retries in wait mode instead of waiting while it may hold a node.
CREATE OR REPLACE FUNCTION gp_lease_admit(
    p_lease_id uuid, p_event_id uuid, p_key_id uuid, p_tenant_id uuid, p_pool_id uuid, p_gpu_count integer,
    p_placement text, p_term text, p_hours integer, p_months integer, p_try_lock boolean,
    OUT checked_key_id uuid, OUT checked_tenant_id uuid, OUT key_revoked boolean, OUT key_may_act boolean,
    OUT tenant_has_quotas boolean, OUT pool_currency text, OUT required_minor bigint, OUT balance_minor bigint,
    OUT balance_covers boolean, OUT queued_ahead boolean, OUT lock_tried boolean, OUT locked_node uuid,
    OUT node_fits boolean, OUT lease jsonb)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
BEGIN
    WITH {{key_check}},
    tenant AS (
        SELECT t.id, t.max_concurrent_leases IS NOT NULL OR t.max_gpus_per_pool IS NOT NULL
               OR EXISTS (SELECT 1 FROM tenant_pool_quotas q WHERE q.tenant_id = t.id AND q.pool_id = p_pool_id)
               AS has_quotas
          FROM tenants t WHERE t.id = (SELECT checked_tenant_id FROM key_check)),
    pool AS (
        SELECT due.*, {{balance_covers}} AS covers FROM (
            SELECT p.id, p.currency,
                   lease_upfront_minor(p_gpu_count, p_term, COALESCE(p_months, 0), cp.price_per_gpu_hour_minor,
                                       cp.price_per_gpu_month_minor) AS required_minor,
                   COALESCE(b.balance_minor, 0) AS balance_minor,
                   EXISTS (SELECT 1 FROM leases q WHERE q.pool_id = p.id AND q.state = 'queued') AS queued_ahead
              FROM pools p LEFT JOIN pool_current_prices cp ON cp.pool_id = p.id
              LEFT JOIN tenant_balances b ON b.tenant_id = (SELECT id FROM tenant) AND b.currency = p.currency
             WHERE p.id = p_pool_id) due)
    SELECT key_check.checked_key_id, key_check.checked_tenant_id, key_check.key_revoked, key_check.key_may_act,
           tenant.has_quotas, pool.currency, pool.required_minor, pool.balance_minor, pool.covers,
           COALESCE(pool.queued_ahead, false)
      INTO checked_key_id, checked_tenant_id, key_revoked, key_may_act, tenant_has_quotas, pool_currency,
           required_minor, balance_minor, balance_covers, queued_ahead
      FROM (SELECT 1) one LEFT JOIN key_check ON true LEFT JOIN tenant ON true LEFT JOIN pool ON true;
    lock_tried := p_try_lock AND NOT COALESCE(tenant_has_quotas, true) AND NOT queued_ahead;
    node_fits := false;
    IF NOT lock_tried THEN
        RETURN;
    END IF;
    locked_node := ({{best_fit_lock}});
    IF locked_node IS NULL THEN
        node_fits := EXISTS ({{best_fit_any}});
    ELSIF COALESCE(key_may_act AND checked_tenant_id = p_tenant_id, false) AND COALESCE(balance_covers, false) THEN
        lease := gp_lease_write(p_lease_id, ARRAY[locked_node], ARRAY[p_gpu_count],
                                p_event_id, 'allocated', NULL, 'active', 'tenant:' || p_key_id, NULL, NULL,
                                p_tenant_id, p_pool_id, p_gpu_count, p_placement, p_term, p_hours, p_months,
                                p_key_id, false);
    END IF;
END
$$;

-- End a live lease (queued or active): its final state `p_to`, its open jobs ended, its GPUs given back (the
-- healthy ones counted free again on their nodes), the event recorded. With `p_tenant_id`, only that tenant's
-- lease; with `p_key_id`, only if that API key may act now and the lease is its tenant's (the key check is
-- returned either way). `p_ended_at` defaults to now and is never later than now nor before the lease started.
-- Returns the lease as it ended with the GPUs it held, its state before, and whether others wait in its pool's
-- queue; `lease` NULL when there is no such live lease (ending twice is harmless).
CREATE OR REPLACE FUNCTION gp_lease_end(
    p_lease_id uuid, p_to text, p_ended_at timestamptz, p_reason text, p_tenant_id uuid, p_job_state text,
    p_job_reason text, p_key_id uuid, p_event_id uuid, p_kind text, p_actor text,
    OUT checked_key_id uuid, OUT checked_tenant_id uuid, OUT key_revoked boolean, OUT key_may_act boolean,
    OUT lease jsonb, OUT old_state text, OUT queue_waiting boolean)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
    v_lease leases;
    v_jobs bigint;
BEGIN
    IF p_key_id IS NOT NULL THEN
        WITH {{key_check}}
        SELECT checked_key_id, checked_tenant_id, key_revoked, key_may_act
          INTO checked_key_id, checked_tenant_id, key_revoked, key_may_act FROM key_check;
        IF NOT COALESCE(key_may_act, false) THEN
            RETURN;
        END IF;
    END IF;
    -- The lease row first, then its nodes: the order of every path that ends a lease or starts one.
    SELECT state INTO old_state FROM leases
     WHERE id = p_lease_id AND (p_tenant_id IS NULL OR tenant_id = p_tenant_id)
       AND (p_key_id IS NULL OR tenant_id = checked_tenant_id)
       FOR UPDATE;
    IF old_state IS NULL OR old_state NOT IN ('queued', 'active') THEN
        old_state := NULL;
        RETURN;
    END IF;
    UPDATE leases l SET state = p_to,
           ended_at = GREATEST(LEAST(COALESCE(p_ended_at, now()), now()), COALESCE(l.starts_at, now())),
           end_reason = p_reason, generation = l.generation + 1, updated_at = now()
     WHERE l.id = p_lease_id
    RETURNING * INTO v_lease;
    WITH {{end_jobs}} SELECT count(*) INTO v_jobs FROM open_jobs;
    -- Health is read after the node locks, from the GPU rows as this statement gives them back: a health change
    -- (which locks the node first) committed before the locks counts.
    PERFORM 1 FROM nodes
      WHERE id IN (SELECT node_id FROM gpus WHERE id = ANY(v_lease.gpu_ids) AND held_by = p_lease_id)
      ORDER BY id FOR UPDATE;
    WITH held AS (
        UPDATE gpus g SET held_by = NULL WHERE g.id = ANY(v_lease.gpu_ids) AND g.held_by = p_lease_id
        RETURNING g.id, g.node_id, g.healthy),
    counted AS (
        UPDATE nodes SET free_gpus = nodes.free_gpus + f.n
          FROM (SELECT node_id, count(*) FILTER (WHERE healthy) AS n FROM held GROUP BY node_id) f
         WHERE nodes.id = f.node_id),
    recorded AS (
        INSERT INTO lease_events (id, lease_id, kind, from_state, to_state, actor, reason)
        VALUES (p_event_id, p_lease_id, p_kind, old_state, p_to, p_actor, p_reason))
    SELECT gp_lease_json(v_lease, gp_lease_gpus(ARRAY(SELECT id FROM held))),
           EXISTS (SELECT 1 FROM leases q WHERE q.pool_id = v_lease.pool_id AND q.state = 'queued')
      INTO lease, queue_waiting;
END
$$;
