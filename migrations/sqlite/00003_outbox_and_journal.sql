-- +goose Up
-- The SQLite twin of mysql/00003.
CREATE TABLE outbox (
    id              INTEGER  NOT NULL PRIMARY KEY AUTOINCREMENT,
    event_id        TEXT     NOT NULL,
    aggregate_id    INTEGER  NOT NULL,
    event_type      TEXT     NOT NULL,
    payload         TEXT     NOT NULL,
    state           TEXT     NOT NULL DEFAULT 'PENDING',
    attempts        INTEGER  NOT NULL DEFAULT 0,
    next_attempt_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    last_error      TEXT     NOT NULL DEFAULT '',
    create_time     DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    sent_time       DATETIME NULL
);
CREATE UNIQUE INDEX uk_outbox_event_id ON outbox (event_id);
CREATE INDEX idx_outbox_state_next_attempt ON outbox (state, next_attempt_at);

CREATE TABLE idempotent_log (
    business_key TEXT     NOT NULL PRIMARY KEY,
    create_time  DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
);

CREATE TABLE journal_entry (
    id          INTEGER  NOT NULL PRIMARY KEY AUTOINCREMENT,
    event_id    TEXT     NOT NULL,
    event_type  TEXT     NOT NULL,
    order_id    INTEGER  NOT NULL,
    order_sn    TEXT     NOT NULL,
    account     TEXT     NOT NULL,
    debit       TEXT     NOT NULL DEFAULT '0.00',
    credit      TEXT     NOT NULL DEFAULT '0.00',
    create_time DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
);
CREATE INDEX idx_journal_entry_event_id ON journal_entry (event_id);
CREATE INDEX idx_journal_entry_order_id ON journal_entry (order_id);

-- +goose Down
DROP TABLE journal_entry;
DROP TABLE idempotent_log;
DROP TABLE outbox;
