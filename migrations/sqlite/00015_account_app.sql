-- +goose Up
-- The SQLite twin of mysql/00015: the account and app of every payment,
-- pay attempt and refund; '' (every row before it) is the provider's
-- first account and its first app.
ALTER TABLE oms_order_payment ADD COLUMN account TEXT NOT NULL DEFAULT '';
ALTER TABLE oms_order_payment ADD COLUMN app TEXT NOT NULL DEFAULT '';
ALTER TABLE oms_pay_attempt ADD COLUMN account TEXT NOT NULL DEFAULT '';
ALTER TABLE oms_pay_attempt ADD COLUMN app TEXT NOT NULL DEFAULT '';
ALTER TABLE oms_refund ADD COLUMN account TEXT NOT NULL DEFAULT '';
ALTER TABLE oms_refund ADD COLUMN app TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE oms_refund DROP COLUMN app;
ALTER TABLE oms_refund DROP COLUMN account;
ALTER TABLE oms_pay_attempt DROP COLUMN app;
ALTER TABLE oms_pay_attempt DROP COLUMN account;
ALTER TABLE oms_order_payment DROP COLUMN app;
ALTER TABLE oms_order_payment DROP COLUMN account;
