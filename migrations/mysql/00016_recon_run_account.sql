-- +goose Up
-- A bill covers one provider account (an Alipay seller_id, a WeChat Pay
-- mchid), so a reconciliation run is of (provider, account, bill date).
-- A migration cannot read PROVIDERS_FILE: the runs before this one keep
-- '' — the provider's first account, as the ledger's '' is — and the
-- first account's next run of such a date takes the row over (dao.ClaimRun).
ALTER TABLE recon_run
    ADD COLUMN account VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
    DROP KEY uk_recon_run_provider_date,
    ADD UNIQUE KEY uk_recon_run_provider_account_date (provider, account, bill_date);

-- A bill line matched is recorded under its run's account, so that the
-- retention job deletes the lines of a run reconciled cleanly and not
-- another account's of the same date (whose re-run they keep from booking
-- fees twice).
ALTER TABLE recon_seen
    ADD COLUMN account VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE recon_seen DROP COLUMN account;
ALTER TABLE recon_run
    DROP KEY uk_recon_run_provider_account_date,
    ADD UNIQUE KEY uk_recon_run_provider_date (provider, bill_date),
    DROP COLUMN account;
