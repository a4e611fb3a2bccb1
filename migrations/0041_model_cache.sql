-- The read-only model cache each host offers its leases (gpuplane-agent --model-cache): the models it holds, by
-- hub id, as its agent last reported them. Leases that name a model prefer hosts holding it.
ALTER TABLE nodes ADD COLUMN cached_models text[] NOT NULL DEFAULT '{}';
ALTER TABLE nodes ADD CONSTRAINT nodes_cached_models_bounded CHECK (cardinality(cached_models) <= 1024);
