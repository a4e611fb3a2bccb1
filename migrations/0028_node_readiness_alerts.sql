-- Node readiness alerts are transitions (inventory::readiness): each cause a node is not ready for is raised
-- once, as a `webhook_alerts` row (condition `node.not_ready:<cause>`, subject the node), until it clears.
-- Nodes already not ready were announced under the rule before: record their causes as raised, so the first
-- judgement after the upgrade does not announce them again. The reason text names each shortfall as
-- `driver ...` or `CUDA ...`, joined by `; `.
INSERT INTO webhook_alerts (condition, subject_id)
SELECT 'node.not_ready:driver_version', id FROM nodes WHERE not_ready_reason ~ '(^|; )driver '
UNION ALL
SELECT 'node.not_ready:cuda_version', id FROM nodes WHERE not_ready_reason ~ '(^|; )CUDA '
ON CONFLICT DO NOTHING;
