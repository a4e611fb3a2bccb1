-- gpuplane schema, part 4: prices over time, metering, the prepaid ledger, invoices.
--
-- Money rule (see README "Billing"): usage is metered per second. For one lease the exact cost of
-- everything metered so far is sum(gpu_seconds x rate) in units of 1/2,592,000 of a minor unit (an hourly
-- price counts 720 units per GPU-second, a monthly price - per 30-day month - 1 unit). What has been charged
-- is always floor(exact cost): each metering step charges the difference, so rounding never accumulates,
-- every step's charge is a whole minor unit, and the sum of a lease's charges equals its cost rounded down.

-- A price takes effect at effective_from and holds until the next one. Metering only ever charges time
-- that has passed, and a new price may not start in the past, so a change never rewrites a charge.
CREATE TABLE pool_prices (
    id                         uuid PRIMARY KEY,
    pool_id                    uuid NOT NULL REFERENCES pools (id) ON DELETE CASCADE,
    effective_from             timestamptz NOT NULL,
    price_per_gpu_hour_minor   bigint NOT NULL,
    price_per_gpu_month_minor  bigint,
    created_at                 timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT pool_prices_effective_unique UNIQUE (pool_id, effective_from),
    CONSTRAINT pool_prices_hour_range CHECK (price_per_gpu_hour_minor BETWEEN 0 AND 1000000000),
    CONSTRAINT pool_prices_month_range CHECK (price_per_gpu_month_minor IS NULL OR price_per_gpu_month_minor BETWEEN 0 AND 100000000000)
);
INSERT INTO pool_prices (id, pool_id, effective_from, price_per_gpu_hour_minor)
SELECT gen_random_uuid(), id, created_at, price_per_gpu_hour_minor FROM pools;

-- The price in force now, per pool: the one rule every reader of "the current price" uses.
CREATE VIEW pool_current_prices AS
SELECT DISTINCT ON (pool_id) pool_id, price_per_gpu_hour_minor, price_per_gpu_month_minor
FROM pool_prices WHERE effective_from <= now() ORDER BY pool_id, effective_from DESC;

-- Availability promise of monthly leases: below sla_target_ppm (parts per million) in a month, a credit of
-- sla_credit_percent of that month's charge is posted.
ALTER TABLE pools ADD COLUMN sla_target_ppm integer;
ALTER TABLE pools ADD COLUMN sla_credit_percent integer;
ALTER TABLE pools ADD CONSTRAINT pools_sla_valid CHECK (
    (sla_target_ppm IS NULL) = (sla_credit_percent IS NULL)
    AND (sla_target_ppm IS NULL OR sla_target_ppm BETWEEN 0 AND 1000000)
    AND (sla_credit_percent IS NULL OR sla_credit_percent BETWEEN 0 AND 100));

-- Metering state per lease: everything before metered_until is charged; cost_units is its exact cost.
ALTER TABLE leases ADD COLUMN metered_until timestamptz;
ALTER TABLE leases ADD COLUMN cost_units numeric(40, 0) NOT NULL DEFAULT 0;
ALTER TABLE leases ADD COLUMN charged_minor bigint NOT NULL DEFAULT 0;
ALTER TABLE leases ADD COLUMN currency text;
ALTER TABLE leases ADD COLUMN balance_warned_at timestamptz;
UPDATE leases l SET metered_until = l.starts_at, currency = p.currency FROM pools p WHERE p.id = l.pool_id;
CREATE INDEX leases_metering_idx ON leases (metered_until) WHERE metered_until IS NOT NULL;

