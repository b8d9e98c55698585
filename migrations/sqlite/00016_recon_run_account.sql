-- +goose Up
-- The SQLite twin of mysql/00016: runs are of (provider, account, bill
-- date); '' (every run before it) is the provider's first account.
ALTER TABLE recon_run ADD COLUMN account TEXT NOT NULL DEFAULT '';
DROP INDEX uk_recon_run_provider_date;
CREATE UNIQUE INDEX uk_recon_run_provider_account_date ON recon_run (provider, account, bill_date);

ALTER TABLE recon_seen ADD COLUMN account TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE recon_seen DROP COLUMN account;
DROP INDEX uk_recon_run_provider_account_date;
CREATE UNIQUE INDEX uk_recon_run_provider_date ON recon_run (provider, bill_date);
ALTER TABLE recon_run DROP COLUMN account;
