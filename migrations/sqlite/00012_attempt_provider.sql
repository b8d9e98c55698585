-- +goose Up
-- The SQLite twin of mysql/00012.
ALTER TABLE oms_pay_attempt ADD COLUMN provider TEXT NOT NULL DEFAULT 'alipay';

-- +goose Down
ALTER TABLE oms_pay_attempt DROP COLUMN provider;
