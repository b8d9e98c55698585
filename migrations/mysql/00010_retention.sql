-- +goose Up
-- The retention job (service.Retention) deletes by these indexes, in small
-- batches: SENT outbox rows by the time they were sent, and a reconciled
-- date's matched bill lines by their date. A date whose lines are being
-- deleted, or were, is marked on its run (seen_purge: PURGING, then
-- PURGED), so it is never reconciled again: its lines were what kept a
-- re-run from booking the day's fees twice.
ALTER TABLE outbox
    ADD KEY idx_outbox_state_sent_time (state, sent_time);
ALTER TABLE recon_seen
    ADD KEY idx_recon_seen_bill_date (provider, bill_date);
ALTER TABLE recon_run
    ADD COLUMN seen_purge VARCHAR(8) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE recon_run DROP COLUMN seen_purge;
ALTER TABLE recon_seen DROP KEY idx_recon_seen_bill_date;
ALTER TABLE outbox DROP KEY idx_outbox_state_sent_time;
