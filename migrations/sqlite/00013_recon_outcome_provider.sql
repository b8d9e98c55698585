-- +goose Up
-- The SQLite twin of mysql/00013: reconciliation's outcomes name no
-- provider, and items recorded before WeChat Pay are renamed.
UPDATE recon_item SET outcome = 'MISSING_AT_PROVIDER' WHERE outcome = 'MISSING_AT_ALIPAY';
UPDATE recon_item SET outcome = 'REFUND_MISSING_AT_PROVIDER' WHERE outcome = 'REFUND_MISSING_AT_ALIPAY';

-- +goose Down
UPDATE recon_item SET outcome = 'MISSING_AT_ALIPAY' WHERE outcome = 'MISSING_AT_PROVIDER';
UPDATE recon_item SET outcome = 'REFUND_MISSING_AT_ALIPAY' WHERE outcome = 'REFUND_MISSING_AT_PROVIDER';
