-- +goose Up
-- Every payment attempt names the provider its trade is open at: the
-- active query, the trade close and checkout's switch ask that provider,
-- and only it. Attempts made before WeChat Pay are all Alipay's.
ALTER TABLE oms_pay_attempt
    ADD COLUMN provider VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'alipay';

-- +goose Down
ALTER TABLE oms_pay_attempt DROP COLUMN provider;
