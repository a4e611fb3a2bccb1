-- gpuplane schema, part 6: creating and releasing a lease in one round trip.
--
-- POST /v1/leases and POST /v1/leases/{id}/release are the platform's hot path. Their common case runs
-- as one call of a PL/pgSQL function each, so a lease costs one statement to create and one to release
-- instead of a transaction of ten. The functions keep every rule of the general path written in Rust
-- (src/leases/store.rs) and the invariants of part 2 hold whatever either does:
--   * lease_gpus_one_current_holder still makes double booking impossible;
--   * nodes_free_gpus_range still bounds the free counters;
--   * nodes are locked with SKIP LOCKED (allocation) or in id order (release), as the general path does,
--     so the two paths cannot deadlock with each other.
-- Whatever is not the common case the allocation function declines with outcome 'fallback' BEFORE it
-- writes anything (quotas, a queue in the pool, spread placement, no unlocked node that fits, a balance too
-- small, an unknown pool): the service then runs the general path, which also produces the error messages.
-- Release declines when the lease has open jobs or is not active (a queued lease, one already ended).
--
-- Both functions also check the caller's API key and tenant, so the request needs no separate
-- authentication query: revocation and suspension still take effect at once.

-- Money a lease must be covered for up front: the first hour of an hourly lease, the whole term of a monthly
-- one (at the monthly price, or 720 hours a month at the hourly price). Saturates instead of overflowing.
-- The one definition: billing::require_balance (Rust) asks this function too.
CREATE FUNCTION lease_upfront_minor(gpu_count integer, term text, months integer, hour_price bigint, month_price bigint)
RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT LEAST(
        CASE
            WHEN term = 'hourly' THEN gpu_count::numeric * hour_price
            WHEN month_price IS NOT NULL THEN gpu_count::numeric * months * month_price
            ELSE gpu_count::numeric * 720 * months * hour_price
        END,
        9223372036854775807)::bigint
$$;

-- A lease as the API returns it (field names of the Rust `Lease`), with the GPUs given.
-- (PL/pgSQL rather than SQL functions: PL/pgSQL keeps its plans for the session, SQL functions re-plan per call.)
CREATE FUNCTION lease_json(l leases, gpus jsonb) RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN jsonb_build_object(
        'id', l.id, 'tenant_id', l.tenant_id, 'pool_id', l.pool_id, 'gpu_count', l.gpu_count,
        'placement', l.placement, 'term', l.term, 'duration_hours', l.duration_hours, 'months', l.months,
        'state', l.state, 'starts_at', l.starts_at, 'ends_at', l.ends_at, 'ended_at', l.ended_at,
        'end_reason', l.end_reason, 'generation', l.generation, 'gpus', gpus,
        'created_at', l.created_at, 'updated_at', l.updated_at);
END
$$;

-- The key behind a request: NULL when it is fine, else 'key_revoked' or 'tenant_suspended'.
CREATE FUNCTION tenant_key_problem(p_key_id uuid, p_tenant_id uuid) RETURNS text LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM api_keys k WHERE k.id = p_key_id AND k.tenant_id = p_tenant_id AND k.revoked_at IS NULL) THEN
        RETURN 'key_revoked';
    END IF;
    IF EXISTS (SELECT 1 FROM tenants t WHERE t.id = p_tenant_id AND t.status = 'suspended') THEN
        RETURN 'tenant_suspended';
    END IF;
    RETURN NULL;
END
$$;

-- Create an active lease of p_gpu_count GPUs on one node (pack or single_node placement), best fit, the GPUs
-- with the smallest index span on it (ties: lowest indices). Returns ('allocated', lease), a key problem,
-- or ('fallback', NULL) having written nothing.
CREATE FUNCTION allocate_lease_fast(
    p_lease_id uuid, p_event_id uuid, p_key_id uuid, p_tenant_id uuid, p_pool_id uuid, p_gpu_count integer,
    p_placement text, p_term text, p_hours integer, p_months integer)
RETURNS TABLE (outcome text, lease jsonb)
LANGUAGE plpgsql AS $$
DECLARE
    v_problem text;
    v_quota boolean;
    v_currency text;
    v_hour bigint;
    v_month bigint;
    v_balance bigint;
    v_node nodes%ROWTYPE;
    v_gpu uuid[];
    v_idx integer[];
    v_uuid text[];
    v_best integer := 1;
    v_span integer;
    v_lease leases%ROWTYPE;
