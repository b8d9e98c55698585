-- +goose Up
-- The SQLite twin of mysql/00011.
CREATE TABLE oms_refund_change (
    id             INTEGER  NOT NULL PRIMARY KEY AUTOINCREMENT,
    out_request_no TEXT     NOT NULL,
    from_state     TEXT     NOT NULL DEFAULT '',
    to_state       TEXT     NOT NULL,
    changed_by     TEXT     NOT NULL DEFAULT '',
    note           TEXT     NOT NULL DEFAULT '',
    create_time    DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
);
CREATE INDEX idx_oms_refund_change_out_request_no ON oms_refund_change (out_request_no, id);

-- +goose Down
DROP TABLE oms_refund_change;
