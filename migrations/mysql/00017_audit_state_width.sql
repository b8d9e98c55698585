-- +goose Up
-- A reload of the providers' configuration records every app in force
-- before and after it (service.App: provider account/app(name)); at 200
-- characters a merchant's sixth or seventh app was cut from the record.
-- 2,000 holds some fifty apps; dao.MaxAuditState cuts past it, marked.
ALTER TABLE admin_audit
    MODIFY before_state VARCHAR(2000) NOT NULL DEFAULT '',
    MODIFY after_state  VARCHAR(2000) NOT NULL DEFAULT '';

-- +goose Down
-- admin_audit is append-only: once a row holds more than 200 characters
-- this refuses (strict mode) rather than cut the trail.
ALTER TABLE admin_audit
    MODIFY before_state VARCHAR(200) NOT NULL DEFAULT '',
    MODIFY after_state  VARCHAR(200) NOT NULL DEFAULT '';