BEGIN
    v_problem := tenant_key_problem(p_key_id, p_tenant_id);
    IF v_problem IS NOT NULL THEN
        RETURN QUERY SELECT v_problem, NULL::jsonb;
        RETURN;
    END IF;
    SELECT t.max_concurrent_leases IS NOT NULL OR t.max_gpus_per_pool IS NOT NULL
           OR EXISTS (SELECT 1 FROM tenant_pool_quotas q WHERE q.tenant_id = t.id AND q.pool_id = p_pool_id)
      INTO v_quota FROM tenants t WHERE t.id = p_tenant_id;
    IF v_quota OR p_placement NOT IN ('pack', 'single_node') THEN
        RETURN QUERY SELECT 'fallback'::text, NULL::jsonb;
        RETURN;
    END IF;
    SELECT p.currency, cp.price_per_gpu_hour_minor, cp.price_per_gpu_month_minor, COALESCE(b.balance_minor, 0)
      INTO v_currency, v_hour, v_month, v_balance
      FROM pools p
      JOIN pool_current_prices cp ON cp.pool_id = p.id
      LEFT JOIN tenant_balances b ON b.tenant_id = p_tenant_id AND b.currency = p.currency
     WHERE p.id = p_pool_id;
    IF NOT FOUND OR v_balance < lease_upfront_minor(p_gpu_count, p_term, p_months, v_hour, v_month)
       OR EXISTS (SELECT 1 FROM leases q WHERE q.pool_id = p_pool_id AND q.state = 'queued') THEN
        RETURN QUERY SELECT 'fallback'::text, NULL::jsonb;
        RETURN;
    END IF;
    -- The best-fit node nobody else holds. When every fitting node is held the general path waits for one: not
    -- here, because a SKIP LOCKED miss can keep a stray lock (a row updated under it that then failed the
    -- recheck) and waiting while holding it could deadlock; the general path waits inside savepoints.
    SELECT * INTO v_node FROM nodes
     WHERE pool_id = p_pool_id AND admin_state = 'active' AND liveness = 'ready' AND free_gpus >= p_gpu_count
     ORDER BY free_gpus, id LIMIT 1 FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'fallback'::text, NULL::jsonb;
        RETURN;
    END IF;
    -- A new statement, so a new snapshot taken after the lock: it sees every allocation committed on the node.
    SELECT array_agg(g.id ORDER BY g.idx), array_agg(g.idx ORDER BY g.idx), array_agg(g.uuid ORDER BY g.idx)
      INTO v_gpu, v_idx, v_uuid
      FROM gpus g
     WHERE g.node_id = v_node.id AND g.healthy
       AND NOT EXISTS (SELECT 1 FROM lease_gpus lg WHERE lg.gpu_id = g.id AND lg.released_at IS NULL);
    IF COALESCE(cardinality(v_idx), 0) < p_gpu_count THEN
        RAISE WARNING 'free_gpus counter of node % disagrees with the GPUs free on it', v_node.id;
        RETURN QUERY SELECT 'fallback'::text, NULL::jsonb;
        RETURN;
    END IF;
    -- The window of p_gpu_count consecutive free indices with the smallest span (src/leases/placement.rs,
    -- pick_compact: adjacent GPUs share the fastest links).
    FOR s IN 1 .. cardinality(v_idx) - p_gpu_count + 1 LOOP
        IF v_span IS NULL OR v_idx[s + p_gpu_count - 1] - v_idx[s] < v_span THEN
            v_best := s;
            v_span := v_idx[s + p_gpu_count - 1] - v_idx[s];
        END IF;
    END LOOP;
    v_gpu := v_gpu[v_best : v_best + p_gpu_count - 1];
    v_idx := v_idx[v_best : v_best + p_gpu_count - 1];
    v_uuid := v_uuid[v_best : v_best + p_gpu_count - 1];

    INSERT INTO leases (id, tenant_id, pool_id, gpu_count, placement, term, duration_hours, months, state,
                        starts_at, ends_at, created_by, metered_until, currency)
    VALUES (p_lease_id, p_tenant_id, p_pool_id, p_gpu_count, p_placement, p_term, p_hours, p_months, 'active',
            now(), now() + make_interval(months => COALESCE(p_months, 0), hours => COALESCE(p_hours, 0)),
            p_key_id, now(), v_currency)
    RETURNING * INTO v_lease;
    INSERT INTO lease_gpus (lease_id, gpu_id, node_id) SELECT p_lease_id, g, v_node.id FROM unnest(v_gpu) AS g;
    UPDATE nodes SET free_gpus = free_gpus - p_gpu_count WHERE id = v_node.id;
    INSERT INTO lease_events (id, lease_id, kind, from_state, to_state, actor)
    VALUES (p_event_id, p_lease_id, 'allocated', NULL, 'active', 'tenant:' || p_key_id);

    RETURN QUERY SELECT 'allocated'::text, lease_json(v_lease, (
        SELECT jsonb_agg(jsonb_build_object('gpu_id', u.gpu, 'node_id', v_node.id, 'hostname', v_node.hostname,
                                            'address', v_node.address, 'index', u.idx, 'uuid', u.uuid) ORDER BY u.idx)
          FROM unnest(v_gpu, v_idx, v_uuid) AS u(gpu, idx, uuid)));
