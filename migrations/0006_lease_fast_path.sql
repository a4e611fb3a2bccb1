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
-- Both functions also require the caller's API key to be valid and its tenant active, so the request needs
-- no separate authentication query; when they are not, the function declines and the service's own key
-- check answers 401 or 403. Revocation and suspension still take effect at once.

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

-- Create an active lease of p_gpu_count GPUs on one node (pack or single_node placement), best fit, the GPUs
-- with the smallest index span on it (ties: lowest indices). Four statements: may the request go ahead, lock
-- the node, read its free GPUs, write everything. Returns ('allocated', lease, NULL);
-- ('insufficient', NULL, capacity) when the pool's committed free counters cannot hold the request (free GPUs,
-- largest free block, leases queued: the figures of a 409); or ('fallback', NULL, NULL). The last two having
-- written nothing.
CREATE FUNCTION allocate_lease_fast(
    p_lease_id uuid, p_event_id uuid, p_key_id uuid, p_tenant_id uuid, p_pool_id uuid, p_gpu_count integer,
    p_placement text, p_term text, p_hours integer, p_months integer)
RETURNS TABLE (outcome text, lease jsonb, capacity jsonb)
LANGUAGE plpgsql AS $$
DECLARE
    v_node nodes%ROWTYPE;
    v_gpu uuid[];
    v_idx integer[];
    v_uuid text[];
    v_best integer := 1;
    v_span integer;
    v_free bigint;
    v_largest bigint;
    v_pool_gpus bigint;
    v_pool_largest bigint;
BEGIN
    -- Whether the request may take this path at all: the key is valid and the tenant active, without quotas,
    -- with the balance for it, and nobody waits in the pool's queue (a new request does not jump it). Anything
    -- else is for the general path, which also words the errors.
    IF p_placement NOT IN ('pack', 'single_node') OR NOT EXISTS (
           SELECT 1
             FROM api_keys k
             JOIN tenants t ON t.id = k.tenant_id
             JOIN pools p ON p.id = p_pool_id
             JOIN pool_current_prices cp ON cp.pool_id = p.id
             LEFT JOIN tenant_balances b ON b.tenant_id = t.id AND b.currency = p.currency
            WHERE k.id = p_key_id AND k.tenant_id = p_tenant_id AND k.revoked_at IS NULL AND t.status = 'active'
              AND t.max_concurrent_leases IS NULL AND t.max_gpus_per_pool IS NULL
              AND NOT EXISTS (SELECT 1 FROM tenant_pool_quotas q WHERE q.tenant_id = t.id AND q.pool_id = p_pool_id)
              AND COALESCE(b.balance_minor, 0) >= lease_upfront_minor(p_gpu_count, p_term, p_months,
                      cp.price_per_gpu_hour_minor, cp.price_per_gpu_month_minor))
       OR EXISTS (SELECT 1 FROM leases q WHERE q.pool_id = p_pool_id AND q.state = 'queued') THEN
        RETURN QUERY SELECT 'fallback'::text, NULL::jsonb, NULL::jsonb;
        RETURN;
    END IF;
    -- The best-fit node nobody else holds. When every fitting node is held the general path waits for one: not
    -- here, because a SKIP LOCKED miss can keep a stray lock (a row updated under it that then failed the
    -- recheck) and waiting while holding it could deadlock; the general path waits inside savepoints.
    SELECT * INTO v_node FROM nodes
     WHERE pool_id = p_pool_id AND admin_state = 'active' AND liveness = 'ready' AND free_gpus >= p_gpu_count
     ORDER BY free_gpus, id LIMIT 1 FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        -- No capacity at all (by the committed counters) is answered here, cheaply: under a full pool most
        -- requests are refused, and the general path's refusal costs a transaction of ten statements. Requests
        -- that can never fit (422) and everything else go to the general path.
        SELECT COALESCE(sum(free_gpus) FILTER (WHERE admin_state = 'active' AND liveness = 'ready'), 0),
               COALESCE(max(free_gpus) FILTER (WHERE admin_state = 'active' AND liveness = 'ready'), 0),
               COALESCE(sum(gpu_count), 0), COALESCE(max(gpu_count), 0)
          INTO v_free, v_largest, v_pool_gpus, v_pool_largest
          FROM nodes WHERE pool_id = p_pool_id;
        IF p_gpu_count <= v_pool_gpus AND (p_placement = 'pack' OR p_gpu_count <= v_pool_largest)
           AND (v_free < p_gpu_count OR (p_placement = 'single_node' AND v_largest < p_gpu_count)) THEN
            RETURN QUERY SELECT 'insufficient'::text, NULL::jsonb,
                jsonb_build_object('requested', p_gpu_count, 'free_gpus', v_free, 'largest_free_block', v_largest,
                                   'queued_ahead', 0);
            RETURN;
        END IF;
        RETURN QUERY SELECT 'fallback'::text, NULL::jsonb, NULL::jsonb;
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
        RETURN QUERY SELECT 'fallback'::text, NULL::jsonb, NULL::jsonb;
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

    -- One statement writes the lease, its GPUs, the node's counter and the event (foreign keys are checked at
    -- its end, when the lease row exists).
    RETURN QUERY
    WITH created AS (
        INSERT INTO leases (id, tenant_id, pool_id, gpu_count, placement, term, duration_hours, months, state,
                            starts_at, ends_at, created_by, metered_until, currency)
        VALUES (p_lease_id, p_tenant_id, p_pool_id, p_gpu_count, p_placement, p_term, p_hours, p_months, 'active',
                now(), now() + make_interval(months => COALESCE(p_months, 0), hours => COALESCE(p_hours, 0)),
                p_key_id, now(), (SELECT currency FROM pools WHERE id = p_pool_id))
        RETURNING *),
    held AS (
        INSERT INTO lease_gpus (lease_id, gpu_id, node_id) SELECT p_lease_id, g, v_node.id FROM unnest(v_gpu) AS g),
    counted AS (
        UPDATE nodes SET free_gpus = free_gpus - p_gpu_count WHERE id = v_node.id),
    recorded AS (
        INSERT INTO lease_events (id, lease_id, kind, from_state, to_state, actor)
        VALUES (p_event_id, p_lease_id, 'allocated', NULL, 'active', 'tenant:' || p_key_id))
    SELECT 'allocated'::text, lease_json(c, (
        SELECT jsonb_agg(jsonb_build_object('gpu_id', u.gpu, 'node_id', v_node.id, 'hostname', v_node.hostname,
                                            'address', v_node.address, 'index', u.idx, 'uuid', u.uuid) ORDER BY u.idx)
          FROM unnest(v_gpu, v_idx, v_uuid) AS u(gpu, idx, uuid))), NULL::jsonb
      FROM created c;
