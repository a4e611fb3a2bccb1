-- gpuplane schema, part 13: one allocation core.
--
-- Part 6 answered the common lease create and release with PL/pgSQL functions that repeated, in SQL, the
-- admission, best-fit, tightest-window and lease-shape rules of the Rust path (src/leases/{routes,store,
-- placement}.rs), which handled everything else. Two implementations of the platform's central invariant
-- drift apart: a rule added in Rust was skipped by most requests. The Rust path now decides every create,
-- extend, release and queue start, in as few statements as it can (the common create: admission with the
-- best-fit node locked, the node's free GPUs, one write; the common release: the lease ended with its jobs and
-- nodes locked, one write), so the functions go.
--
-- lease_upfront_minor (part 6) stays: it is the single definition of the money a lease must be covered for up
-- front, asked by billing::require_balance (extensions) and by lease creation's admission statement
-- (leases::store::admit). It is a pure function of its arguments, not a second copy of any rule.

DROP FUNCTION allocate_lease_fast(uuid, uuid, uuid, uuid, uuid, integer, text, text, integer, integer);
DROP FUNCTION release_lease_fast(uuid, uuid, uuid, uuid);
DROP FUNCTION lease_json(leases, jsonb);