END
$$;

-- Release a live lease of the tenant: state 'released', GPUs back to their nodes (healthy ones free again),
-- the event. Returns ('released', lease, queue_waiting), a key problem, or ('fallback', NULL, false) having
-- written nothing when the lease is not live, not the tenant's, or has open jobs.
CREATE FUNCTION release_lease_fast(p_lease_id uuid, p_event_id uuid, p_key_id uuid, p_tenant_id uuid)
RETURNS TABLE (outcome text, lease jsonb, queue_waiting boolean)
LANGUAGE plpgsql AS $$
DECLARE
    v_problem text;
    v_lease leases%ROWTYPE;
    v_gpu_ids uuid[];
    v_gpus jsonb;
BEGIN
    v_problem := tenant_key_problem(p_key_id, p_tenant_id);
    IF v_problem IS NOT NULL THEN
        RETURN QUERY SELECT v_problem, NULL::jsonb, false;
        RETURN;
    END IF;
    SELECT * INTO v_lease FROM leases WHERE id = p_lease_id AND tenant_id = p_tenant_id FOR UPDATE;
    IF NOT FOUND OR v_lease.state <> 'active'
       OR EXISTS (SELECT 1 FROM jobs j WHERE j.lease_id = p_lease_id AND j.state IN ('pending', 'assigned', 'running')) THEN
        RETURN QUERY SELECT 'fallback'::text, NULL::jsonb, false;
        RETURN;
    END IF;
    -- The nodes in id order, as the general path locks them.
    PERFORM 1 FROM nodes WHERE id IN (SELECT node_id FROM lease_gpus WHERE lease_id = p_lease_id AND released_at IS NULL)
      ORDER BY id FOR UPDATE;
    UPDATE leases SET state = 'released', ended_at = GREATEST(now(), starts_at), end_reason = 'released by the tenant',
                      generation = generation + 1, updated_at = now()
     WHERE id = p_lease_id
    RETURNING * INTO v_lease;
    WITH released AS (
        UPDATE lease_gpus SET released_at = now() WHERE lease_id = p_lease_id AND released_at IS NULL RETURNING gpu_id)
    SELECT array_agg(gpu_id) INTO v_gpu_ids FROM released;
    UPDATE nodes n SET free_gpus = n.free_gpus + f.healthy
      FROM (SELECT g.node_id, count(*) AS healthy FROM gpus g WHERE g.id = ANY (v_gpu_ids) AND g.healthy
             GROUP BY g.node_id) f
     WHERE n.id = f.node_id;
    INSERT INTO lease_events (id, lease_id, kind, from_state, to_state, actor, reason)
    VALUES (p_event_id, p_lease_id, 'released', 'active', 'released', 'tenant:' || p_key_id, 'released by the tenant');
    SELECT jsonb_agg(jsonb_build_object('gpu_id', g.id, 'node_id', n.id, 'hostname', n.hostname,
                                        'address', n.address, 'index', g.idx, 'uuid', g.uuid) ORDER BY n.hostname, g.idx)
      INTO v_gpus
      FROM gpus g JOIN nodes n ON n.id = g.node_id
     WHERE g.id = ANY (v_gpu_ids);
    RETURN QUERY SELECT 'released'::text, lease_json(v_lease, COALESCE(v_gpus, '[]'::jsonb)),
        EXISTS (SELECT 1 FROM leases q WHERE q.pool_id = v_lease.pool_id AND q.state = 'queued');
END
$$;
