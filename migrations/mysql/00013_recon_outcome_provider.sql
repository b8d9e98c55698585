-- +goose Up
-- Reconciliation's outcomes name no provider: a payment or a refund
-- missing from WeChat Pay's bill is the same finding as one missing from
-- Alipay's. Items recorded before WeChat Pay are renamed.
UPDATE recon_item SET outcome = 'MISSING_AT_PROVIDER' WHERE outcome = 'MISSING_AT_ALIPAY';
UPDATE recon_item SET outcome = 'REFUND_MISSING_AT_PROVIDER' WHERE outcome = 'REFUND_MISSING_AT_ALIPAY';

-- +goose Down
-- Every provider's items take Alipay's old names.
UPDATE recon_item SET outcome = 'MISSING_AT_ALIPAY' WHERE outcome = 'MISSING_AT_PROVIDER';
UPDATE recon_item SET outcome = 'REFUND_MISSING_AT_ALIPAY' WHERE outcome = 'REFUND_MISSING_AT_PROVIDER';
