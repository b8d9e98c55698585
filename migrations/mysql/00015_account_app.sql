-- +goose Up
-- Every payment, pay attempt and refund names the provider account (an
-- Alipay seller_id, a WeChat Pay mchid) and app (an Alipay app_id, a
-- WeChat Pay appid) that took the money: queries, closes and refunds go
-- through that app and no other. A migration cannot read PROVIDERS_FILE,
-- so the rows written before this one keep '' in both, which means "the
-- provider's first account, its first app" (docs/configuration.md): the
-- single account and app every deployment before several apps had.
ALTER TABLE oms_order_payment
    ADD COLUMN account VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
    ADD COLUMN app VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '';
ALTER TABLE oms_pay_attempt
    ADD COLUMN account VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
    ADD COLUMN app VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '';
ALTER TABLE oms_refund
    ADD COLUMN account VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
    ADD COLUMN app VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE oms_refund DROP COLUMN app, DROP COLUMN account;
ALTER TABLE oms_pay_attempt DROP COLUMN app, DROP COLUMN account;
ALTER TABLE oms_order_payment DROP COLUMN app, DROP COLUMN account;
