-- The IPv4 subnet a node gives its leases' network namespaces (reported by its agent at registration). The
-- service derives each lease's address on the node from it (gpuplane_protocol::lease_network) for MASTER_ADDR
-- and for the routes the lease's other nodes install. NULL: the node runs jobs on its own network.
ALTER TABLE nodes ADD COLUMN lease_subnet text;
