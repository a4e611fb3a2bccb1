-- Tenant volumes: storage that outlives a lease (docs/volumes.md).
--
-- A volume is one filesystem image (a sparse file formatted ext4, loop-mounted by an agent, so its size is its
-- quota) in one pool. Its kind says where the image lives:
--   host: in a directory of the one host that made it (node_id); leases that attach it are placed on that host;
--   pool: on a filesystem the operator mounts at one path on every host of the pool (NFS, CephFS, ...); node_id is
--         the agent that makes, grows and destroys the image, and any host of the pool may mount it.
-- What a pool offers is the operator's choice (pools.volume_kinds); which hosts can hold one is what their agents
-- report (nodes.volume_stores): the service never assumes a store an agent did not report.
--
-- States: creating (asked of its agent) -> ready (the agent reported the image made and mounted) -> deleting (the
-- tenant deleted it: billing stops, the agent destroys the image) -> deleted (the agent reported it destroyed).
-- failed: the agent could not make it (never charged). The name is the tenant's handle and unique among its volumes
-- that are not deleted.
ALTER TABLE pools
    ADD COLUMN volume_kinds        text[] NOT NULL DEFAULT '{}',
    ADD COLUMN volume_capacity_gib bigint,
    ADD CONSTRAINT pools_volume_kinds_valid CHECK (volume_kinds <@ ARRAY['host', 'pool']::text[]),
    ADD CONSTRAINT pools_volume_capacity_valid CHECK (volume_capacity_gib IS NULL OR volume_capacity_gib >= 0);

-- Quotas, as the other tenant quotas: NULL means unlimited.
ALTER TABLE tenants
    ADD COLUMN max_volumes    integer,
    ADD COLUMN max_volume_gib bigint,
    ADD CONSTRAINT tenants_quota_volumes_nonnegative CHECK (max_volumes IS NULL OR max_volumes >= 0),
    ADD CONSTRAINT tenants_quota_volume_gib_nonnegative CHECK (max_volume_gib IS NULL OR max_volume_gib >= 0);

-- What each agent reported of its volume stores at its last heartbeat: [{"kind", "total_bytes", "free_bytes"}].
ALTER TABLE nodes ADD COLUMN volume_stores jsonb NOT NULL DEFAULT '[]';

-- The storage price over time, per GiB and 30-day month (a monthly price counts 1 cost unit per GiB-second, the
-- units of 0004_billing.sql). A pool without a price in force sells no volumes.
CREATE TABLE pool_storage_prices (
    id                         uuid PRIMARY KEY,
    pool_id                    uuid NOT NULL REFERENCES pools (id) ON DELETE CASCADE,
    effective_from             timestamptz NOT NULL,
    price_per_gib_month_minor  bigint NOT NULL,
    created_at                 timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT pool_storage_prices_effective_unique UNIQUE (pool_id, effective_from),
    CONSTRAINT pool_storage_prices_range CHECK (price_per_gib_month_minor BETWEEN 0 AND 100000000)
);