END
$$;

-- Release an active lease of the tenant: state 'released', GPUs back to their nodes (healthy ones free again),
-- the event. Three statements: end the lease (the checks ride along), lock its nodes in id order, write the
-- rest. Returns ('released', lease, queue_waiting), or ('fallback', NULL, false) having written nothing when
-- the key or tenant is not in order, the lease is not the tenant's, not active, or has open jobs.
CREATE FUNCTION release_lease_fast(p_lease_id uuid, p_event_id uuid, p_key_id uuid, p_tenant_id uuid)
RETURNS TABLE (outcome text, lease jsonb, queue_waiting boolean)
LANGUAGE plpgsql AS $$
DECLARE
    v_lease leases%ROWTYPE;
BEGIN
    -- The lease row first, then its nodes: the order every path that ends a lease takes.
    UPDATE leases l SET state = 'released', ended_at = GREATEST(now(), l.starts_at),
                        end_reason = 'released by the tenant', generation = l.generation + 1, updated_at = now()
     WHERE l.id = p_lease_id AND l.tenant_id = p_tenant_id AND l.state = 'active'
       AND EXISTS (SELECT 1 FROM api_keys k JOIN tenants t ON t.id = k.tenant_id
                    WHERE k.id = p_key_id AND k.tenant_id = p_tenant_id AND k.revoked_at IS NULL AND t.status = 'active')
       AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.lease_id = p_lease_id AND j.state IN ('pending', 'assigned', 'running'))
    RETURNING l.* INTO v_lease;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'fallback'::text, NULL::jsonb, false;
        RETURN;
    END IF;
    PERFORM 1 FROM nodes WHERE id IN (SELECT node_id FROM lease_gpus WHERE lease_id = p_lease_id AND released_at IS NULL)
      ORDER BY id FOR UPDATE;
    RETURN QUERY
    WITH released AS (
        UPDATE lease_gpus SET released_at = now() WHERE lease_id = p_lease_id AND released_at IS NULL
        RETURNING gpu_id),
    held AS (
        SELECT g.id, g.node_id, g.idx, g.uuid, g.healthy, n.hostname, n.address
          FROM released r JOIN gpus g ON g.id = r.gpu_id JOIN nodes n ON n.id = g.node_id),
    counted AS (
        UPDATE nodes n SET free_gpus = n.free_gpus + f.healthy
          FROM (SELECT node_id, count(*) FILTER (WHERE healthy) AS healthy FROM held GROUP BY node_id) f
         WHERE n.id = f.node_id),
    recorded AS (
        INSERT INTO lease_events (id, lease_id, kind, from_state, to_state, actor, reason)
        VALUES (p_event_id, p_lease_id, 'released', 'active', 'released', 'tenant:' || p_key_id,
                'released by the tenant'))
    SELECT 'released'::text,
           lease_json(v_lease, COALESCE((
               SELECT jsonb_agg(jsonb_build_object('gpu_id', h.id, 'node_id', h.node_id, 'hostname', h.hostname,
                                                   'address', h.address, 'index', h.idx, 'uuid', h.uuid)
                                ORDER BY h.hostname, h.idx) FROM held h), '[]'::jsonb)),
           EXISTS (SELECT 1 FROM leases q WHERE q.pool_id = v_lease.pool_id AND q.state = 'queued');
END
$$;
