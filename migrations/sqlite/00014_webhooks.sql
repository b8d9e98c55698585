-- +goose Up
-- The SQLite twin of mysql/00014. SQLite cannot change a column's
-- default, so rows written before are marked not pending by an update.
ALTER TABLE outbox ADD COLUMN webhook_pending INTEGER NOT NULL DEFAULT 1;
UPDATE outbox SET webhook_pending = 0;
CREATE INDEX idx_outbox_webhook_pending ON outbox (webhook_pending, id);

CREATE TABLE webhook_endpoint (
    id                     INTEGER  NOT NULL PRIMARY KEY AUTOINCREMENT,
    url                    TEXT     NOT NULL,
    event_types            TEXT     NOT NULL,
    description            TEXT     NOT NULL DEFAULT '',
    enabled                INTEGER  NOT NULL DEFAULT 1,
    disabled_reason        TEXT     NOT NULL DEFAULT '',
    secret_sealed          TEXT     NOT NULL,
    previous_secret_sealed TEXT     NOT NULL DEFAULT '',
    previous_until         DATETIME NULL,
    failing_since          DATETIME NULL,
    create_time            DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    update_time            DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
);

CREATE TABLE webhook_fanout (
    id INTEGER NOT NULL PRIMARY KEY
);
INSERT INTO webhook_fanout (id) VALUES (1);

CREATE TABLE webhook_delivery (
    id              INTEGER  NOT NULL PRIMARY KEY AUTOINCREMENT,
    endpoint_id     INTEGER  NOT NULL,
    event_id        TEXT     NOT NULL,
    event_type      TEXT     NOT NULL,
    order_id        INTEGER  NOT NULL DEFAULT 0,
    body            TEXT     NOT NULL,
    state           TEXT     NOT NULL DEFAULT 'PENDING',
    attempts        INTEGER  NOT NULL DEFAULT 0,
    tries           INTEGER  NOT NULL DEFAULT 0,
    next_attempt_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    lease           TEXT     NOT NULL DEFAULT '',
    last_status     INTEGER  NOT NULL DEFAULT 0,
    last_error      TEXT     NOT NULL DEFAULT '',
    create_time     DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    update_time     DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
);
CREATE UNIQUE INDEX uk_webhook_delivery_endpoint_event ON webhook_delivery (endpoint_id, event_id);
CREATE INDEX idx_webhook_delivery_due ON webhook_delivery (endpoint_id, state, next_attempt_at);
CREATE INDEX idx_webhook_delivery_event ON webhook_delivery (event_id);
CREATE INDEX idx_webhook_delivery_order ON webhook_delivery (order_id);
CREATE INDEX idx_webhook_delivery_state_update ON webhook_delivery (state, update_time);

CREATE TABLE webhook_attempt (
    id           INTEGER  NOT NULL PRIMARY KEY AUTOINCREMENT,
    delivery_id  INTEGER  NOT NULL,
    endpoint_id  INTEGER  NOT NULL,
    event_id     TEXT     NOT NULL,
    attempt      INTEGER  NOT NULL,
    attempted_at DATETIME NOT NULL,
    duration_ms  INTEGER  NOT NULL,
    status       INTEGER  NOT NULL DEFAULT 0,
    body         TEXT     NOT NULL DEFAULT '',
    error        TEXT     NOT NULL DEFAULT ''
);
CREATE INDEX idx_webhook_attempt_delivery ON webhook_attempt (delivery_id);
CREATE INDEX idx_webhook_attempt_at ON webhook_attempt (attempted_at);

-- +goose Down
DROP TABLE webhook_attempt;
DROP TABLE webhook_delivery;
DROP TABLE webhook_fanout;
DROP TABLE webhook_endpoint;
DROP INDEX idx_outbox_webhook_pending;
ALTER TABLE outbox DROP COLUMN webhook_pending;
