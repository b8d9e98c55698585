-- +goose Up
-- The SQLite twin of mysql/00005.
CREATE TABLE job_backoff (
    job         TEXT     NOT NULL,
    row_id      INTEGER  NOT NULL DEFAULT 0,
    row_key     TEXT     NOT NULL DEFAULT '',
    failures    INTEGER  NOT NULL,
    next_try_at DATETIME NOT NULL,
    last_error  TEXT     NOT NULL DEFAULT '',
    update_time DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (job, row_id, row_key)
);

-- +goose Down
DROP TABLE job_backoff;
