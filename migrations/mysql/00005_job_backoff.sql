-- +goose Up
-- Per-row back-off for the background jobs whose tables have no attempt
-- columns of their own (the closer's orders, the trade-close job's
-- attempts, the refund job's REFUND_PENDING payments): a row a job failed
-- on is left out of that job's batches until next_try_at, so a batch of
-- rows that always fail cannot starve newer ones. A row is named by
-- row_id (tables keyed by id) or row_key (tables keyed by text).
CREATE TABLE job_backoff (
    job         VARCHAR(32)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    row_id      BIGINT       NOT NULL DEFAULT 0,
    row_key     VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
    failures    INT          NOT NULL,
    next_try_at DATETIME(3)  NOT NULL,
    last_error  VARCHAR(500) NOT NULL DEFAULT '',
    update_time DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (job, row_id, row_key)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- +goose Down
DROP TABLE job_backoff;
