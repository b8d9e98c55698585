-- +goose Up
-- The transactional outbox: each event is written in the transaction of
-- the state change it announces; a relay publishes it to NATS JetStream.
CREATE TABLE outbox (
    id              BIGINT        NOT NULL AUTO_INCREMENT,
    event_id        CHAR(36)      CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    aggregate_id    BIGINT        NOT NULL,
    event_type      VARCHAR(64)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    payload         TEXT          NOT NULL,
    state           VARCHAR(16)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'PENDING',
    attempts        INT           NOT NULL DEFAULT 0,
    next_attempt_at DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    last_error      VARCHAR(500)  NOT NULL DEFAULT '',
    create_time     DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    sent_time       DATETIME(3)   NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uk_outbox_event_id (event_id),
    KEY idx_outbox_state_next_attempt (state, next_attempt_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- Consumers' memory of what they already did: the business key is the
-- primary key, so doing a thing twice is a duplicate-key no-op.
CREATE TABLE idempotent_log (
    business_key VARCHAR(191) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    create_time  DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (business_key)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- The accounting journal: balanced double-entry lines, one event's lines
-- written in one transaction with its idempotent_log row.
CREATE TABLE journal_entry (
    id          BIGINT        NOT NULL AUTO_INCREMENT,
    event_id    CHAR(36)      CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    event_type  VARCHAR(64)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    order_id    BIGINT        NOT NULL,
    order_sn    VARCHAR(64)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    account     VARCHAR(64)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    debit       DECIMAL(18,2) NOT NULL DEFAULT 0,
    credit      DECIMAL(18,2) NOT NULL DEFAULT 0,
    create_time DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (id),
    KEY idx_journal_entry_event_id (event_id),
    KEY idx_journal_entry_order_id (order_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- +goose Down
DROP TABLE journal_entry;
DROP TABLE idempotent_log;
DROP TABLE outbox;
