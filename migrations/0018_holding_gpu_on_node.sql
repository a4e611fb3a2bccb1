-- A GPU holding names the GPU and its node. Two foreign keys checked each on its own (lease_gpus -> gpus,
-- lease_gpus -> nodes) become one composite key to gpus (id, node_id): one check per holding instead of two on
-- every allocation, and it states what the two did not: the node of a holding is the node of its GPU.
ALTER TABLE gpus ADD CONSTRAINT gpus_id_node_unique UNIQUE (id, node_id);
ALTER TABLE lease_gpus
    DROP CONSTRAINT lease_gpus_gpu_id_fkey,
    DROP CONSTRAINT lease_gpus_node_id_fkey,
    ADD CONSTRAINT lease_gpus_gpu_on_node_fkey FOREIGN KEY (gpu_id, node_id) REFERENCES gpus (id, node_id);