-- One row per metered stretch of a lease at one price inside one calendar month (UTC): the export's rows.
CREATE TABLE usage_records (
    id              uuid PRIMARY KEY,
    tenant_id       uuid NOT NULL REFERENCES tenants (id),
    lease_id        uuid NOT NULL REFERENCES leases (id),
    pool_id         uuid NOT NULL REFERENCES pools (id),
    period_start    timestamptz NOT NULL,
    period_end      timestamptz NOT NULL,
    gpu_count       integer NOT NULL,
    gpu_seconds     bigint NOT NULL,
    term            text NOT NULL,
    unit_price_minor bigint NOT NULL,
    currency        text NOT NULL,
    cost_units      numeric(40, 0) NOT NULL,
    amount_minor    bigint NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT usage_records_period_valid CHECK (period_end > period_start),
    CONSTRAINT usage_records_amount_nonnegative CHECK (amount_minor >= 0 AND gpu_seconds >= 0)
);
CREATE INDEX usage_records_tenant_period_idx ON usage_records (tenant_id, period_start, id);
CREATE INDEX usage_records_period_idx ON usage_records (period_start, id);
CREATE INDEX usage_records_lease_idx ON usage_records (lease_id);

-- The prepaid ledger: append-only. The balance is the sum of a tenant's entries per currency.
CREATE TABLE ledger_entries (
    id              uuid PRIMARY KEY,
    tenant_id       uuid NOT NULL REFERENCES tenants (id),
    kind            text NOT NULL,
    amount_minor    bigint NOT NULL,
    currency        text NOT NULL,
    lease_id        uuid REFERENCES leases (id),
    usage_record_id uuid REFERENCES usage_records (id),
    -- For usage: the usage record's period_start, so ledger, export and invoice select the same rows.
    period_at       timestamptz NOT NULL DEFAULT now(),
    reason          text,
    created_by      text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT ledger_entries_kind_valid CHECK (kind IN ('topup', 'adjustment', 'usage', 'credit')),
    CONSTRAINT ledger_entries_sign CHECK (
        (kind = 'usage' AND amount_minor <= 0 AND usage_record_id IS NOT NULL)
        OR (kind IN ('topup', 'credit') AND amount_minor > 0)
        OR (kind = 'adjustment' AND amount_minor <> 0)),
    CONSTRAINT ledger_entries_usage_once UNIQUE (usage_record_id),
    CONSTRAINT ledger_entries_currency_format CHECK (currency ~ '^[A-Z]{3}$')
);
CREATE INDEX ledger_entries_tenant_idx ON ledger_entries (tenant_id, id);
CREATE INDEX ledger_entries_period_idx ON ledger_entries (kind, period_at);

CREATE FUNCTION ledger_entries_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'ledger entries are append-only' USING ERRCODE = 'restrict_violation';
END $$;
CREATE TRIGGER ledger_entries_no_update BEFORE UPDATE OR DELETE ON ledger_entries
    FOR EACH ROW EXECUTE FUNCTION ledger_entries_append_only();

-- The running balance per tenant and currency, updated in the same transaction as every ledger insert
-- (UPDATE ... SET balance = balance + x: concurrent entries serialize on the row, none is lost). A test
-- checks it always equals the ledger's sum.
CREATE TABLE tenant_balances (
    tenant_id     uuid NOT NULL REFERENCES tenants (id),
    currency      text NOT NULL,
    balance_minor bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, currency)
);

CREATE TABLE invoices (
    id           uuid PRIMARY KEY,
    tenant_id    uuid NOT NULL REFERENCES tenants (id),
    month        date NOT NULL,
    currency     text NOT NULL,
    state        text NOT NULL DEFAULT 'draft',
    usage_minor  bigint NOT NULL,
    credits_minor bigint NOT NULL,
    total_minor  bigint NOT NULL,
    lines        jsonb NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    issued_at    timestamptz,
    paid_at      timestamptz,
    CONSTRAINT invoices_once_per_month UNIQUE (tenant_id, month, currency),
    CONSTRAINT invoices_state_valid CHECK (state IN ('draft', 'issued', 'paid')),
    CONSTRAINT invoices_month_first_day CHECK (extract(day FROM month) = 1)
);
CREATE INDEX invoices_tenant_idx ON invoices (tenant_id, month);