CREATE TABLE volumes (
    id                      uuid PRIMARY KEY,
    tenant_id               uuid NOT NULL REFERENCES tenants (id),
    pool_id                 uuid NOT NULL REFERENCES pools (id),
    name                    text NOT NULL,
    kind                    text NOT NULL,
    size_gib                integer NOT NULL,
    node_id                 uuid NOT NULL REFERENCES nodes (id),
    state                   text NOT NULL DEFAULT 'creating',
    state_reason            text,
    -- The last report of its agent: the filesystem's size and what is used in it.
    reported_size_bytes     bigint,
    used_bytes              bigint,
    reported_at             timestamptz,
    -- Opt-in idle policy: deleted once detached this many days (a webhook notice a day before). detached_since:
    -- since when no lease has it (NULL while attached).
    delete_after_idle_days  integer,
    detached_since          timestamptz DEFAULT now(),
    idle_notice_at          timestamptz,
    created_by              uuid,
    created_at              timestamptz NOT NULL DEFAULT now(),
    ready_at                timestamptz,
    deleted_at              timestamptz,
    -- Metering, as for leases: everything before metered_until is charged; cost_units is its exact cost.
    metered_until           timestamptz,
    cost_units              numeric(40, 0) NOT NULL DEFAULT 0,
    charged_minor           bigint NOT NULL DEFAULT 0,
    currency                text NOT NULL,
    CONSTRAINT volumes_kind_valid CHECK (kind IN ('host', 'pool')),
    CONSTRAINT volumes_state_valid CHECK (state IN ('creating', 'ready', 'failed', 'deleting', 'deleted')),
    CONSTRAINT volumes_name_format CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    CONSTRAINT volumes_size_range CHECK (size_gib BETWEEN 1 AND 65536),
    CONSTRAINT volumes_idle_days_range CHECK (delete_after_idle_days IS NULL OR delete_after_idle_days BETWEEN 1 AND 365),
    CONSTRAINT volumes_deleted_when CHECK ((state IN ('deleting', 'deleted')) = (deleted_at IS NOT NULL)),
    CONSTRAINT volumes_charged_nonnegative CHECK (charged_minor >= 0)
);
CREATE UNIQUE INDEX volumes_name_unique ON volumes (tenant_id, name) WHERE state <> 'deleted';
CREATE INDEX volumes_tenant_idx ON volumes (tenant_id, id);
CREATE INDEX volumes_node_idx ON volumes (node_id) WHERE state <> 'deleted';
CREATE INDEX volumes_pool_idx ON volumes (pool_id) WHERE state NOT IN ('deleted', 'failed');

-- A volume attached to a lease: every node of the lease mounts it at /volumes/<mount_name> in its sandbox.
-- Read-write for one lease at a time, read-only for any number (never both at once: the attach checks that
-- under the volume's row lock; the index below makes two writers impossible even if the code is wrong). An
-- attachment ends (detached_at) when it is detached or its lease ends; the data stays in the volume.
CREATE TABLE volume_attachments (
    volume_id    uuid NOT NULL REFERENCES volumes (id),
    lease_id     uuid NOT NULL REFERENCES leases (id),
    mount_name   text NOT NULL,
    read_only    boolean NOT NULL,
    attached_at  timestamptz NOT NULL DEFAULT now(),
    detached_at  timestamptz,
    CONSTRAINT volume_attachments_mount_name_format CHECK (mount_name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    CONSTRAINT volume_attachments_detached_after CHECK (detached_at IS NULL OR detached_at >= attached_at)
);
CREATE UNIQUE INDEX volume_attachments_one_writer ON volume_attachments (volume_id)
    WHERE detached_at IS NULL AND NOT read_only;
CREATE UNIQUE INDEX volume_attachments_once_per_lease ON volume_attachments (lease_id, volume_id)
    WHERE detached_at IS NULL;
CREATE UNIQUE INDEX volume_attachments_mount_unique ON volume_attachments (lease_id, mount_name)
    WHERE detached_at IS NULL;
CREATE INDEX volume_attachments_volume_idx ON volume_attachments (volume_id) WHERE detached_at IS NULL;

-- Storage is billed as GPU time is (0004_billing.sql): per whole second from the volume's ready_at on its own grid,
-- at the storage price in force when each second begins, exact cost in units, charged floor(cost). A usage record
-- is a lease's or a volume's: a volume's carries its size (gib) and GiB-seconds, term 'storage', and its unit
-- price per GiB and 30-day month; the GPU columns are 0.
ALTER TABLE usage_records
    ALTER COLUMN lease_id DROP NOT NULL,
    ADD COLUMN volume_id   uuid REFERENCES volumes (id),
    ADD COLUMN gib         integer,
    ADD COLUMN gib_seconds bigint,
    ADD CONSTRAINT usage_records_one_subject CHECK ((lease_id IS NULL) <> (volume_id IS NULL)),
    ADD CONSTRAINT usage_records_volume_quantities CHECK (
        (volume_id IS NULL) = (gib IS NULL) AND (gib IS NULL) = (gib_seconds IS NULL)
        AND (volume_id IS NULL OR (term = 'storage' AND gpu_count = 0 AND gpu_seconds = 0 AND gib_seconds >= 0)));
CREATE INDEX usage_records_volume_idx ON usage_records (volume_id) WHERE volume_id IS NOT NULL;
CREATE INDEX volumes_metering_idx ON volumes (metered_until) WHERE metered_until IS NOT NULL;
