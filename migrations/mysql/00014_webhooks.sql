-- +goose Up
-- Webhooks (issue 25): endpoints, one delivery per event and endpoint,
-- and every attempt's log. An outbox row is fanned out to the endpoints
-- by service.Fanout, which clears webhook_pending in the transaction that
-- writes its deliveries: the flag, not an id cursor (ids are not commit
-- order), is what says an event is still to be fanned out, so none is
-- skipped. Rows written before this migration are not pending (added at
-- 0, then the default set to 1 for new rows: both instant in MySQL 8 and
-- MariaDB 10.3+).
ALTER TABLE outbox ADD COLUMN webhook_pending TINYINT NOT NULL DEFAULT 0;
ALTER TABLE outbox ALTER COLUMN webhook_pending SET DEFAULT 1;
ALTER TABLE outbox ADD KEY idx_outbox_webhook_pending (webhook_pending, id);

CREATE TABLE webhook_endpoint (
    id                     BIGINT        NOT NULL AUTO_INCREMENT,
    url                    VARCHAR(2048) NOT NULL,
    event_types            VARCHAR(1000) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    description            VARCHAR(500)  NOT NULL DEFAULT '',
    enabled                TINYINT       NOT NULL DEFAULT 1,
    disabled_reason        VARCHAR(200)  NOT NULL DEFAULT '',
    secret_sealed          VARCHAR(255)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    previous_secret_sealed VARCHAR(255)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
    previous_until         DATETIME(3)   NULL,
    failing_since          DATETIME(3)   NULL,
    create_time            DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    update_time            DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- One row, locked by every fan-out and every endpoint change: an endpoint
-- made (or enabled) after a fan-out committed gets none of its events, and
-- one made before gets all of them.
CREATE TABLE webhook_fanout (
    id INT NOT NULL,
    PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
INSERT INTO webhook_fanout (id) VALUES (1);

CREATE TABLE webhook_delivery (
    id              BIGINT       NOT NULL AUTO_INCREMENT,
    endpoint_id     BIGINT       NOT NULL,
    event_id        CHAR(36)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    event_type      VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    order_id        BIGINT       NOT NULL DEFAULT 0,
    body            TEXT         NOT NULL,
    state           VARCHAR(16)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'PENDING',
    attempts        INT          NOT NULL DEFAULT 0,
    tries           INT          NOT NULL DEFAULT 0,
    next_attempt_at DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    lease           VARCHAR(32)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
    last_status     INT          NOT NULL DEFAULT 0,
    last_error      VARCHAR(500) NOT NULL DEFAULT '',
    create_time     DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    update_time     DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (id),
    UNIQUE KEY uk_webhook_delivery_endpoint_event (endpoint_id, event_id),
    KEY idx_webhook_delivery_due (endpoint_id, state, next_attempt_at),
    KEY idx_webhook_delivery_event (event_id),
    KEY idx_webhook_delivery_order (order_id),
    KEY idx_webhook_delivery_state_update (state, update_time)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE webhook_attempt (
    id          BIGINT        NOT NULL AUTO_INCREMENT,
    delivery_id BIGINT        NOT NULL,
    endpoint_id BIGINT        NOT NULL,
    event_id    CHAR(36)      CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    attempt     INT           NOT NULL,
    attempted_at DATETIME(3)  NOT NULL,
    duration_ms INT           NOT NULL,
    status      INT           NOT NULL DEFAULT 0,
    body        VARCHAR(1024) NOT NULL DEFAULT '',
    error       VARCHAR(500)  NOT NULL DEFAULT '',
    PRIMARY KEY (id),
    KEY idx_webhook_attempt_delivery (delivery_id),
    KEY idx_webhook_attempt_at (attempted_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- +goose Down
DROP TABLE webhook_attempt;
DROP TABLE webhook_delivery;
DROP TABLE webhook_fanout;
DROP TABLE webhook_endpoint;
ALTER TABLE outbox DROP KEY idx_outbox_webhook_pending;
ALTER TABLE outbox DROP COLUMN webhook_pending;
