-- +goose Up
-- The SQLite twin of mysql/00010.
CREATE INDEX idx_outbox_state_sent_time ON outbox (state, sent_time);
CREATE INDEX idx_recon_seen_bill_date ON recon_seen (provider, bill_date);
ALTER TABLE recon_run ADD COLUMN seen_purge TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE recon_run DROP COLUMN seen_purge;
DROP INDEX idx_recon_seen_bill_date;
DROP INDEX idx_outbox_state_sent_time;
